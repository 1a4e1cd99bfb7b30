"""AvgPool2d(count_include_pad=False): TOSA AVG_POOL2D with padding, which Vela 5.1 lowers to one
padded average pool whose OFM_SCALE is 1, shift 0 (issue 33: every output saturated before)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from toolkit.sim import forget_programs, load_payload, simulate
from toolkit.sim.diff import operations
from toolkit.sim.native import pool as native_pool
from toolkit.sim.pool import divide_by_count

CASES = ("avgpool3_s1_pad_exclude", "avgpool3_s2_pad_exclude")
ACC = "ethos-u55-128"


def _padded_pools(payload) -> list[dict]:
    pools = [dict(op.registers) for op in operations(payload) if op.kind == "POOL(1)"]
    return [r for r in pools if any(r.get(f"IFM_PAD_{s}", 0) for s in ("TOP", "LEFT"))]


@pytest.mark.parametrize("name", CASES)
def test_stream_leaves_the_division_to_the_npu(cases, name):
    """The case exercises the division: one padded average pool, global scale 1, shift 0."""
    (pool,) = _padded_pools(load_payload(cases.get(name, ACC).npz[ACC]))
    assert pool["OFM_PRECISION"] & (1 << 8)
    assert (pool["OFM_SCALE"], pool["OFM_SCALE.param"] & 0x3F) == (1, 0)


@pytest.mark.parametrize("name", CASES)
def test_numpy_path_bit_exact(cases, name, monkeypatch):
    case = cases.get(name, ACC)
    monkeypatch.setattr(native_pool, "_KERNEL", None)
    forget_programs()
    try:
        result = simulate(load_payload(case.npz[ACC]), case.inputs, ACC)
    finally:
        forget_programs()
    got = result.outputs[0].reshape(-1)
    assert np.array_equal(got, case.expected.reshape(-1))
    assert len(np.unique(got)) > 16  # not saturated


def _tosa_divide(acc: int, count: int) -> int:
    """TOSA's reference model: reciprocal_scale(count), then apply_scale_32 without double
    rounding, in Python ints."""
    k = (count - 1).bit_length()
    multiplier, shift = (((1 << 30) + 1) << k) // count, 30 + k
    return (acc * multiplier + (1 << (shift - 1))) >> shift


def test_divide_by_count_is_tosas_reciprocal():
    """Every sum a window of up to 8x8 8-bit values reaches, for each count of taps: TOSA's
    arithmetic (which rounds a negative tie down: -5 / 2 is -3), within half of the quotient."""
    acc = np.arange(-64 * 255, 64 * 255 + 1, 7, dtype=np.int64)
    for count in range(1, 65):
        got = divide_by_count(acc, np.int64(count)).tolist()
        assert got == [_tosa_divide(int(a), count) for a in acc], count
        assert all(abs(Fraction(int(a), count) - g) <= Fraction(1, 2) for a, g in zip(acc, got))
    assert divide_by_count(np.array([-5, 5]), np.int64(2)).tolist() == [-3, 3]
