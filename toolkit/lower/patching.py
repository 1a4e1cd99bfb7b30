"""Setting an attribute of upstream code (torch, ExecuTorch, torchao) for the length of a context,
and putting it back after: the one way etk patches upstream (lower/upstream_speedups.py)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_ABSENT = object()


@contextmanager
def patched(*changes: tuple[Any, str, Any]) -> Iterator[None]:
    """Each (owner, name, value): owner.name is value inside the context. After it the owner's
    own attribute is restored, or deleted when it had none (it inherited the name)."""
    saved = [(owner, name, owner.__dict__.get(name, _ABSENT)) for owner, name, _ in changes]
    for owner, name, value in changes:
        setattr(owner, name, value)
    try:
        yield
    finally:
        for owner, name, original in reversed(saved):
            if original is _ABSENT:
                delattr(owner, name)
            else:
                setattr(owner, name, original)
