"""Feature maps as the registers describe them: tiles, strides, NHWC and NHCWB16."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import UnsupportedError, at
from .memory import Memory
from .registers import Registers

# IFM_PRECISION / OFM_PRECISION: element size from the 2-bit size field.
_SIZE_CODES = {0: 1, 1: 2, 2: 4}


@dataclass(frozen=True)
class FeatureMap:
    region: int
    bases: tuple[int, int, int, int]
    height0: int
    height1: int
    width0: int
    height: int
    width: int
    depth: int
    stride_y: int
    stride_x: int
    stride_c: int
    elem_size: int
    signed: bool
    brick: bool  # NHCWB16
    zero_point: int

    @property
    def dtype(self) -> np.dtype:
        kind = "i" if self.signed else "u"
        return np.dtype(f"<{kind}{self.elem_size}")

    def addresses(self) -> np.ndarray:
        """Byte address of every element, shape (height, width, depth)."""
        y = np.arange(self.height)[:, None]
        x = np.arange(self.width)[None, :]
        right = x >= self.width0
        lower = np.where(right, y >= self.height1, y >= self.height0)
        tile = right.astype(np.int64) + 2 * lower
        local_y = y - np.where(lower, np.where(right, self.height1, self.height0), 0)
        local_x = x - np.where(right, self.width0, 0)
        base = np.asarray(self.bases, dtype=np.int64)[tile]
        yx = base + local_y * self.stride_y + local_x * self.stride_x
        c = np.arange(self.depth)
        if self.brick:
            c_off = (c // 16) * self.stride_c + (c % 16) * self.elem_size
        else:
            c_off = c * self.stride_c
        return yx[:, :, None] + c_off[None, None, :]

    def read(self, memory: Memory, what: str) -> np.ndarray:
        return memory.gather(self.region, self.addresses(), self.dtype, what)

    def write(self, memory: Memory, values: np.ndarray, what: str) -> None:
        memory.scatter(self.region, self.addresses(), values.astype(self.dtype), what)


def _precision(regs: Registers, name: str, size_shift: int, size_bits: int) -> tuple[int, bool, bool]:
    value = regs.get(name)
    code = (value >> size_shift) & ((1 << size_bits) - 1)
    if code not in _SIZE_CODES:
        raise UnsupportedError(f"{name} precision code {code} in " +
                               at(regs.op.offset, regs.op.name, value))
    fmt = (value >> 6) & 3
    if fmt > 1:
        raise UnsupportedError(f"{name} format {fmt} in " + at(regs.op.offset, regs.op.name, value))
    return _SIZE_CODES[code], bool(value & 1), fmt == 1


def ofm_map(regs: Registers) -> FeatureMap:
    size, signed, brick = _precision(regs, "OFM_PRECISION", 1, 2)
    return FeatureMap(
        region=regs.get("OFM_REGION") & 0x7,
        bases=tuple(regs.get(f"OFM_BASE{i}", 0) for i in range(4)),
        height0=regs.get("OFM_HEIGHT0_M1") + 1, height1=regs.get("OFM_HEIGHT1_M1") + 1,
        width0=regs.get("OFM_WIDTH0_M1") + 1,
        height=regs.get("OFM_HEIGHT_M1") + 1, width=regs.get("OFM_WIDTH_M1") + 1,
        depth=regs.get("OFM_DEPTH_M1") + 1,
        stride_y=regs.get("OFM_STRIDE_Y"), stride_x=regs.get("OFM_STRIDE_X"),
        stride_c=regs.get("OFM_STRIDE_C"),
        elem_size=size, signed=signed, brick=brick, zero_point=regs.s16("OFM_ZERO_POINT", 0))


def ifm_map(regs: Registers, height: int, width: int, depth: int) -> FeatureMap:
    size, signed, brick = _precision(regs, "IFM_PRECISION", 2, 2)
    return FeatureMap(
        region=regs.get("IFM_REGION") & 0x7,
        bases=tuple(regs.get(f"IFM_BASE{i}", 0) for i in range(4)),
        height0=regs.get("IFM_HEIGHT0_M1") + 1, height1=regs.get("IFM_HEIGHT1_M1") + 1,
        width0=regs.get("IFM_WIDTH0_M1") + 1,
        height=height, width=width, depth=depth,
        stride_y=regs.get("IFM_STRIDE_Y"), stride_x=regs.get("IFM_STRIDE_X"),
        stride_c=regs.get("IFM_STRIDE_C"),
        elem_size=size, signed=signed, brick=brick, zero_point=regs.s16("IFM_ZERO_POINT", 0))
