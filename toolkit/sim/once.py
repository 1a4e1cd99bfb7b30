"""functools.cached_property without Python 3.11's lock: its first read of a plan's frame cost
more than the rest of looking the plan up (3.12 dropped the lock too). Two threads that read it
at once may both compute it; the last one's value stays."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar, overload

T = TypeVar("T")


class once(Generic[T]):  # noqa: N801 (a decorator, named like cached_property)
    def __init__(self, compute: Callable[[Any], T]) -> None:
        self._compute = compute
        self._name = compute.__name__
        self.__doc__ = compute.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> once[T]: ...

    @overload
    def __get__(self, obj: object, owner: type | None = None) -> T: ...

    def __get__(self, obj: object | None, owner: type | None = None) -> T | once[T]:
        if obj is None:
            return self
        value = obj.__dict__[self._name] = self._compute(obj)
        return value
