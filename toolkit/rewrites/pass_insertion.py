"""Our passes in ExecuTorch's Arm TOSA pipeline, for the length of a lowering only."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from executorch.backends.arm._passes import ArmPass, arm_pass_manager


@contextmanager
def inserted_after(anchor: type[ArmPass], ours: ArmPass) -> Iterator[ArmPass]:
    """Run `ours` after `anchor` in every Arm TOSA pipeline started inside.

    ExecuTorch's registry (register_pass_insertions_after) is global and has no unregister:
    on exit we remove exactly our pass instance, and the registry entry if we created it,
    leaving other registrations as they were.
    """
    registry = arm_pass_manager._registered_pass_insertions
    created = anchor not in registry
    arm_pass_manager.register_pass_insertions_after(anchor, [ours])
    try:
        yield ours
    finally:
        entry = registry.get(anchor)
        if entry is not None:
            entry.after_passes[:] = [p for p in entry.after_passes if p is not ours]
            if created and not entry.before_passes and not entry.after_passes:
                del registry[anchor]
