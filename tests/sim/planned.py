"""One operation planned from its registers, as plan.py plans a program's: its family describes
it (NpuFamily.describe), the shared engines plan the description (engines.prepare)."""

from __future__ import annotations

from toolkit.sim.decoded import DecodedStreams
from toolkit.sim.engines import prepare
from toolkit.sim.families import accelerator
from toolkit.sim.memory import Memory
from toolkit.sim.records import Step
from toolkit.sim.registers import Registers


def planned(regs: Registers, memory: Memory, npu: str = "ethos-u55-128") -> Step:
    configuration = accelerator(npu)
    family = configuration.family
    operation = family.describe(configuration, regs.command, dict(regs.values))
    return prepare(operation, memory, DecodedStreams(family))


def shram_bytes(npu: str) -> int:
    return accelerator(npu).shram_bytes
