"""What one executed NPU operation does: the work the cycle model and `etk diff` look at."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from .layouts import FeatureMap
    from .pool import ByteMap
    from .registers import Registers


@dataclass(frozen=True)
class OpRecord:
    # "conv", "depthwise", "pool.max|average|reduce_sum", "dma",
    # "elementwise.add|sub|mul|min|max|lrelu|abs|clz|shr|shl"
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
    registers: Mapping[str, int] = field(default_factory=dict)

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


_FIELDS = dataclasses.fields(OpRecord)
_NAMES = frozenset(f.name for f in _FIELDS)
_REQUIRED = frozenset(
    f.name for f in _FIELDS if f.default is dataclasses.MISSING and f.name != "registers"
)
_DEFAULTS = {f.name: f.default for f in _FIELDS if f.default is not dataclasses.MISSING}


def make_record(**fields) -> OpRecord:
    """OpRecord(**fields), as planning makes one for every operation, without the frozen
    dataclass's __init__ (an object.__setattr__ for each of its 22 fields: a tenth of planning).
    Its registers start empty: the plan sets them."""
    if not _REQUIRED <= fields.keys() <= _NAMES:
        missing, unknown = sorted(_REQUIRED - fields.keys()), sorted(fields.keys() - _NAMES)
        raise TypeError(f"OpRecord fields missing {missing}, unknown {unknown}")
    record = object.__new__(OpRecord)
    record.__dict__.update(_DEFAULTS, registers={}, **fields)
    return record


def with_fields(record: OpRecord, **changes) -> OpRecord:
    """A copy of record with these fields changed, as make_record skips __init__ (a
    dataclasses.replace of the 22 fields cost an eighth of planning and 3 ms of a MobileNet's
    first run)."""
    copy = object.__new__(OpRecord)
    copy.__dict__.update(record.__dict__, **changes)
    return copy


class Step(NamedTuple):
    """One planned operation: its record, and what it does to memory when it runs. A tuple, as
    FeatureMap is: planning makes one for every operation (a merged run's members too)."""

    record: OpRecord
    run: Callable  # (Memory) -> None; a merged run's first operation does all of it (plan.py)
    # set when the operation writes a function of each IFM byte to the OFM (pool.ByteMap):
    # plan.py merges runs of them that differ only in their feature maps' addresses
    byte_map: ByteMap | None = None
    blas: bool = False  # runs numpy BLAS products (the simulator holds BLAS to one thread)


def block_of(regs: Registers) -> tuple[int, int, int]:
    return (
        regs.get("OFM_BLK_HEIGHT_M1", 0) + 1,
        regs.get("OFM_BLK_WIDTH_M1", 0) + 1,
        regs.get("OFM_BLK_DEPTH_M1", 0) + 1,
    )


def feature_map_fields(regs: Registers, ifm: FeatureMap, ofm: FeatureMap) -> dict:
    """The OpRecord fields that every block operation (conv, pool, elementwise) takes from its
    IFM, OFM, block configuration and activation."""
    return dict(
        ofm_shape=ofm.shape,
        ifm_shape=ifm.shape,
        block=block_of(regs),
        ifm_elem_size=ifm.elem_size,
        ofm_elem_size=ofm.elem_size,
        ifm_brick=ifm.brick,
        ofm_brick=ofm.brick,
        activation=regs.get("ACTIVATION", 0) & 0xFFF,
    )
