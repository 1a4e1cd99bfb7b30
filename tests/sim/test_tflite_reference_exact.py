"""Bit-exact against TensorFlow Lite's reference kernels on Vela's TFLite (not TOSA) streams.

TFLite streams run the output stages and the elementwise operand scaling in TFL (double rounding)
mode, which the TOSA-generated streams of test_bitexact.py never use.

The oracle is TFLite's *reference* kernels, the semantics Vela and the NPU reproduce (as do
TFLite Micro and CMSIS-NN). The TFLite interpreter's default (optimized, x86) kernels are not
bit-exact with them: their convolutions' final rounding divide by a power of two breaks ties
upward instead of away from zero, one more on a negative accumulator at an exact tie; over a
network that grows to a few LSB (ResNet-8 below: 6-9 of 10 logits differ, by up to 3). Their ADD
is the reference one.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tflite_edit import without_final_softmax

from toolkit.lower.tflite import compile_tflite
from toolkit.sim.commands import Command
from toolkit.sim.memory import Memory
from toolkit.sim.payload import load_payload
from toolkit.sim.registers import RegisterFile
from toolkit.targets import load_target

from .planned import planned
from .tflite_builder import seeded_outputs

ACC = "ethos-u55-128"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

# The int8 outputs of the fixtures with their final softmax removed (without_final_softmax) for
# the inputs np.random.default_rng(seed).integers(-128, 128, input shape, dtype=np.int8),
# seed = 0..3. Produced once with tflite_runtime 2.14 (numpy 1.26, the same inputs):
#   Interpreter(body, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
# set_tensor(input), invoke(), get_tensor(output).ravel().
EXPECTED = {
    "kws_ref_model": (
        (1, 49, 10, 1),
        [
            [-96, -45, -36, -32, -76, -62, -32, -119, -85, 111, -128, 72],
            [-60, -39, -30, 12, -53, -56, -67, -81, -81, 112, -128, 52],
            [-72, -32, -38, -3, -69, -62, -52, -108, -84, 88, -128, 75],
            [-63, -25, -24, 1, -37, -14, -49, -72, -62, 66, -128, 53],
        ],
    ),
    "pretrainedResnet_quant": (
        (1, 32, 32, 3),
        [
            [-102, -17, -20, 15, -128, -102, 32, -123, -12, -89],
            [-97, -53, -24, 14, -128, -99, 49, -100, -23, -100],
            [-82, -56, 27, 12, -121, -72, 20, -92, -47, -116],
            [-90, -36, 8, 22, -115, -76, 18, -110, -23, -95],
        ],
    ),
}


@pytest.fixture(scope="module", params=sorted(EXPECTED))
def compiled(request, tmp_path_factory):
    name = request.param
    out = tmp_path_factory.mktemp(name)
    body = out / f"{name}_body.tflite"
    body.write_bytes(without_final_softmax((FIXTURES / f"{name}.tflite").read_bytes(), name))
    program = compile_tflite(body, load_target("corstone-300").npu(ACC), out)
    return name, load_payload(program.delegates[0].vela_npz_path)


def test_mlperf_tiny_bodies_match_tflite_reference(compiled):
    name, payload = compiled
    shape, expected = EXPECTED[name]
    assert seeded_outputs(payload, shape, len(expected), ACC) == expected


# --- The 32-bit operand scale of an ADD in TFL round mode, on one NPU operation ---------------


def _srdhm(a: np.ndarray, b: int) -> np.ndarray:
    """gemmlowp SaturatingRoundingDoublingHighMul (no saturation case here: b > 0)."""
    ab = a.astype(np.int64) * b
    s = ab + np.where(ab >= 0, 1 << 30, 1 - (1 << 30))
    return np.where(s >= 0, s >> 31, -(-s >> 31))  # C++ division truncates toward zero


def _rdbpot(x: np.ndarray, exponent: int) -> np.ndarray:
    """gemmlowp RoundingDivideByPOT: ties away from zero."""
    mask = (1 << exponent) - 1
    return (x >> exponent) + ((x & mask) > (mask >> 1) + (x < 0))


def _tflite_add(a, b, opa, opa_shift, ofm, ofm_shift, zps, scaled_first: bool):
    """TFLite's reference int8 ADD with the multipliers Vela programs: Vela's shifts count from
    the operand (q / 2^shift), TFLite's from the operand << 20 (RDBPOT by shift - 11)."""
    x, y = (np.asarray(v, np.int64) - zp for v, zp in zip((a, b), zps[:2]))
    if not scaled_first:
        x, y = y, x
    x = _rdbpot(_srdhm(x << 20, opa), opa_shift - 11)  # the smaller input scale
    y = _rdbpot(_srdhm(y << 20, 1 << 30), 0)  # the larger: multiplier 1/2 -> y << 19
    return np.clip(_rdbpot(_srdhm(x + y, ofm), ofm_shift - 31) + zps[2], -128, 127)


def _elementwise_add(
    a: np.ndarray, b: np.ndarray, opa, opa_shift, ofm, ofm_shift, zps, scaled_first: bool
) -> np.ndarray:
    """Run one NPU_OP_ELEMENTWISE ADD, int8 NHWC (H, W, 1), TFL round mode everywhere."""
    h, w = a.shape
    size = h * w
    rf = RegisterFile()

    def put(name, value, data=None):
        rf.write(Command(0, "NPU_SET_" + name, value, data))

    scale_mode = 1 if scaled_first else 2  # OPA or OPB takes the 32-bit scale
    put("IFM_PRECISION", 1 | scale_mode << 8)  # signed 8-bit NHWC, round mode TFL (0)
    put("IFM2_PRECISION", 1)
    put("OFM_PRECISION", 1 | 1 << 8)  # signed 8-bit, global scale, round mode TFL (0)
    for fm, base in (("IFM", 0), ("IFM2", size), ("OFM", 2 * size)):
        put(f"{fm}_REGION", 1)
        for i in range(4):
            put(f"{fm}_BASE{i}", 0, base)
        put(f"{fm}_HEIGHT0_M1", h - 1)
        put(f"{fm}_HEIGHT1_M1", h - 1)
        put(f"{fm}_WIDTH0_M1", w - 1)
        put(f"{fm}_STRIDE_Y", 0, w)
        put(f"{fm}_STRIDE_X", 0, 1)
        put(f"{fm}_STRIDE_C", 0, 1)
    for fm, zp in zip(("IFM", "IFM2", "OFM"), zps):
        put(f"{fm}_ZERO_POINT", zp & 0xFFFF)
    put("IFM_DEPTH_M1", 0)
    put("OFM_HEIGHT_M1", h - 1)
    put("OFM_WIDTH_M1", w - 1)
    put("OFM_DEPTH_M1", 0)
    put("IFM2_BROADCAST", 0)
    put("OPA_SCALE", opa_shift, opa)
    put("OPB_SCALE", 0, 0)
    put("OFM_SCALE", ofm_shift, ofm)
    put("ACTIVATION_MIN", -128 & 0xFFFF)
    put("ACTIVATION_MAX", 127)
    memory = Memory({1: np.zeros(3 * size, np.uint8)})
    memory.regions[1][:size] = a.astype(np.int8).ravel().view(np.uint8)
    memory.regions[1][size : 2 * size] = b.astype(np.int8).ravel().view(np.uint8)
    planned(rf.snapshot(Command(0, "NPU_OP_ELEMENTWISE", 1)), memory).run(memory)
    return memory.regions[1][2 * size :].view(np.int8).reshape(h, w).astype(np.int64)


# Registers Vela 5.1 programs (scaling.advanced_elementwise_add_sub_scale) for an int8 ADD of
# input scales s1, s2 into so, and one operand pair where rounding the scaled operand once
# (operand * OPA_SCALE / 2^shift) is one off; the expected sums come from the TFLite 2.14
# interpreter's reference ADD kernel on a one-ADD model with these quantization parameters (its
# fused ReLU does not clip these sums), which Vela 5.1 compiled to these registers.
OPA_CASES = {
    # s1, z1 = 0.5005222, -98; s2, z2 = 0.6759638, 22; so, zo = 0.7227359, 13: OPA scaled.
    "opa": ((1590119473, 12, 2008508619, 50, (-98, 22, 13), True), (-16, 11, 60)),
    # s1, z1 = 0.6069326, 108; s2, z2 = 0.0814087, 0; so, zo = 0.1244872, 8: OPB scaled.
    "opb": ((1152180375, 14, 1308746493, 47, (108, 0, 8), False), (120, -52, 32)),
    # s1, z1 = 0.0334850, 40; s2, z2 = 0.0679077, 63; so, zo = 0.0391507, 108.
    "opa_zp": ((2117828329, 13, 1862425742, 49, (40, 63, 108), True), (-35, 102, 111)),
}


@pytest.mark.parametrize("case", sorted(OPA_CASES))
def test_operand_scale_double_rounds_like_tflite(case):
    (opa, opa_shift, ofm, ofm_shift, zps, scaled_first), (x, y, expected) = OPA_CASES[case]
    # Every int8 pair: IFM varies along H, IFM2 along W.
    a, b = np.meshgrid(np.arange(-128, 128), np.arange(-128, 128), indexing="ij")
    got = _elementwise_add(a, b, opa, opa_shift, ofm, ofm_shift, zps, scaled_first)
    assert got[x + 128, y + 128] == expected
    reference = _tflite_add(a, b, opa, opa_shift, ofm, ofm_shift, zps, scaled_first)
    assert reference[x + 128, y + 128] == expected
    assert np.array_equal(got, reference)


def test_single_rounding_of_the_operand_would_be_one_off():
    """What the pinned pairs guard: one rounding at bit `shift` gives 59, TFLite gives 60."""
    (opa, opa_shift, ofm, ofm_shift, zps, _), (x, y, expected) = OPA_CASES["opa"]
    xa, yb = x - zps[0], y - zps[1]
    once = (xa * opa + (1 << (opa_shift - 1))) >> opa_shift
    twice = int(_rdbpot(_srdhm(np.int64(xa) << 20, opa), opa_shift - 11))
    assert twice == once + 1
    out = _rdbpot(_srdhm(np.int64(once + (yb << 19)), ofm), ofm_shift - 31) + zps[2]
    assert out == expected - 1
