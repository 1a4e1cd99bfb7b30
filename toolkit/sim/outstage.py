"""The output stage: scale with rounding, add the OFM zero point, clip, look up (activation.py).

NATURAL: (v + 2^(s-1)) >> s, floor shift, the same as TOSA RESCALE single rounding.
DOUBLE: TOSA RESCALE's double rounding (Ethos-U85 DOUBLE_SYMMETRIC with dbl_rnd 0): NATURAL,
with 2^30 more (less, for a negative accumulator) where the shift passes 31.
TFL: TensorFlow Lite double rounding (rounding doubling high multiply, which rounds half up,
then rounding divide by a power of two, ties away from zero). TRUNCATE: toward zero.
v = acc * scale.

In TFL mode a shift s <= 31 is a left shift of the accumulator by 31 - s before the doubling high
multiply: ((acc << (31 - s)) * scale + 2^30) >> 31 = (acc * scale + 2^(s-1)) >> s, the NATURAL
rounding; only shifts beyond 31 round a second time.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

NATURAL, TFL, TRUNCATE, DOUBLE = 2, 0, 1, 3
_DOUBLE_ROUND = 1 << 30
_SAFE = 1 << 62
_HIGH_MUL_SHIFT = 31  # the doubling high multiply of TFL mode


class Rescale:
    """Per-channel (C,) or scalar scale and shift with one rounding mode, constants precomputed."""

    # (C,) arrays, or numpy int64 scalars for one scale and shift
    scale: np.ndarray | np.int64
    shift: np.ndarray | np.int64
    right: np.ndarray | np.int64
    half: np.ndarray | np.int64
    right_half: np.ndarray | np.int64
    double: np.ndarray | np.int64 | None  # DOUBLE: the 2^30 added where the shift passes 31

    def __init__(self, scale, shift, rounding: int):
        self.rounding = rounding
        if isinstance(scale, int) and isinstance(shift, int):
            self._scalar(scale, shift)  # most: planning makes one per elementwise operation
            return
        shift = np.asarray(shift, dtype=np.int64)
        self.scale = np.asarray(scale, dtype=np.int64)
        self.scale_max = int(np.abs(self.scale).max(initial=0))
        if rounding == TFL:
            shifts, right = (
                np.minimum(shift, _HIGH_MUL_SHIFT),
                np.maximum(shift - _HIGH_MUL_SHIFT, 0),
            )
        else:
            shifts, right = shift, np.zeros_like(shift)
        self.shift, self.right = shifts, right
        self.half = _half(shifts)
        self.double = np.where(shift > 31, _DOUBLE_ROUND, 0) if rounding == DOUBLE else None
        self.right_half = _half(right)
        self.has_right = bool(right.any())

    def _scalar(self, scale: int, shift: int) -> None:
        """The constants of one scale and shift, as numpy int64 scalars."""
        right = max(shift - _HIGH_MUL_SHIFT, 0) if self.rounding == TFL else 0
        shift -= right
        self.scale, self.shift, self.right = np.int64(scale), np.int64(shift), np.int64(right)
        self.scale_max = abs(scale)
        self.half = np.int64(1 << (shift - 1) if shift > 0 else 0)
        double = self.rounding == DOUBLE and shift > 31
        self.double = np.int64(_DOUBLE_ROUND if double else 0) if self.rounding == DOUBLE else None
        self.right_half = np.int64(1 << (right - 1) if right > 0 else 0)
        self.has_right = right > 0

    def apply(self, acc: np.ndarray, bound: int) -> np.ndarray:
        """acc (..., C) int64 with |acc| <= bound."""
        scale, half, shift, right_half, right = (
            self.scale,
            self.half,
            self.shift,
            self.right_half,
            self.right,
        )
        if bound * self.scale_max >= _SAFE:  # rare: 40-bit accumulators; exact in Python ints
            acc, scale, half, shift, right_half, right = (
                np.asarray(a).astype(object) for a in (acc, scale, half, shift, right_half, right)
            )
        v = acc * scale
        if self.rounding == TRUNCATE:
            mag = np.abs(v) >> shift
            out = np.where(v < 0, -mag, mag)
        elif self.double is not None:
            double = np.asarray(self.double).astype(v.dtype)
            out = (v + half + np.where(acc < 0, -double, double)) >> shift
        else:
            out = (v + half) >> shift
            if self.has_right:  # TFL: a second rounding divide, ties away from zero
                out = (out + right_half - ((out < 0) & (self.right > 0))) >> right
        return out


@lru_cache(maxsize=256)
def shared_rescale(scale: int, shift: int, rounding: int) -> Rescale:
    """One Rescale per scale, shift and rounding (caches keyed by the object, as pool.py's byte
    tables are, find it again)."""
    return Rescale(scale, shift, rounding)


def _half(shift: np.ndarray) -> np.ndarray:
    return np.where(shift > 0, np.left_shift(1, np.maximum(shift - 1, 0)), 0)


_LIMITS = {np.dtype(t): (int(np.iinfo(t).min), int(np.iinfo(t).max)) for t in "bBhHiIqQ"}


def limits(dtype: np.dtype) -> tuple[int, int]:
    """(min, max) of an integer dtype, as np.iinfo gives them (looked up: planning asks twice
    per operation)."""
    found = _LIMITS.get(dtype)
    if found is None:
        info = np.iinfo(dtype)
        found = int(info.min), int(info.max)
    return found


class Finish:
    """Add the OFM zero point, clip to the activation bounds and the OFM type, and look the
    result up in the activation LUT if the operation uses one (activation.Lut)."""

    def __init__(self, zero_point: int, lo: int, hi: int, dtype: np.dtype, lut=None):
        type_min, type_max = limits(dtype)
        self.zero_point, self.dtype, self.lut = zero_point, dtype, lut
        self.lo, self.hi = max(lo, type_min), min(hi, type_max)

    def __call__(self, values: np.ndarray, mem=None) -> np.ndarray:
        values = values + self.zero_point
        if values.dtype == object:
            values = np.clip(values, self.lo, self.hi).astype(np.int64)
        else:
            np.maximum(values, self.lo, out=values)
            np.minimum(values, self.hi, out=values)
        if self.lut is not None:
            values = self.lut.lookup(values, mem)
        return values.astype(self.dtype)
