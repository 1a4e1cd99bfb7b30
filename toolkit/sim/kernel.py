"""An operation's window: kernel size, strides, dilation, padding, the IFM upscale, and the IFM
taps it reads.

The upscale doubles the IFM's height and width before the padding and the kernel see it: NEAREST
repeats each element 2x2 (Vela's nearest and bilinear resizes), TRANSPOSE puts each element at
the top left of a 2x2 block filled with the zero point (transposed convolutions).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

NO_UPSCALE, NEAREST, TRANSPOSE = 0, 1, 2  # Kernel.upscale (the native kernels read these numbers)


class Kernel(NamedTuple):
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
    upscale: int = NO_UPSCALE

    @property
    def elements(self) -> int:
        return self.height * self.width

    def kernel_extent(self, ofm_height: int, ofm_width: int) -> tuple[int, int]:
        """Rows/columns of the (upscaled) IFM the kernel covers, padding excluded."""
        h = (ofm_height - 1) * self.stride_y + (self.height - 1) * self.dilation_y + 1
        w = (ofm_width - 1) * self.stride_x + (self.width - 1) * self.dilation_x + 1
        return h - self.pad_top - self.pad_bottom, w - self.pad_left - self.pad_right

    def ifm_extent(self, ofm_height: int, ofm_width: int) -> tuple[int, int]:
        """IFM rows/columns the operation reads (the hardware has no IFM size register)."""
        h, w = self.kernel_extent(ofm_height, ofm_width)
        if self.upscale == NO_UPSCALE:
            return h, w
        return -(-h // 2), -(-w // 2)

    def upscaled(self, x: np.ndarray, fill, ofm_height: int, ofm_width: int) -> np.ndarray:
        """The (H, W, C) ifm as the kernel sees it after IFM_UPSCALE (`fill`: the zero point)."""
        if self.upscale == NO_UPSCALE:
            return x
        h, w = self.kernel_extent(ofm_height, ofm_width)
        if self.upscale == NEAREST:
            return x.repeat(2, axis=0).repeat(2, axis=1)[:h, :w]
        out = np.full((2 * x.shape[0], 2 * x.shape[1], x.shape[2]), fill, dtype=x.dtype)
        out[::2, ::2] = x
        return out[:h, :w]

    def padded(self, x: np.ndarray, fill, dtype) -> np.ndarray:
        """The (H, W, C) ifm (upscaled) with its padding, as `dtype`."""
        h, w, c = x.shape
        out = np.full(
            (h + self.pad_top + self.pad_bottom, w + self.pad_left + self.pad_right, c),
            fill,
            dtype=dtype,
        )
        out[self.pad_top : self.pad_top + h, self.pad_left : self.pad_left + w] = x
        return out

    def tap(
        self, padded: np.ndarray, i: int, j: int, ofm_height: int, ofm_width: int
    ) -> np.ndarray:
        """(OH, OW, C) view: the IFM element that kernel position (i, j) meets at each output."""
        y0, x0 = i * self.dilation_y, j * self.dilation_x
        return padded[
            y0 : y0 + (ofm_height - 1) * self.stride_y + 1 : self.stride_y,
            x0 : x0 + (ofm_width - 1) * self.stride_x + 1 : self.stride_x,
        ]

    def taps(self, padded: np.ndarray, ofm_height: int, ofm_width: int):
        for i in range(self.height):
            for j in range(self.width):
                yield self.tap(padded, i, j, ofm_height, ofm_width)
