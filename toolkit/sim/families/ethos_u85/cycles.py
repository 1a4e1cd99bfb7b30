"""Ethos-U85 cycles: to be written (issue 47 part 3)."""

from __future__ import annotations

from ...memory_system import MemorySystem
from ...records import OpRecord
from ..accelerator import Accelerator
from ..family import OpTiming


def op_timing(record: OpRecord, accelerator: Accelerator, memory: MemorySystem) -> OpTiming:
    return OpTiming(0, 0)
