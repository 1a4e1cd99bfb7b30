"""once: cached_property's behaviour without 3.11's lock."""

from __future__ import annotations

from toolkit.sim.once import once


class _Counted:
    def __init__(self) -> None:
        self.calls = 0

    @once
    def value(self) -> list[int]:
        """A fresh list per instance."""
        self.calls += 1
        return [self.calls]


def test_computed_once_per_instance_and_kept_in_its_dict():
    a, b = _Counted(), _Counted()
    first = a.value
    assert a.value is first and a.calls == 1 and a.__dict__["value"] is first
    assert b.value == [1] and b.value is not first
    a.__dict__["value"] = [7]  # set as a cached_property's value is (tests put a frame so)
    assert a.value == [7] and a.calls == 1
    assert (
        isinstance(_Counted.value, once) and _Counted.value.__doc__ == "A fresh list per instance."
    )
