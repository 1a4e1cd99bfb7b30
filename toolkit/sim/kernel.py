"""Kernel geometry from KERNEL_* and IFM_PAD_* registers, and the sliding windows it implies."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .registers import Registers


@dataclass(frozen=True)
class Kernel:
    height: int
    width: int
    stride_y: int
    stride_x: int
    dilation_y: int
    dilation_x: int
    pad_top: int
    pad_left: int
    pad_bottom: int
    pad_right: int
    part_kernel_first: bool

    @property
    def elements(self) -> int:
        return self.height * self.width

    def ifm_extent(self, ofm_height: int, ofm_width: int) -> tuple[int, int]:
        """IFM rows/columns the operation reads (the hardware has no IFM size register)."""
        h = (ofm_height - 1) * self.stride_y + (self.height - 1) * self.dilation_y + 1
        w = (ofm_width - 1) * self.stride_x + (self.width - 1) * self.dilation_x + 1
        return h - self.pad_top - self.pad_bottom, w - self.pad_left - self.pad_right

    def windows(self, ifm: np.ndarray, fill, ofm_height: int, ofm_width: int) -> np.ndarray:
        """(OH, OW, KH, KW, C) view of the padded (H, W, C) ifm."""
        padded = np.pad(ifm, ((self.pad_top, self.pad_bottom), (self.pad_left, self.pad_right),
                              (0, 0)), constant_values=fill)
        kh = (self.height - 1) * self.dilation_y + 1
        kw = (self.width - 1) * self.dilation_x + 1
        win = sliding_window_view(padded, (kh, kw), axis=(0, 1))  # (H', W', C, kh, kw)
        win = win[: (ofm_height - 1) * self.stride_y + 1: self.stride_y,
                  : (ofm_width - 1) * self.stride_x + 1: self.stride_x, :,
                  :: self.dilation_y, :: self.dilation_x]
        return win.transpose(0, 1, 3, 4, 2)


def kernel_from(regs: Registers) -> Kernel:
    stride = regs.get("KERNEL_STRIDE")
    dil_x = ((stride >> 3) & 1) + 1
    dil_y = ((stride >> 4) & 1) + 1
    return Kernel(
        height=regs.get("KERNEL_HEIGHT_M1") // dil_y + 1,
        width=regs.get("KERNEL_WIDTH_M1") // dil_x + 1,
        stride_x=((stride & 1) | (((stride >> 6) & 7) << 1)) + 1,
        stride_y=(((stride >> 1) & 1) | (((stride >> 9) & 7) << 1)) + 1,
        dilation_y=dil_y, dilation_x=dil_x,
        pad_top=regs.get("IFM_PAD_TOP", 0), pad_left=regs.get("IFM_PAD_LEFT", 0),
        pad_bottom=regs.get("IFM_PAD_BOTTOM", 0), pad_right=regs.get("IFM_PAD_RIGHT", 0),
        part_kernel_first=bool(stride & 4))
