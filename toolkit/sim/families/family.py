"""The interface between an NPU family's home and the shared simulator.

A family is an object (as Vela's C++ core has `architecture/ethosu55` and `ethosu85` behind one
Architecture interface), passed with each configuration (`Accelerator.family`), never named. Its
home (a folder under families/) is the only code that reads its registers: it turns its command
stream into operation descriptions (sim/operations.py: feature maps, kernel, output stage,
weight and scale streams, DMA), which the shared engines (sim/conv.py, pool.py, elementwise.py,
dma.py and the native kernels) run without reading a register; and it owns its weight decoding,
its timing and its traffic.

A family whose register map is known and that has no configuration (`configurations` empty) is
decoded, not simulated: operation counts, `etk diff` and the compile-time register checks read
its streams; the methods below that execute or time a stream refuse.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from ..commands import SYNC_OPERATIONS, Command, CommandSet
from ..errors import PayloadError, UnsupportedError

if TYPE_CHECKING:
    from ..fvp_timing import FvpMemory, PmuPrediction, Transfer
    from ..kernel import Kernel
    from ..layouts import FeatureMap
    from ..memory_system import MemorySystem
    from ..operations import Operation
    from ..payload import NpuProgram
    from ..records import OpRecord
    from ..registers import Registers
    from .accelerator_config import Accelerator

# (NPU_OP_* command, the register values set before it): one operation of a stream as its
# family's decoder reads it (CommandSet.operation_registers)
RawOperation = tuple[Command, dict[str, int]]


class OpTiming(NamedTuple):
    """One operation's cycles, as a family's cycle model computes them."""

    compute: int  # the NPU's own work (MAC array, output stage, block pipeline); 0 for a DMA
    total: int  # the longest of compute and each memory's access cycles


class AddressRun(NamedTuple):
    """Operations that repeat one operation with only its IFM and OFM addresses moved, each a
    constant step further (Vela's transposes: runs of 1x1 pools). The run is operations
    [first, end); a step of 0 with end == first + 1: no run."""

    end: int
    ifm_step: int
    ofm_step: int


class NpuFamily:
    """One NPU family. The base class decodes (from `commands`); a family that executes its
    streams (one with configurations) overrides the methods from `describe` on."""

    def __init__(self, name: str, products: Mapping[int, str], commands: CommandSet | None):
        self.name = name  # "Ethos-U55/U65": for messages
        self.products = products  # the driver config word's product id -> "ethos-u55", ...
        self.commands = commands  # the register map; None while it is not filled
        self.configurations: Mapping[str, Accelerator] = {}  # the configurations it executes
        # whether FVP measurements have checked its cycle model (else its cycles are labelled
        # "simulated, not checked against an FVP")
        self.cycles_checked = True

    def __repr__(self) -> str:
        return f"NpuFamily({self.name!r})"

    # --- decoding: every family whose register map is known ---

    def register_map(self) -> CommandSet:
        if self.commands is None:
            raise UnsupportedError(f"the command-stream decoder does not know {self.name}")
        return self.commands

    def operations(self, program: NpuProgram) -> list[RawOperation]:
        """Every operation of the stream that does something, up to NPU_OP_STOP, with the
        registers it runs with (waits and PMU commands left out)."""
        operations: list[RawOperation] = []
        stream = program.command_stream
        for cmd, values in self.register_map().operation_registers(stream, SYNC_OPERATIONS):
            if cmd.name == "NPU_OP_STOP":
                return operations
            if values is not None:
                operations.append((cmd, values))
        raise PayloadError(
            f"{program.source}: the command stream ends without NPU_OP_STOP (truncated?)"
        )

    def kernel(self, registers: Registers) -> Kernel:
        """The window (size, strides, dilation, padding, IFM upscale) an operation's registers
        give: what the compile-time checks (lower/vela_check.py) judge."""
        raise self._not_executed()

    # --- execution: a family with configurations ---

    def describe(
        self, accelerator: Accelerator, command: Command, values: dict[str, int]
    ) -> Operation:
        """The operation an NPU_OP command runs with these registers, as the shared engines run
        it, with the record this family's timing reads (UnsupportedError for what the
        simulator does not implement, naming the command and its offset)."""
        raise self._not_executed()

    def address_run(self, operations: Sequence[RawOperation], first: int) -> AddressRun:
        """How far the operations from `first` repeat operations[first] with only its IFM and
        OFM addresses moved (plan.py merges such runs into one strided copy)."""
        return AddressRun(first + 1, 0, 0)

    def output_map(self, record: OpRecord) -> FeatureMap:
        """The OFM an executed operation wrote (for finding where a run goes wrong)."""
        raise self._not_executed()

    def decode_weights(self, stream: bytes, fmt: object) -> np.ndarray:
        """A weight stream as int16, (O, KH * KW * I) or (KH, KW, O) for depthwise; `fmt` is
        the WeightStreams.fmt the decoder put in the description."""
        raise self._not_executed()

    def decode_scales(
        self, raw: np.ndarray, channels: int, where: str, fmt: object = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """A scale stream as (bias, scale, shift), int64, one per OFM channel; `fmt` is the
        WeightStreams.scale_fmt the decoder put in the description."""
        raise self._not_executed()

    def op_timing(
        self,
        record: OpRecord,
        accelerator: Accelerator,
        memory: MemorySystem,
        activation_cost: float | None = None,
    ) -> OpTiming:
        """An operation's cycles in this memory system; `activation_cost` replaces the cycles
        per element of the activation its registers select (what-if comparisons)."""
        raise self._not_executed()

    def output_cycles(self, record: OpRecord, accelerator: Accelerator) -> float:
        """The output stage's cycles per OFM element of an operation (accumulator width,
        operation, activation): what bounds an operation whose MAC array waits on it."""
        raise self._not_executed()

    def transfers(self, record: OpRecord, accelerator: Accelerator) -> tuple[Transfer, ...]:
        """What an operation moves over the AXI ports, per region, in bytes and beats."""
        raise self._not_executed()

    def predict_pmu(
        self,
        accelerator: Accelerator,
        command_stream: bytes,
        records: tuple[OpRecord, ...],
        memory: FvpMemory,
    ) -> PmuPrediction:
        """What the FVP's PMU counts for one run of the stream: cycles and AXI beats, from the
        records (with their compute cycles) of its operations."""
        raise self._not_executed()

    def internal_regions(self, accelerator: Accelerator) -> dict[int, int]:
        """Memories inside the NPU that operations address as regions of their own (Ethos-U85's
        chaining buffers): region number -> the most bytes an operation may use there."""
        return {}

    def forget(self) -> None:
        """Drop what decoding cached (a fresh start, for benchmarks)."""

    def _not_executed(self) -> UnsupportedError:
        return UnsupportedError(f"the simulator decodes {self.name} streams but does not run them")
