"""Ethos-U55 and Ethos-U65's home: one register map (registers.py: Vela's ethos_u55_regs serves
both), six configurations (configurations.py), and everything that reads their registers or
knows their hardware:

- fields.py and decode_*.py: an operation's registers described as the shared engines run it
  (sim/operations.py), with the record its timing reads; decoder.py: which command is which;
- weights.py, mlw_decoder.py: the weight and scale streams (mlw-compressed weights in Vela's
  block order, 10-byte scale records);
- cycles.py: each operation's compute and memory cycles; traffic.py: its AXI beats;
  timeline.py: the stream's timeline on the FVP's ports (DMA and kernel waits, BLOCKDEP).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...commands import Command
from ...fvp_timing import FvpMemory, PmuPrediction, Transfer
from ...kernel import Kernel
from ...layouts import FeatureMap
from ...memory_system import MemorySystem
from ...operations import Operation
from ...records import OpRecord
from ...registers import Registers
from ..accelerator_config import Accelerator
from ..family import AddressRun, NpuFamily, OpTiming, RawOperation
from . import cycles, decoder, fields, timeline, traffic, weights
from .configurations import accelerators
from .registers import COMMANDS, PRODUCTS

__all__ = ["FAMILY"]


class EthosU55(NpuFamily):
    def __init__(self) -> None:
        super().__init__("Ethos-U55/U65", PRODUCTS, COMMANDS)
        self.configurations = accelerators(self)

    def kernel(self, registers: Registers) -> Kernel:
        return fields.kernel_from(registers)

    def describe(
        self, accelerator: Accelerator, command: Command, values: dict[str, int]
    ) -> Operation:
        return decoder.describe(accelerator, command, values)

    def address_run(self, operations: Sequence[RawOperation], first: int) -> AddressRun:
        return decoder.address_run(operations, first)

    def output_map(self, record: OpRecord) -> FeatureMap:
        return fields.ofm_map(Registers(dict(record.registers)))

    def decode_weights(self, stream: bytes, fmt: object) -> np.ndarray:
        assert isinstance(fmt, weights.WeightFormat)
        return weights.decode_matrix(stream, fmt)

    def decode_scales(
        self, raw: np.ndarray, channels: int, where: str, fmt: object = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return weights.decode_scales(raw, channels, where)

    def op_timing(
        self,
        record: OpRecord,
        accelerator: Accelerator,
        memory: MemorySystem,
        activation_cost: float | None = None,
    ) -> OpTiming:
        return cycles.op_timing(record, accelerator, memory, activation_cost)

    def output_cycles(self, record: OpRecord, accelerator: Accelerator) -> float:
        return cycles.output_cycles_per_element(record, accelerator)

    def transfers(self, record: OpRecord, accelerator: Accelerator) -> tuple[Transfer, ...]:
        return traffic.op_transfers(record, accelerator.beat_bytes)

    def predict_pmu(
        self,
        accelerator: Accelerator,
        command_stream: bytes,
        records: tuple[OpRecord, ...],
        memory: FvpMemory,
    ) -> PmuPrediction:
        return timeline.predict_pmu(command_stream, records, memory, accelerator)

    def forget(self) -> None:
        weights.forget_formats()


FAMILY = EthosU55()
