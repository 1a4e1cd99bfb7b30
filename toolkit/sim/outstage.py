"""The output stage: scale with rounding, add the OFM zero point, clip.

NATURAL: (v + 2^(s-1)) >> s, floor shift, the same as TOSA RESCALE single rounding.
TFL: TensorFlow Lite double rounding (rounding doubling high multiply, which rounds half up,
then rounding divide by a power of two, ties away from zero). TRUNCATE: toward zero. v = acc * scale.
"""

from __future__ import annotations

import numpy as np

NATURAL, TFL, TRUNCATE = 2, 0, 1
_SAFE = 1 << 62


class Rescale:
    """Per-channel (C,) or scalar scale and shift with one rounding mode, constants precomputed."""

    def __init__(self, scale, shift, rounding: int):
        self.rounding = rounding
        shift = np.asarray(shift, dtype=np.int64)
        self.scale = np.asarray(scale, dtype=np.int64)
        self.scale_max = int(np.abs(self.scale).max(initial=0))
        if rounding == TFL:
            # Double rounding: pre-shift left so the high multiply sees a 31-bit shift.
            self.left = np.maximum(31 - shift, 0)
            self.right = np.maximum(shift - 31, 0)
            self.shift = np.full_like(shift, 31)
        else:
            self.left = np.zeros_like(shift)
            self.right = np.zeros_like(shift)
            self.shift = shift
        self.half = _half(self.shift)
        self.right_half = _half(self.right)
        self.has_right = bool(self.right.any())

    def apply(self, acc: np.ndarray, bound: int) -> np.ndarray:
        """acc (..., C) int64 with |acc| <= bound."""
        left, scale, half, shift, right_half, right = (
            self.left, self.scale, self.half, self.shift, self.right_half, self.right)
        big = (bound << int(left.max(initial=0))) * self.scale_max >= _SAFE
        if big:  # rare: 40-bit accumulators; exact in Python integers
            acc, left, scale, half, shift, right_half, right = (
                a.astype(object) for a in (acc, left, scale, half, shift, right_half, right))
        v = (acc << left if self.left.any() else acc) * scale
        if self.rounding == TRUNCATE:
            mag = np.abs(v) >> shift
            out = np.where(v < 0, -mag, mag)
        else:
            out = (v + half) >> shift
            if self.has_right:  # TFL: a second rounding divide, ties away from zero
                out = (out + right_half - ((out < 0) & (self.right > 0))) >> right
        return out


def _half(shift: np.ndarray) -> np.ndarray:
    return np.where(shift > 0, np.left_shift(1, np.maximum(shift - 1, 0)), 0)


class Finish:
    """Add the OFM zero point and clip to the activation bounds and the OFM type."""

    def __init__(self, zero_point: int, lo: int, hi: int, dtype: np.dtype):
        info = np.iinfo(dtype)
        self.zero_point, self.dtype = zero_point, dtype
        self.lo, self.hi = max(lo, info.min), min(hi, info.max)

    def __call__(self, values: np.ndarray) -> np.ndarray:
        values = values + self.zero_point
        if values.dtype == object:
            return np.clip(values, self.lo, self.hi).astype(np.int64).astype(self.dtype)
        np.maximum(values, self.lo, out=values)
        np.minimum(values, self.hi, out=values)
        return values.astype(self.dtype)
