"""The output stage's rescale against the rounding rules in Python integers: TOSA RESCALE's single
rounding (NATURAL), TFLite's SaturatingRoundingDoublingHighMul then RoundingDivideByPOT (TFL),
and truncation toward zero; one scale (planning's integer path) and per channel (numpy arrays)."""

from __future__ import annotations

import numpy as np
import pytest

from toolkit.sim.outstage import DOUBLE, NATURAL, TFL, TRUNCATE, Rescale


def _natural(v: int, s: int) -> int:
    return (v + (1 << (s - 1))) >> s if s > 0 else v


def _tfl(v: int, s: int) -> int:
    if s <= 31:  # the left shift by 31 - s makes the high multiply this one rounding
        return _natural(v, s)
    x = (v + (1 << 30)) >> 31  # the doubling high multiply rounds half up
    e = s - 31
    mask = (1 << e) - 1
    threshold = (mask >> 1) + (1 if x < 0 else 0)
    return (x >> e) + (1 if (x & mask) > threshold else 0)  # ties away from zero


def _truncate(v: int, s: int) -> int:
    return -(abs(v) >> s) if v < 0 else v >> s


RULES = {NATURAL: _natural, TFL: _tfl, TRUNCATE: _truncate}


@pytest.mark.parametrize("rounding", sorted(RULES))
def test_rescale_follows_the_rounding_rules_for_one_scale_and_per_channel(rounding):
    rng = np.random.default_rng(rounding)
    acc = rng.integers(-(1 << 31), 1 << 31, 64, dtype=np.int64)
    acc[:4] = [0, -1, 1, -(1 << 31)]
    for _ in range(60):
        scale, shift = int(rng.integers(0, 1 << 31)), int(rng.integers(0, 64))
        expected = [RULES[rounding](a * scale, shift) for a in acc.tolist()]
        one = Rescale(scale, shift, rounding).apply(acc, 1 << 31)
        per_channel = Rescale(np.full(64, scale), np.full(64, shift), rounding).apply(acc, 1 << 31)
        assert one.tolist() == expected, (scale, shift)
        assert per_channel.tolist() == expected, (scale, shift)


def test_rescale_of_one_scale_keeps_int64_results():
    out = Rescale(3, 1, NATURAL).apply(np.array([[5, -5]], np.int64), 5)
    assert out.dtype == np.int64 and out.tolist() == [[8, -7]]


def test_double_rounding_is_tosa_s_per_channel():
    """outstage.DOUBLE (Ethos-U85 DOUBLE_SYMMETRIC per channel): TOSA's apply_scale_32 with
    double_round, 2^30 more (less below zero) only where the shift passes 31."""
    acc = np.array([[(1 << 32) - (1 << 30), -(1 << 32) + (1 << 30) - 1, 3]], dtype=np.int64)
    scale, shift = [1, 1, 1], [33, 33, 1]
    assert Rescale(scale, shift, DOUBLE).apply(acc, 1 << 33).tolist() == [[1, -1, 2]]
    assert Rescale(scale, shift, NATURAL).apply(acc, 1 << 33).tolist() == [[0, 0, 2]]
    assert Rescale(1, 33, DOUBLE).apply(acc[:, :2], 1 << 33).tolist() == [[1, -1]]
