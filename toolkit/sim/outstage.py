"""The output stage: scale with rounding, add the OFM zero point, clip.

NATURAL: (v + 2^(s-1)) >> s, floor shift, the same as TOSA RESCALE single rounding.
TFL: TensorFlow Lite double rounding (rounding doubling high multiply, which rounds half up,
then rounding divide by a power of two, ties away from zero). TRUNCATE: toward zero. v = acc * scale.
"""

from __future__ import annotations

import numpy as np

NATURAL, TFL, TRUNCATE = 2, 0, 1
_SAFE = 1 << 62


def _products(acc: np.ndarray, scale: np.ndarray) -> np.ndarray:
    acc = acc.astype(np.int64)
    scale = np.asarray(scale, dtype=np.int64)
    bound = int(np.abs(acc).max(initial=0)) * int(np.abs(scale).max(initial=0))
    if bound < _SAFE:
        return acc * scale
    return acc.astype(object) * scale.astype(object)  # rare: 40-bit accumulators


def _shift_round_natural(v, shift):
    shift = np.asarray(shift, dtype=np.int64)
    half = np.where(shift > 0, np.left_shift(1, np.maximum(shift - 1, 0)), 0)
    if v.dtype == object:
        half, shift = half.astype(object), shift.astype(object)
    return (v + half) >> shift


def _shift_round_away(v, shift):
    shift = np.asarray(shift, dtype=np.int64)
    half = np.where(shift > 0, np.left_shift(1, np.maximum(shift - 1, 0)), 0)
    neg = ((v < 0) & (shift > 0)).astype(np.int64)
    if v.dtype == object:
        half, shift, neg = half.astype(object), shift.astype(object), neg.astype(object)
    return (v + half - neg) >> shift


def _truncate(v, shift):
    shift = np.asarray(shift, dtype=np.int64)
    if v.dtype == object:
        shift = shift.astype(object)
    mag = np.abs(v) >> shift
    return np.where(v < 0, -mag, mag)


def scale_acc(acc: np.ndarray, scale, shift, rounding: int) -> np.ndarray:
    """acc (..., C) int64 with per-channel (C,) or scalar scale/shift."""
    scale = np.asarray(scale, dtype=np.int64)
    shift = np.asarray(shift, dtype=np.int64)
    if rounding == TFL:
        # Double rounding: pre-shift left so the high multiply sees a 31-bit shift.
        left = np.maximum(31 - shift, 0)
        v = _products(acc.astype(np.int64) << left, scale)
        high = _shift_round_natural(v, np.full_like(shift, 31))  # SRDHM rounds half up
        out = _shift_round_away(high, np.maximum(shift - 31, 0))
    elif rounding == TRUNCATE:
        out = _truncate(_products(acc, scale), shift)
    else:
        out = _shift_round_natural(_products(acc, scale), shift)
    return np.asarray(out, dtype=object if out.dtype == object else np.int64)


def finish(values: np.ndarray, zero_point: int, lo: int, hi: int, dtype: np.dtype) -> np.ndarray:
    """Add the OFM zero point, clip to the activation bounds and the OFM type."""
    info = np.iinfo(dtype)
    values = values + zero_point
    lo, hi = max(lo, info.min), min(hi, info.max)
    clipped = np.clip(values, lo, hi)
    return clipped.astype(np.int64).astype(dtype)
