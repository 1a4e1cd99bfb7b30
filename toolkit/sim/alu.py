"""The elementwise unit's integer operations, exact in int64.

CLZ counts the leading zeros of the 32-bit two's-complement pattern (32 for 0, 0 for a negative).
SHR shifts right rounding as the round mode says: NATURAL adds 2^(n-1) first (round half up,
TOSA's ARITHMETIC_RIGHT_SHIFT with round); Vela's int8 softmax uses it for gemmlowp's
RoundingDivideByPOT of values that are never negative. SHL shifts left; the output stage then
saturates to the OFM type. Shift amounts are read as signed: a negative amount shifts by 0, an
amount past 31 (SHL) or 62 (SHR) acts as that bound (beyond TOSA's 0..31 the hardware is not
documented; no 32-bit value tells these bounds from larger ones).
A MUL of 32-bit operands keeps the full 64-bit product (|a b| <= 2^62); the output stage then
divides it by 2^shift (mul32_rescale).
MIN and MAX are numpy's minimum and maximum of the zero-point-adjusted operands (any width, one
IFM signed and the other not compare as the integers they hold); ABS is numpy's abs of int64
(|-2^31| = 2^31 fits, the output stage saturates it). LRELU scales only the negative values by
the OFM scale (alpha) and passes the others unscaled (NegativeRescale).
"""

from __future__ import annotations

import numpy as np

from .outstage import NATURAL, Rescale

_WORD = (1 << 32) - 1


def clz32(a: np.ndarray) -> np.ndarray:
    u = np.asarray(a, dtype=np.int64) & _WORD
    bits = np.frexp(u.astype(np.float64))[1]  # bit length: exact, u < 2^53
    return 32 - bits.astype(np.int64)


def shift_right(a: np.ndarray, n: np.ndarray, rounding: int) -> np.ndarray:
    if rounding != NATURAL:
        raise ValueError(f"round mode {rounding}")
    n = np.clip(n, 0, 62)
    half = np.where(n > 0, np.left_shift(np.int64(1), np.maximum(n - 1, 0)), 0)
    return (a + half) >> n


def shift_left(a: np.ndarray, n: np.ndarray) -> np.ndarray:
    """|a| <= 2^31: a << 31 fits int64 and already saturates any nonzero int32 as a longer
    shift would."""
    return a << np.clip(n, 0, 31)


def mul32_rescale(shift: int, rounding: int) -> Rescale:
    """The output stage of a MUL of 32-bit operands: the OFM scale's shift alone. The
    multiplier is not applied: Vela programs 2^30 with shift 31 for gemmlowp's
    SaturatingRoundingDoublingHighMul (a b / 2^31, rounded) in the int8 softmax, and 1 with shift
    0 for a plain product; its TFLite MEAN/SQUARED_DIFFERENCE lowering says the multiplier is
    "not actually used for int32"."""
    return Rescale(1, shift, rounding)


class NegativeRescale:
    """LRELU's output stage: the OFM scale (alpha) and its rounding for negative values; zero and
    positive values pass unscaled."""

    def __init__(self, rescale: Rescale):
        self.rescale = rescale

    def apply(self, acc: np.ndarray, bound: int) -> np.ndarray:
        return np.where(acc < 0, self.rescale.apply(acc, bound), acc)
