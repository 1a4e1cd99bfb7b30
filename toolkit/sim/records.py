"""What one executed NPU operation does: the work its family's cycle model and traffic read
(a family's decoder makes the record with the operation's description, operations.py)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from .pool import ByteMap


_NO_REGISTERS: Mapping[str, int] = MappingProxyType({})


class OpRecord(NamedTuple):
    # "conv", "depthwise", "pool.max|average|reduce_sum|sum", "dma", "matmul", "resize",
    # "elementwise.add|sub|mul|min|max|lrelu|abs|clz|shr|shl|..."
    kind: str
    offset: int  # byte offset of the NPU_OP_* command in the command stream
    macs: int
    # (region, bytes); IFM first; region memory.INTERNAL (-1) is the SHRAM (a DMA'd LUT)
    bytes_read: tuple[tuple[int, int], ...]
    bytes_written: tuple[tuple[int, int], ...]
    ofm_shape: tuple[int, int, int] = (0, 0, 0)  # h, w, c
    ifm_shape: tuple[int, int, int] = (0, 0, 0)  # h, w, c the operation reads
    kernel: tuple[int, int, int, int, int, int] = (1, 1, 1, 1, 1, 1)  # kh, kw, sy, sx, dy, dx
    block: tuple[int, int, int] = (1, 1, 1)  # OFM block h, w, c
    ifm_elem_size: int = 1
    ofm_elem_size: int = 1
    ifm_brick: bool = False  # NHCWB16
    ofm_brick: bool = False
    activation: int = 0  # ACTIVATION type field (0: clip only, 3: tanh, 4: sigmoid, 16+: LUT)
    acc_40bit: bool = False
    part_kernel_first: bool = False
    operand_scale_32bit: bool = False  # elementwise ADD/SUB with a 32-bit operand scale
    cycles: int = 0  # total: the longest of compute and each memory's access cycles
    compute_cycles: int = 0  # the NPU's compute alone (Vela's "NPU cycles")
    # every register the op ran with (name without NPU_SET_ -> value)
    registers: Mapping[str, int] = _NO_REGISTERS

    @property
    def ifm_depth(self) -> int:
        return self.ifm_shape[2]

    def register(self, name: str, default: int = 0) -> int:
        """The value a register (without NPU_SET_) held when the operation ran."""
        return self.registers.get(name, default)

    def read_from(self, region: int) -> int:
        return sum(b for r, b in self.bytes_read if r == region)

    def written_to(self, region: int) -> int:
        return sum(b for r, b in self.bytes_written if r == region)


class Step(NamedTuple):
    """One planned operation: its record, and what it does to memory when it runs. A tuple, as
    FeatureMap is: planning makes one for every operation (a merged run's members too)."""

    record: OpRecord
    run: Callable  # (Memory) -> None; a merged run's first operation does all of it (plan.py)
    # set when the operation writes a function of each IFM byte to the OFM (pool.ByteMap):
    # plan.py merges runs of them that differ only in their feature maps' addresses
    byte_map: ByteMap | None = None
    blas: bool = False  # runs numpy BLAS products (the simulator holds BLAS to one thread)
