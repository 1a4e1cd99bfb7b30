"""A padded average pool as Vela 3.x compiles it, bit-exact with TFLite's reference kernels.

Vela 3.12.0 (register_command_stream_generator.py: generate_pooling_op) takes an average pool
with padding off the global scale: OFM_PRECISION without bit 8 (per-channel scaling), no
OFM_SCALE, and, as the input and output quantizations of a TFLite AVERAGE_POOL_2D are equal, IFM
and OFM zero points 0. The NPU then divides each window's sum by its count of taps inside the
IFM, rounding half away from zero as TFLite's reference kernel does; the simulator's division
(the count's reciprocal, rounded: sim/pool.py) gives the same on every int8 sum.

Each case below is a one-operator int8 AVERAGE_POOL_2D (padding SAME) compiled by
`vela --accelerator-config ethos-u55-64` 3.12.0; its pool's registers are transcribed here (they
are what Vela wrote, addresses aside). The expected outputs are TFLite's for the inputs
np.random.default_rng(seed).integers(-128, 128, input shape, dtype=np.int8), seed = 0..3, run
once with ai-edge-litert 2.3.0's interpreter, experimental_op_resolver_type=BUILTIN_REF, on the
uncompiled model: the SHA-256 of the four int8 outputs concatenated, and the first values.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from toolkit.sim.commands import Command
from toolkit.sim.memory import Memory
from toolkit.sim.pool import divide_by_count
from toolkit.sim.registers import RegisterFile

from .planned import planned

ACC = "ethos-u55-64"

# name: (IFM HxWxC, OFM HxW, kernel, stride, pad top/left/bottom/right, TFLite (scale, zero
# point) of both tensors, SHA-256 of the reference outputs, their first 8 values for seed 0)
CASES = {
    "3x3_s1": (
        (8, 8, 16),
        (8, 8),
        3,
        1,
        (1, 1, 1, 1),
        (0.05, -3),
        "15ee46d74a61ff2882daa4af5ae9b9ee44af91ff83326d7452c5216bbcccf59e",
        [-41, -1, 64, -44, -12, 24, 16, -11],
    ),
    "3x3_s2": (
        (9, 9, 8),
        (5, 5),
        3,
        2,
        (1, 1, 1, 1),
        (0.1, 5),
        "dc6e5b9c25dbaae99d7ca4be61b98c3c6684ac51b123467a6101b2ebdd8f4496",
        [-18, 20, -4, 12, 7, 86, -42, 42],
    ),
    "2x2_s2_right": (
        (6, 7, 24),
        (3, 4),
        2,
        2,
        (0, 0, 0, 1),
        (0.02, -128),
        "af43c0bbde1a1bb13cda03d58183edfa62e4a51ab3aa5d36612e6a1fd837475e",
        [-59, 41, 16, -53, 53, -2, -23, -39],
    ),
}


def _average_pool(x: np.ndarray, case: str, global_scale: bool = False) -> np.ndarray:
    """One NPU_OP_POOL (average) with the registers Vela 3.12.0 wrote for the case, NHWC int8;
    `global_scale`: Vela 5.x's encoding of a padded average pool instead (OFM_SCALE 1, shift 0)."""
    (h, w, c), (oh, ow), kernel, stride, (top, left, bottom, right) = CASES[case][:5]
    rf = RegisterFile()

    def put(name, value, data=None):
        rf.write(Command(0, "NPU_SET_" + name, value, data))

    ifm_bytes = h * w * c
    for fm, base, height, width in (("IFM", 0, h, w), ("OFM", ifm_bytes, oh, ow)):
        put(f"{fm}_REGION", 1)
        for i in range(4):
            put(f"{fm}_BASE{i}", 0, base if i == 0 else 0)
        put(f"{fm}_HEIGHT0_M1", height - 1)
        put(f"{fm}_HEIGHT1_M1", height - 1)
        put(f"{fm}_WIDTH0_M1", width - 1)
        put(f"{fm}_STRIDE_Y", 0, width * c)
        put(f"{fm}_STRIDE_X", 0, c)
        put(f"{fm}_STRIDE_C", 0, 1)
        put(f"{fm}_ZERO_POINT", 0)
    put("IFM_DEPTH_M1", c - 1)
    put("OFM_HEIGHT_M1", oh - 1)
    put("OFM_WIDTH_M1", ow - 1)
    put("OFM_DEPTH_M1", c - 1)
    put("IFM_PRECISION", 1)  # signed 8-bit NHWC
    put("OFM_PRECISION", 1 | (1 << 8 if global_scale else 0))  # round mode TFL (0)
    if global_scale:
        put("OFM_SCALE", 0, 1)
    put("IFM_UPSCALE", 0)
    for side, pad in zip(("TOP", "LEFT", "BOTTOM", "RIGHT"), (top, left, bottom, right)):
        put(f"IFM_PAD_{side}", pad)
    put("KERNEL_HEIGHT_M1", kernel - 1)
    put("KERNEL_WIDTH_M1", kernel - 1)
    put("KERNEL_STRIDE", 3 if stride == 2 else 0)  # bits 0 and 1: stride x, y minus 1
    put("ACTIVATION", 0)
    put("ACTIVATION_MIN", -128 & 0xFFFF)
    put("ACTIVATION_MAX", 127)
    memory = Memory({1: np.zeros(ifm_bytes + oh * ow * c, np.uint8)})
    memory.regions[1][:ifm_bytes] = x.ravel().view(np.uint8)
    planned(rf.snapshot(Command(0, "NPU_OP_POOL", 1)), memory, ACC).run(memory)
    return memory.regions[1][ifm_bytes:].view(np.int8).copy()


def _inputs(case: str) -> list[np.ndarray]:
    shape = (1, *CASES[case][0])
    return [
        np.random.default_rng(seed).integers(-128, 128, shape, dtype=np.int8) for seed in range(4)
    ]


@pytest.mark.parametrize("case", sorted(CASES))
def test_vela3_padded_average_pool_matches_tflite_reference(case):
    outputs = [_average_pool(x, case) for x in _inputs(case)]
    digest, first = CASES[case][6:]
    assert outputs[0][:8].tolist() == first
    assert hashlib.sha256(b"".join(o.tobytes() for o in outputs)).hexdigest() == digest


def test_the_count_s_reciprocal_rounds_as_tflite_s_division():
    """TFLite's reference average pool: (acc + count / 2) / count for acc > 0, else
    (acc - count / 2) / count, in C's truncating division; every int8 sum, counts 1 to 64."""
    for count in range(1, 65):
        acc = np.arange(-128 * count, 128 * count + 1, dtype=np.int64)
        tflite = np.sign(acc) * ((np.abs(acc) + count // 2) // count)
        assert np.array_equal(divide_by_count(acc, np.full_like(acc, count)), tflite), count
