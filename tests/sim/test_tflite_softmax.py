"""Vela's int8 softmax and LUT activations, bit-exact against TensorFlow Lite's reference kernels.

Vela 5.1 lowers an int8 SOFTMAX to ~30 NPU operations (softmax.py's get_graph_8bit; its C++ core
folds a few): a max pool, a DMA of a 256 x int32 exp table into the SHRAM, SUB + LUT, then int32
SHR, REDUCE_SUM, CLZ, SUB, SHL, MUL and ADD steps of gemmlowp's fixed-point reciprocal, and a
final SHR to int8. Below: the whole MLPerf Tiny reference files (softmax kept), the softmax alone
on logits that spread its outputs, and each new piece of arithmetic on one NPU operation.
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
from ethosu.vela.ethos_u55_regs.ethos_u55_regs import cmd0
from ethosu.vela.tflite.BuiltinOperator import BuiltinOperator
from ethosu.vela.tflite.Model import Model

from toolkit.lower.tflite import compile_tflite
from toolkit.sim import RegionError, UnsupportedError, load_payload, simulate
from toolkit.sim.commands import Command
from toolkit.sim.families import accelerator
from toolkit.sim.families.ethos_u55.registers import COMMANDS
from toolkit.sim.memory import INTERNAL, LUT_BYTES, Memory
from toolkit.sim.outstage import NATURAL, TFL
from toolkit.sim.registers import RegisterFile
from toolkit.targets import load_target

from .planned import planned, shram_bytes
from .tflite_builder import linear_feature_maps, seeded_outputs, unary_chain

ACC = "ethos-u55-128"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1

# The int8 outputs of the full reference files for the inputs
# np.random.default_rng(seed).integers(-128, 128, input shape, dtype=np.int8), seed = 0..3.
# Produced once with tflite_runtime 2.14 (numpy 1.26, the same inputs):
#   Interpreter(model, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
# set_tensor(input), invoke(), get_tensor(output).ravel().
EXPECTED = {
    "kws_ref_model": (
        (1, 49, 10, 1),
        [
            [-128, -128, -128, -128, -128, -128, -128, -128, -128, 127, -128, -127],
            [-128, -128, -128, -128, -128, -128, -128, -128, -128, 127, -128, -128],
            [-128, -128, -128, -128, -128, -128, -128, -128, -128, 94, -128, -94],
            [-128, -128, -128, -128, -128, -128, -128, -128, -128, 94, -128, -94],
        ],
    ),
    "pretrainedResnet_quant": (
        (1, 32, 32, 3),
        [
            [-128, -128, -128, -115, -128, -128, 115, -128, -128, -128],
            [-128, -128, -128, -127, -128, -128, 127, -128, -128, -128],
            [-128, -128, 58, -114, -128, -128, -72, -128, -128, -128],
            [-128, -128, -114, 33, -128, -128, -47, -128, -128, -128],
        ],
    ),
}

# The KWS file's final SOFTMAX alone (input scale 0.1446925, zero point 14; output 1/256, -128):
# (int8 logits, TFLite BUILTIN_REF output), from the same interpreter on only_final_softmax().
# The first five spread the outputs most among 3000 random logit vectors; then equal logits,
# differences of 255 (exp of the largest negative difference is 0) and a near tie.
SOFTMAX_ONLY = [
    (
        [-14, -19, -7, -29, -22, -35, -9, -12, -10, -8, -25, -28],
        [-108, -118, -72, -126, -122, -127, -86, -101, -92, -80, -124, -125],
    ),
    (
        [108, 103, 110, 117, 102, 97, 119, 109, 104, 100, 95, 113],
        [-112, -120, -107, -70, -121, -125, -51, -110, -119, -123, -126, -96],
    ),
    (
        [91, 88, 78, 93, 106, 94, 82, 105, 86, 104, 90, 84],
        [-119, -122, -127, -116, -52, -115, -126, -62, -124, -71, -121, -125],
    ),
    (
        [-91, -100, -98, -114, -86, -99, -95, -107, -101, -94, -104, -84],
        [-98, -120, -117, -127, -66, -119, -111, -125, -121, -108, -123, -45],
    ),
    (
        [30, 20, 50, 38, 41, 34, 47, 37, 31, 39, 32, 29],
        [-123, -127, -37, -112, -103, -119, -69, -114, -122, -109, -121, -124],
    ),
    ([7] * 12, [-107] * 12),
    ([127, -128] * 6, [-85, -128] * 6),
    ([40, 40, 39, 38] + [-100] * 8, [-57, -57, -67, -75] + [-128] * 8),
]


def only_final_softmax(data: bytes) -> bytes:
    """The model's last operator (a SOFTMAX) alone: the operator vector shrinks to one entry
    pointing at it, and the subgraph's input becomes the softmax's input."""
    model = Model.GetRootAs(data, 0)
    graph = model.Subgraphs(0)
    last = graph.Operators(graph.OperatorsLength() - 1)
    code = model.OperatorCodes(last.OpcodeIndex())
    assert max(code.BuiltinCode(), code.DeprecatedBuiltinCode()) == BuiltinOperator.SOFTMAX
    assert graph.InputsLength() == 1
    edited = bytearray(data)
    operators_at = graph._tab.Vector(graph._tab.Offset(10))
    struct.pack_into("<I", edited, operators_at - 4, 1)
    struct.pack_into("<I", edited, operators_at, last._tab.Pos - operators_at)  # forward offset
    struct.pack_into("<i", edited, graph._tab.Vector(graph._tab.Offset(6)), last.Inputs(0))
    return bytes(edited)


def _compile(path: Path, out: Path):
    program = compile_tflite(path, load_target("corstone-300").npu(ACC), out)
    return load_payload(program.delegates[0].vela_npz_path)


@pytest.fixture(scope="module", params=sorted(EXPECTED))
def full_model(request, tmp_path_factory):
    name = request.param
    return name, _compile(FIXTURES / f"{name}.tflite", tmp_path_factory.mktemp(name))


def test_mlperf_tiny_with_softmax_match_tflite_reference(full_model):
    name, payload = full_model
    shape, expected = EXPECTED[name]
    assert seeded_outputs(payload, shape, len(expected), ACC) == expected


def test_softmax_ops_records_and_cycles(full_model):
    name, payload = full_model
    shape, _ = EXPECTED[name]
    result = simulate(payload, [np.zeros(shape, np.int8)], ACC)
    ops = list(result.operations)
    lut_dma = next(
        i for i, r in enumerate(ops) if r.kind == "dma" and r.bytes_written[0][0] == INTERNAL
    )
    assert ops[lut_dma].bytes_written == ((INTERNAL, 1024),)  # 256 x int32 exp table
    assert ops[lut_dma - 1].kind == "pool.max"
    sub = ops[lut_dma + 1]
    assert (sub.kind, sub.activation, sub.ifm_elem_size, sub.ofm_elem_size) == (
        "elementwise.sub",
        16,
        1,
        4,
    )
    kinds = {r.kind for r in ops[lut_dma:]}
    assert {
        "pool.reduce_sum",
        "elementwise.clz",
        "elementwise.shl",
        "elementwise.shr",
        "elementwise.mul",
        "elementwise.add",
    } <= kinds
    assert ops[-1].kind == "elementwise.shr" and ops[-1].ofm_elem_size == 1
    assert ops[lut_dma].compute_cycles == 0 < ops[lut_dma].cycles
    assert all(0 < r.compute_cycles <= r.cycles for r in ops if r.kind != "dma")
    lut_rate = accelerator(ACC).activation_cycles[0]
    assert sub.compute_cycles >= lut_rate * np.prod(sub.ofm_shape)
    assert result.npu_cycles == sum(r.compute_cycles for r in ops)


@pytest.fixture(scope="module")
def kws_softmax(tmp_path_factory):
    out = tmp_path_factory.mktemp("kws_softmax")
    path = out / "kws_softmax.tflite"
    path.write_bytes(only_final_softmax((FIXTURES / "kws_ref_model.tflite").read_bytes()))
    return _compile(path, out)


def _softmax_only_outputs(payload) -> list[list[int]]:
    return [
        simulate(payload, [np.array(x, np.int8).reshape(1, 12)], ACC).outputs[0].ravel().tolist()
        for x, _ in SOFTMAX_ONLY
    ]


def test_softmax_alone_spread_outputs_match_tflite_reference(kws_softmax):
    assert _softmax_only_outputs(kws_softmax) == [y for _, y in SOFTMAX_ONLY]


def _as_vela_3x(payload, zero_point: int):
    """The stream with every OFM_ZERO_POINT of 0 set to the softmax input's zero point, as
    Vela 3.x's softmax programs its int32 steps (Vela 5.1 writes 0 there)."""
    words = np.frombuffer(payload.command_stream, "<u4").copy()
    zp_set = cmd0.NPU_SET_OFM_ZERO_POINT.value
    at = [c.offset // 4 for c in COMMANDS.decode(payload.command_stream)]
    hits = [i for i in at if words[i] == zp_set]  # cmd0, parameter 0
    words[hits] = zp_set | (zero_point & 0xFFFF) << 16
    return payload._replace(command_stream=words.tobytes()), len(hits)


def test_int32_ofm_ignores_the_zero_point_vela_3x_programs(kws_softmax):
    """The Himax WE2 stream's softmax (Vela 3.x) sets OFM zero point -1 on its int32 steps;
    the same steps of a Vela 5.1 stream with the KWS softmax's input zero point (14) there give
    TFLite's outputs unchanged: a 32-bit OFM without a forced clip range adds no zero point."""
    patched, hits = _as_vela_3x(kws_softmax, 14)
    assert hits == 1  # Vela sets a register only when it changes: the SHR after SUB + exp
    ops = simulate(patched, [np.zeros((1, 12), np.int8)], ACC).operations
    int32_steps = [
        dict(r.registers)["OFM_ZERO_POINT"]
        for r in ops
        if r.kind != "dma" and r.ofm_elem_size == 4 and not r.activation
    ]
    assert len(int32_steps) > 20 and set(int32_steps) == {14}
    assert _softmax_only_outputs(patched) == [y for _, y in SOFTMAX_ONLY]


# --- LUT activations: TFLite TANH, LOGISTIC, HARD_SWISH, which Vela turns into a 1x1 average pool
# whose output stage looks the result up in a 256-entry table it DMAs into the SHRAM -------------

# name -> (operators with their output (scale, zero point), input (scale, zero point), uint8,
# expected outputs for the input arange(min, max + 1) of the type, reshaped (1, 1, 16, 16), as hex
# bytes). Produced once with the same BUILTIN_REF interpreter from tflite_builder.unary_chain.
LUT_MODELS = {
    "tanh": (
        [("TANH", (1 / 128, 0))],
        (0.02, 3),
        False,
        (
            "8181818282828282828282828282828283838383838383838384848484848485"
            "8585858586868686878787878888888989898a8a8a8b8b8c8c8d8d8e8e8f8f90"
            "9091929293949595969798999a9a9b9c9d9fa0a1a2a3a4a6a7a8aaabacaeafb1"
            "b3b4b6b8b9bbbdbfc1c3c5c7c9cbcdcfd2d4d6d8dbdddfe2e4e7e9eceef1f3f6"
            "f8fbfd000305080a0d0f121417191c1e212325282a2c2e31333537393b3d3f41"
            "434547484a4c4d4f515254555658595a5c5d5e5f606163646566666768696a6b"
            "6b6c6d6e6e6f707071717272737374747575767676777777787878797979797a"
            "7a7a7a7b7b7b7b7b7c7c7c7c7c7c7d7d7d7d7d7d7d7d7d7e7e7e7e7e7e7e7e7e"
        ),
    ),
    "logistic_uint8": (
        [("LOGISTIC", (1 / 256, 0))],
        (0.07, 118),
        True,
        (
            "0000000000000000000000000000000000000000000000000000000000010101"
            "0101010101010101010101010102020202020202020303030304040404050505"
            "06060707080809090a0b0b0c0d0e0f10111213141617191a1c1e20222426282b"
            "2d303336393c3f4246494d5155595d61666a6e73777c8084898d92969a9fa3a7"
            "abafb3b7babec1c4c7cacdd0d3d5d8dadcdee0e2e4e6e7e9eaecedeeeff0f1f2"
            "f3f4f5f5f6f7f7f8f8f9f9fafafbfbfbfcfcfcfcfdfdfdfdfefefefefefefefe"
            "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"
            "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"
        ),
    ),
    # four tables DMA'd into three LUT slots, slot 0 reloaded once the first operation is done
    "chain": (
        [
            ("TANH", (1 / 128, 0)),
            ("LOGISTIC", (1 / 256, -128)),
            ("HARD_SWISH", (0.01, -100)),
            ("TANH", (1 / 128, 0)),
        ],
        (0.05, 3),
        False,
        (
            "1313131313131313131313131313131313131313131313131313131313131313"
            "1313131313131313131313131313131313131313131313131313131313131313"
            "1313131313131313131313131313131313131313131313131313131313131313"
            "13131314141414141414161616161617171718181819191a1a1c1c1d1e1f1f21"
            "2223232425262828292a2b2c2c2d2d2e30303131323232333333343434343535"
            "3535353536363636363636363636363636363636363636363636363636363636"
            "3636363636363636363636363636363636363636363636363636363636363636"
            "3636363636363636363636363636363636363636363636363636363636363636"
        ),
    ),
}


@pytest.mark.parametrize("name", sorted(LUT_MODELS))
def test_lut_activations_match_tflite_reference(name, tmp_path):
    ops, input_quant, uint8, expected = LUT_MODELS[name]
    path = tmp_path / f"{name}.tflite"
    path.write_bytes(unary_chain(ops, (1, 1, 16, 16), input_quant, uint8))
    payload = _compile(path, tmp_path)
    x = np.arange(256, dtype=np.uint8) if uint8 else np.arange(-128, 128).astype(np.uint8)
    result = simulate(payload, [x.view(np.int8).reshape(1, 1, 16, 16)], ACC)
    assert result.outputs[0].tobytes().hex() == "".join(expected)
    luts = [r for r in result.operations if r.activation]
    assert len(luts) == len(ops) and all(r.kind == "pool.average" for r in luts)


# --- One NPU operation at a time ----------------------------------------------------------------

_SIZE_CODE = {1: 0, 2: 1, 4: 2}


def _elementwise(
    mode: int,
    a,
    b=None,
    *,
    ifm_size=4,
    ofm_size=4,
    ofm_scale=(1, 0),
    rounding=TFL,
    global_scale=True,
    activation=0,
    act=(-32768, 32767),
    ofm_zp=0,
    ofm_signed=True,
    lut: bytes | None = None,
    lut_slot=0,
):
    """Run NPU_OP_ELEMENTWISE(mode) on (1, 1, n) NHWC vectors; b None: a unary op. A 1-element
    b broadcasts along C. `lut` is written to SHRAM LUT slot `lut_slot` first."""
    a = np.asarray(a, np.int64)
    b = None if b is None else np.asarray(b, np.int64)
    n = a.size
    rf = RegisterFile()

    def put(name, value, data=None):
        rf.write(Command(0, "NPU_SET_" + name, value, data))

    fms = [("IFM", 0, ifm_size, n, 0), ("OFM", 64 * n, ofm_size, n, ofm_zp)]
    if b is not None:
        fms.append(("IFM2", 32 * n, 4, b.size, 0))
    linear_feature_maps(put, fms)
    put("IFM_PRECISION", 1 | _SIZE_CODE[ifm_size] << 2 | rounding << 14)
    put("IFM2_PRECISION", 1 | _SIZE_CODE[4] << 2)
    put(
        "OFM_PRECISION",
        int(ofm_signed) | _SIZE_CODE[ofm_size] << 1 | global_scale << 8 | rounding << 14,
    )
    put("IFM_DEPTH_M1", n - 1)
    put("OFM_HEIGHT_M1", 0)
    put("OFM_WIDTH_M1", 0)
    put("OFM_DEPTH_M1", n - 1)
    put("IFM2_BROADCAST", 4 if b is not None and b.size == 1 < n else 0)
    put("OPA_SCALE", 0, 1)
    put("OPB_SCALE", 0, 1)
    put("OFM_SCALE", ofm_scale[1], ofm_scale[0])
    put("ACTIVATION", activation)
    put("ACTIVATION_MIN", act[0] & 0xFFFF)
    put("ACTIVATION_MAX", act[1] & 0xFFFF)
    memory = Memory({1: np.zeros(96 * n, np.uint8)}, shram_bytes(ACC))
    memory.regions[1][: n * ifm_size] = a.astype(f"<i{ifm_size}").view(np.uint8)
    if b is not None:
        memory.regions[1][32 * n : 32 * n + 4 * b.size] = b.astype("<i4").view(np.uint8)
    if lut is not None:
        start = memory.lut_base + 256 * lut_slot
        memory.internal[start : start + len(lut)] = np.frombuffer(lut, np.uint8)
    planned(rf.snapshot(Command(0, "NPU_OP_ELEMENTWISE", mode)), memory).run(memory)
    dtype = f"<{'i' if ofm_signed else 'u'}{ofm_size}"
    return memory.regions[1][64 * n : 64 * n + n * ofm_size].view(dtype).tolist()


MUL, ADD, SUB, CLZ, SHR, SHL = 0, 1, 2, 7, 8, 9


def _srdhm(a: int, b: int) -> int:
    """gemmlowp SaturatingRoundingDoublingHighMul."""
    if a == b == INT32_MIN:
        return INT32_MAX
    ab = a * b
    s = ab + ((1 << 30) if ab >= 0 else 1 - (1 << 30))
    return s >> 31 if s >= 0 else -(-s >> 31)  # C++ division truncates toward zero


def test_mul32_with_shift_31_is_the_doubling_high_multiply():
    """Vela programs OFM scale 2^30 with shift 31 for gemmlowp's F0 * F2 products: the
    multiplier is not applied, the shift rounds the 64-bit product half up."""
    a = [1518500250, -1010580540, -(1 << 15), -3, INT32_MIN, INT32_MAX, 123456789]
    b = [-1010580540, 1515870810, 1 << 15, 1 << 30, INT32_MIN, INT32_MAX, -987654321]
    got = _elementwise(MUL, a, b, ofm_scale=(1 << 30, 31))
    assert got == [-714588353, -713350969, 0, -1, INT32_MAX, INT32_MAX - 1, -56779306]
    assert got == [_srdhm(x, y) for x, y in zip(a, b)]


def test_mul32_shift_30_and_saturating_plain_product():
    # the last MUL of the softmax: exp * reciprocal / 2^30, saturated
    assert _elementwise(
        MUL,
        [INT32_MAX, INT32_MIN, 1000, -7, -3],
        [INT32_MAX, INT32_MAX, 3 << 29, 3 << 28, 1 << 29],
        ofm_scale=(1 << 30, 30),
    ) == [INT32_MAX, INT32_MIN, 1500, -5, -1]
    # Rescale<2> of the Newton-Raphson step: times 4, saturating, no scaling at all
    assert _elementwise(MUL, [1 << 29, -(1 << 29) - 1, 12345], [4], ofm_scale=(1, 0)) == [
        INT32_MAX,
        INT32_MIN,
        49380,
    ]


def test_clz_counts_leading_zeros_of_the_32_bit_pattern():
    got = _elementwise(
        CLZ,
        [0, 1, 1 << 19, 12 << 19, INT32_MAX, -1, INT32_MIN],
        global_scale=False,
        ofm_scale=(1 << 30, 31),
    )  # OFM_SCALE is ignored
    assert got == [32, 31, 12, 9, 1, 0, 0]


def test_shr_rounds_half_up_in_natural_mode():
    assert _elementwise(
        SHR,
        [6144, 6143, 2048, -2048, -2049, 5, 1 << 30],
        [12],
        rounding=NATURAL,
        global_scale=False,
    ) == [2, 1, 1, 0, -1, 0, 1 << 18]
    # per-element amounts; a negative amount shifts by 0, a long one leaves the rounding
    assert _elementwise(
        SHR, [100, 100, 100, 100, -100], [0, 3, -2, 40, 6], rounding=NATURAL, global_scale=False
    ) == [100, 13, 100, 0, -2]


def test_shr_to_int8_with_zero_point_and_clip():
    """The softmax's last operation: (x + 2^(n-1)) >> n, + the OFM zero point, clipped."""
    got = _elementwise(
        SHR,
        [0, 1 << 22, (254 << 23) + (1 << 22), INT32_MAX],
        [23],
        rounding=NATURAL,
        global_scale=False,
        ofm_size=1,
        ofm_zp=-128,
        act=(-128, 127),
    )
    assert got == [-128, -127, 127, 127]


def test_shl_saturates_to_int32():
    assert _elementwise(
        SHL, [3, 1 << 30, -1, -2, 5, 7], [4, 1, 31, 31, 0, 40], global_scale=False
    ) == [48, INT32_MAX, INT32_MIN, INT32_MIN, 5, INT32_MAX]


def test_int32_add_sub_are_not_clipped_to_activation_min_max():
    """Vela programs the int16 limits into ACTIVATION_MIN/MAX of int32 OFMs; the sums pass."""
    assert _elementwise(ADD, [100000, INT32_MAX, -5], [1515870810, 1, 7], act=(-32768, 32767)) == [
        1515970810,
        INT32_MAX,
        2,
    ]
    assert _elementwise(SUB, [35], [12], act=(-32768, 32767)) == [23]


def test_lut_int8_output_indexes_by_value_plus_128():
    table = np.arange(256, dtype=np.int64)[::-1] - 128  # entry i -> 127 - i
    values = np.array([-128, -1, 0, 1, 126, 127, 200, -200])
    # ADD of x and 0 with OFM zero point 3: clip(x + 3) indexes the table
    got = _elementwise(
        ADD,
        values,
        [0],
        ifm_size=4,
        ofm_size=1,
        ofm_zp=3,
        activation=0x11,
        act=(-128, 127),
        lut=table.astype(np.int8).tobytes(),
        lut_slot=1,
    )
    index = np.clip(values + 3, -128, 127) + 128
    assert got == table[index].tolist() == [124, -3, -4, -5, -128, -128, -128, 127]


def test_lut_uint8_output_indexes_by_value():
    table = (np.arange(256) * 7 % 256).astype(np.uint8)
    got = _elementwise(
        ADD,
        [0, 10, 250, 300, -4],
        [0],
        ofm_size=1,
        ofm_signed=False,
        activation=0x10,
        act=(0, 255),
        lut=table.tobytes(),
    )
    assert got == [0, 70, 214, 249, 0]


def test_lut_int32_entries_with_forced_int8_range():
    """The softmax's SUB + exp: an int32 OFM, clip range forced to int8 (ACTIVATION 0x3010), the
    OFM zero point 127 moves x - max (-255..0) to -128..127, index 0..255, 32-bit entries."""
    table = (np.arange(256, dtype=np.int64) * 8388607).astype("<i4")
    x, xmax = np.array([-128, 0, 100, 127, 127]), 127
    got = _elementwise(
        SUB,
        x,
        [xmax],
        ifm_size=4,
        ofm_zp=127,
        activation=0x3010,
        act=(-128, 127),
        lut=table.tobytes(),
    )
    assert got == table[x - xmax + 255].tolist()
    assert got[-1] == 255 * 8388607


def test_lut_dma_into_shram_and_bounds():
    rf = RegisterFile()
    memory = Memory({0: np.arange(2048, dtype=np.uint8) % 251}, shram_bytes(ACC))
    base = memory.lut_base
    assert base == shram_bytes(ACC) - LUT_BYTES == 22528  # Vela's LUT address on U55-128

    def dma(src_region, dst_region, dst, length):
        for name, value, data in (
            ("DMA0_SRC_REGION", src_region, None),
            ("DMA0_DST_REGION", dst_region, None),
            ("DMA0_SRC", 0, 512),
            ("DMA0_DST", 0, dst),
            ("DMA0_LEN", 0, length),
        ):
            rf.write(Command(0, "NPU_SET_" + name, value, data))
        return planned(rf.snapshot(Command(0, "NPU_OP_DMA_START", 0)), memory)

    step = dma(0, 0x100 | 3, base + 256, 1024)
    step.run(memory)
    assert np.array_equal(memory.internal[base + 256 : base + 1280], memory.regions[0][512:1536])
    assert step.record.bytes_written == ((INTERNAL, 1024),)
    with pytest.raises(RegionError, match="internal memory"):
        dma(0, 0x100, base + 1280, 1024)
    with pytest.raises(UnsupportedError, match="DMA from internal memory"):
        dma(0x100, 1, 0, 16)


def test_unimplemented_lut_and_shift_modes_raise():
    # a 16-bit OFM's table interpolates over the whole int16 range (test_a16w8_luts.py), not int8's
    with pytest.raises(
        UnsupportedError, match="table lookup into a 16-bit signed OFM with clip range 3"
    ):
        _elementwise(ADD, [1], [0], ofm_size=2, activation=0x3010)
    with pytest.raises(UnsupportedError, match="table lookup into a 32-bit"):
        _elementwise(ADD, [1], [0], activation=0x10)  # int32 OFM needs a forced 8-bit range
    with pytest.raises(UnsupportedError, match="ACTIVATION = 4 is not implemented"):
        _elementwise(ADD, [1], [0], activation=4)  # the hardware sigmoid
    with pytest.raises(UnsupportedError, match="SHR in round mode TFL"):
        _elementwise(SHR, [1], [1], rounding=TFL, global_scale=False)
    with pytest.raises(UnsupportedError, match="CLZ of 8-bit operands"):
        _elementwise(CLZ, [1], ifm_size=1, global_scale=False)
