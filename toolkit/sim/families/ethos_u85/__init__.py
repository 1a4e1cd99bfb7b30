"""Ethos-U85's home (toolkit.sim.families.ethos_u85): its register map (registers.py), its five configurations
(configurations.py), and everything that reads its registers or knows its hardware:

- fields.py and decode_*.py: an operation's registers described as the shared engines run it
  (sim/operations.py); decoder.py: which command is which, and what is refused up front;
- weights.py: the weight and scale streams (u85_codec.py and u85_weights.py decode them);
- cycles.py: each operation's cycles and traffic, from Vela 5.2.0's U85 performance model.

Chaining buffers are regions of their own (fields.CHAIN_REGION + index) that the simulator
holds whole.
"""

from __future__ import annotations

import numpy as np

from ...commands import Command
from ...fvp_timing import FvpMemory, PmuPrediction
from ...kernel import Kernel
from ...layouts import FeatureMap
from ...memory_system import MemorySystem
from ...operations import Operation
from ...records import OpRecord
from ...registers import Registers
from ..accelerator_config import Accelerator
from ..family import NpuFamily, OpTiming
from . import cycles, decoder, fields, timeline, weights
from .configurations import accelerators
from .registers import COMMANDS, PRODUCTS, cmd0, cmd1

__all__ = ["ACCELERATORS", "COMMANDS", "FAMILY", "PRODUCTS", "cmd0", "cmd1"]

_CHAIN_BYTES = 1 << 24  # the most a chained feature map may take (the simulator's bound)


class EthosU85(NpuFamily):
    def __init__(self) -> None:
        super().__init__("Ethos-U85", PRODUCTS, COMMANDS)
        self.configurations = accelerators(self)
        self.cycles_checked = False  # no U85 PMU figure is known here

    def kernel(self, registers: Registers) -> Kernel:
        return fields.kernel_from(registers)

    def describe(
        self, accelerator: Accelerator, command: Command, values: dict[str, int]
    ) -> Operation:
        return decoder.describe(accelerator, command, values)

    def output_map(self, record: OpRecord) -> FeatureMap:
        return fields.ofm_map(Registers(dict(record.registers)))

    def decode_weights(self, stream: bytes, fmt: object) -> np.ndarray:
        assert isinstance(fmt, weights.U85WeightFormat)
        return weights.decode_matrix(stream, fmt)

    def decode_scales(
        self, raw: np.ndarray, channels: int, where: str, fmt: object = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return weights.decode_scale_stream(raw, channels, where, bool(fmt))

    def op_timing(
        self,
        record: OpRecord,
        accelerator: Accelerator,
        memory: MemorySystem,
        activation_cost: float | None = None,
    ) -> OpTiming:
        return cycles.op_timing(record, accelerator, memory)

    def predict_pmu(
        self,
        accelerator: Accelerator,
        command_stream: bytes,
        records: tuple[OpRecord, ...],
        memory: FvpMemory,
    ) -> PmuPrediction:
        return timeline.predict_pmu(command_stream, records, memory, accelerator)

    def internal_regions(self, accelerator: Accelerator) -> dict[int, int]:
        return {fields.CHAIN_REGION + i: _CHAIN_BYTES for i in range(fields.CHAIN_BUFFERS)}


FAMILY = EthosU85()
ACCELERATORS = FAMILY.configurations
