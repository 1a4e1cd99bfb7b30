"""Elementwise MIN, MAX, ABS and LRELU on the simulator, bit-exact against the TOSA reference model.

What ExecuTorch and Vela 5.1 emit for int8 PyTorch models (ethos-u55-128; the same on -32, -64,
-256 and ethos-u65-256):
- torch.maximum / torch.minimum: TOSA RESCALE (int8 -> int32) of each operand, MAXIMUM / MINIMUM
  on int32, RESCALE to int8. Vela: per operand an ADD (x - zero point, into int32) and a 32-bit
  MUL (the rescale), then MAX / MIN of the int32 values, then a MUL to int8: six operations.
- torch.clamp with tensor bounds: MAXIMUM then MINIMUM; the operands share one scale, so Vela
  folds the rescales: MAX of the int8 operands into int32, MIN of those into int8.
- torch.abs: RESCALE, ABS, RESCALE; Vela folds all three into one ABS with an OFM scale.
- nn.LeakyReLU (after a conv, an add or alone): a TABLE; Vela runs it as the conv's (the add's)
  LUT activation, or a pool with a LUT. No LRELU: Vela 5.1's C++ core never emits it for
  Ethos-U55/U65. Its legacy Python core does, for an int16 TFLite LEAKY_RELU with equal input
  and output scales; that stream is checked against TFLite's reference arithmetic below.
"""

from __future__ import annotations

import contextlib
import io
import math

import numpy as np
import pytest
import torch
from torch import nn

from toolkit.artifacts import LoadedModel
from toolkit.lower.build_variant import compile_variant
from toolkit.lower.tosa_graph import read_tosa
from toolkit.models.layout import channels_last_io
from toolkit.npu import npu_config
from toolkit.quantize.calibration import random_calibration
from toolkit.runners.sim import SimulatorRunner
from toolkit.runners.tosa_ref import TosaReferenceRunner, run_tosa_delegate
from toolkit.sim import SIMULATED, UnsupportedError, load_payload, simulate
from toolkit.sim.commands import Command
from toolkit.sim.families import accelerator as architecture
from toolkit.sim.memory import Memory
from toolkit.sim.memory_system import memory_system
from toolkit.sim.outstage import NATURAL, TFL
from toolkit.sim.registers import RegisterFile
from toolkit.targets import load_target

from .planned import planned, shram_bytes
from .tflite_builder import linear_feature_maps

ACC = "ethos-u55-128"
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
MIN, MAX, LRELU, ABS = 3, 4, 5, 6


class Maximum(nn.Module):
    def forward(self, a, b):
        return torch.maximum(a, b)


class Minimum(nn.Module):
    def forward(self, a, b):
        return torch.minimum(a, b)


class Abs(nn.Module):
    def forward(self, x):
        return torch.abs(x)


class ClampTensors(nn.Module):
    def forward(self, x, lo, hi):
        return torch.clamp(x, lo, hi)


class ConvLeakyRelu(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 8, 1)
        self.act = nn.LeakyReLU(0.1)

    def forward(self, x):
        return self.act(self.conv(x))


class LeakyRelu(nn.Module):
    """Alone, a single TOSA TABLE: ExecuTorch dumps its TOSA file without the delegate tag."""

    def forward(self, x):
        return nn.functional.leaky_relu(x, 0.1)


PAIRS = (1, 16, 64, 64)  # 65536 elements: every pair of int8 values in one run
SMALL = (1, 8, 5, 6)
RESCALED = ["elementwise.add", "elementwise.mul"] * 2  # each operand: - zero point, rescale
# name -> (module, NCHW input shapes, TOSA operator it must contain, NPU operation kinds)
MODELS = {
    "maximum": (
        Maximum,
        [PAIRS, PAIRS],
        "MAXIMUM",
        [*RESCALED, "elementwise.max", "elementwise.mul"],
    ),
    "minimum": (
        Minimum,
        [PAIRS, PAIRS],
        "MINIMUM",
        [*RESCALED, "elementwise.min", "elementwise.mul"],
    ),
    "minimum_broadcast_first": (
        Minimum,
        [(1, 1, 5, 6), SMALL],
        "MINIMUM",
        [*RESCALED, "elementwise.min", "elementwise.mul"],
    ),
    "abs": (Abs, [(1, 40, 9, 7)], "ABS", ["elementwise.abs"]),
    "clamp_tensor_bounds": (
        ClampTensors,
        [SMALL] * 3,
        "MINIMUM",
        ["elementwise.add", "elementwise.mul", "elementwise.max", "elementwise.min"],
    ),
    "conv_leaky_relu": (ConvLeakyRelu, [(1, 4, 5, 6)], "TABLE", ["dma", "conv"]),
    "leaky_relu": (LeakyRelu, [(1, 8, 8, 8)], "TABLE", ["dma", "pool.average"]),
}


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    """Each model compiled once (channels-last, so no edge transposes), lazily."""
    root, compiled = tmp_path_factory.mktemp("elementwise_modes"), {}

    def get(name):
        if name not in compiled:
            factory, shapes, _, _ = MODELS[name]
            torch.manual_seed(0)
            example = tuple(torch.randn(*s) for s in shapes)
            model = channels_last_io(
                LoadedModel(f"test:{name}", name, factory().eval(), example, f"elementwise-{name}")
            )
            program = compile_variant(
                model,
                random_calibration(model.example_inputs, 4, 0),
                "fused",
                load_target("corstone-300").npu(ACC),
                root / name,
            )
            compiled[name] = (model, program)
        return compiled[name]

    return get


@pytest.mark.parametrize("name", MODELS)
def test_mode_bit_exact_against_tosa_reference(programs, name):
    model, program = programs(name)
    assert program.cpu_ops == () and len(program.delegates) == 1
    rng = np.random.default_rng(7)
    for trial in range(6):  # wide inputs (x3) saturate the int8 range
        inputs = [
            (rng.standard_normal(tuple(x.shape)) * (3.0 if trial % 2 else 1.0)).astype(np.float32)
            for x in model.example_inputs
        ]
        expected = TosaReferenceRunner().run(program, inputs).outputs
        got = SimulatorRunner().run(program, inputs).outputs
        for e, g in zip(expected, got):
            assert e.dtype == g.dtype and np.array_equal(e, g), f"{name}, trial {trial}"


@pytest.mark.parametrize("name", MODELS)
def test_records_name_the_modes_and_the_cycle_model_times_them(programs, name):
    _, _, tosa_op, kinds = MODELS[name]
    _, program = programs(name)
    (delegate,) = program.delegates
    assert tosa_op in read_tosa(delegate.tosa_path).histogram()
    payload = load_payload(delegate.payload or delegate.vela_npz_path)
    result = simulate(payload, [np.zeros(t.shape, t.dtype) for t in payload.inputs], ACC)
    assert [r.kind for r in result.operations] == kinds
    assert all(r.cycles >= r.compute_cycles > 0 for r in result.operations if r.kind != "dma")
    if name == "conv_leaky_relu":  # the TABLE is the conv's LUT activation (slot 0)
        assert result.operations[-1].activation == 16


def test_min_max_every_int8_pair(programs):
    """Every (a, b) of int8 values through the whole delegate, against the TOSA graph."""
    values = np.arange(-128, 128, dtype=np.int8)
    a, b = (v.reshape(PAIRS[0], PAIRS[2], PAIRS[3], PAIRS[1]) for v in np.meshgrid(values, values))
    for name in ("maximum", "minimum"):
        (delegate,) = programs(name)[1].delegates
        expected = run_tosa_delegate(delegate, [a, b])[0]
        got = simulate(
            load_payload(delegate.payload or delegate.vela_npz_path), [a, b], ACC
        ).outputs[0]
        assert np.array_equal(np.asarray(expected).ravel(), got.ravel()), name


def test_abs_every_int8_value(programs):
    model, program = programs("abs")
    (delegate,) = program.delegates
    shape = tuple(model.example_inputs[0].shape)
    x = np.resize(np.arange(-128, 128, dtype=np.int8), math.prod(shape)).reshape(shape)
    expected = run_tosa_delegate(delegate, [x])[0]
    got = simulate(load_payload(delegate.payload or delegate.vela_npz_path), [x], ACC).outputs[0]
    assert np.array_equal(np.asarray(expected).ravel(), got.ravel())


def test_cycle_rates_of_the_new_modes(programs):
    """8/16-bit MIN/MAX/ABS/LRELU stream at Vela's rate for "other" elementwise operations
    (output_cycles_per_elem[7]: 0.5 cycles/element on U55-128, half ADD's); 32-bit ones at the
    rate of every 32-bit elementwise operation."""
    _, program = programs("abs")
    (delegate,) = program.delegates
    payload = load_payload(delegate.payload or delegate.vela_npz_path)
    (record,) = simulate(
        payload, [np.zeros(t.shape, t.dtype) for t in payload.inputs], ACC
    ).operations
    npu = npu_config(ACC)
    memory = memory_system(ACC, npu.system_config, npu.memory_mode)
    elements = math.prod(record.ofm_shape)
    u55 = architecture(ACC)
    timing_of = u55.family.op_timing
    add = timing_of(record._replace(kind="elementwise.add"), u55, memory)
    for kind in ("elementwise.abs", "elementwise.min", "elementwise.max", "elementwise.lrelu"):
        timing = timing_of(record._replace(kind=kind), u55, memory)
        assert add.compute - timing.compute == pytest.approx((1.0 - 0.5) * elements, abs=1)
    wide = record._replace(ifm_elem_size=4, kind="elementwise.max")
    assert timing_of(wide, u55, memory) == timing_of(
        wide._replace(kind="elementwise.mul"), u55, memory
    )
    for accelerator in (n for n in SIMULATED if not n.startswith("ethos-u85")):
        rates = architecture(accelerator).elementwise_cycles
        assert (
            rates[4]
            == {
                "ethos-u55-32": 2.0,
                "ethos-u55-64": 1.0,
                "ethos-u55-128": 0.5,
                "ethos-u55-256": 0.25,
                "ethos-u65-256": 0.25,
                "ethos-u65-512": 0.125,
            }[accelerator]
        )


# --- One NPU operation at a time ----------------------------------------------------------------

_SIZE_CODE = {1: 0, 2: 1, 4: 2}


def _elementwise(
    mode: int,
    a,
    b=None,
    *,
    size=1,
    size2=None,
    ofm_size=None,
    zps=(0, 0, 0),
    ofm_scale=(1, 0),
    rounding=TFL,
    global_scale=True,
    act=None,
    scalar=None,
    reversed_=False,
):
    """NPU_OP_ELEMENTWISE(mode) on (1, 1, n) NHWC vectors of signed `size`-byte values; b None: a
    unary op or (with `scalar`) an IFM2 scalar; a 1-element b broadcasts along C. zps: the IFM,
    IFM2 and OFM zero points. OPA/OPB_SCALE hold 3 and 5 (these modes ignore them)."""
    a = np.asarray(a, np.int64)
    n = a.size
    size2, ofm_size = size2 or size, ofm_size or size
    act = act or (-32768, 32767)
    rf = RegisterFile()

    def put(name, value, data=None):
        rf.write(Command(0, "NPU_SET_" + name, value, data))

    fms = [("IFM", 0, size, n, zps[0]), ("OFM", 64 * n, ofm_size, n, zps[2])]
    if b is not None:
        b = np.asarray(b, np.int64)
        fms.append(("IFM2", 32 * n, size2, b.size, zps[1]))
    linear_feature_maps(put, fms)
    put("IFM2_ZERO_POINT", zps[1] & 0xFFFF)
    put("IFM_PRECISION", 1 | _SIZE_CODE[size] << 2 | NATURAL << 14)
    put("IFM2_PRECISION", 1 | _SIZE_CODE[size2] << 2)
    put("OFM_PRECISION", 1 | _SIZE_CODE[ofm_size] << 1 | global_scale << 8 | rounding << 14)
    put("IFM_DEPTH_M1", n - 1)
    put("OFM_HEIGHT_M1", 0)
    put("OFM_WIDTH_M1", 0)
    put("OFM_DEPTH_M1", n - 1)
    broadcast = (4 if b is not None and b.size == 1 < n else 0) | (64 if reversed_ else 0)
    if scalar is not None:
        broadcast |= 128
        put("IFM2_SCALAR", scalar & 0xFFFF)
    put("IFM2_BROADCAST", broadcast)
    put("OPA_SCALE", 0, 3)
    put("OPB_SCALE", 0, 5)
    put("OFM_SCALE", ofm_scale[1], ofm_scale[0])
    put("ACTIVATION", 0)
    put("ACTIVATION_MIN", act[0] & 0xFFFF)
    put("ACTIVATION_MAX", act[1] & 0xFFFF)
    memory = Memory({1: np.zeros(96 * n, np.uint8)}, shram_bytes(ACC))
    memory.regions[1][: n * size] = a.astype(f"<i{size}").view(np.uint8)
    if b is not None:
        memory.regions[1][32 * n : 32 * n + size2 * b.size] = b.astype(f"<i{size2}").view(np.uint8)
    step = planned(rf.snapshot(Command(0, "NPU_OP_ELEMENTWISE", mode)), memory)
    step.run(memory)
    got = memory.regions[1][64 * n : 64 * n + n * ofm_size].view(f"<i{ofm_size}").tolist()
    return got, step.record


A8 = [-128, -5, 0, 100, 127, 3]
B8 = [0, -10, 7, 127, -128, -1]


def test_max_of_zero_point_adjusted_operands_unscaled():
    """(a + 3) vs (b - 4), + OFM zero point -1, clipped to int8. OFM_SCALE is not applied (the
    global-scale bit is clear, as Vela leaves it), nor are OPA/OPB_SCALE."""
    got, record = _elementwise(
        MAX, A8, B8, zps=(-3, 4, -1), ofm_scale=(12345, 7), global_scale=False, act=(-128, 127)
    )
    assert got == [-5, -3, 2, 122, 127, 5]  # max: -4, -2, 3, 123, 130 (clipped), 6
    assert record.kind == "elementwise.max"
    # int32 operands (the TOSA MAXIMUM of Vela's int8 streams), and an IFM2 scalar
    assert _elementwise(MAX, [INT32_MIN, -7, 5, INT32_MAX], [-6, -6, 6, 0], size=4)[0] == [
        -6,
        -6,
        6,
        INT32_MAX,
    ]
    assert _elementwise(MAX, [-100, 10, 50], size=4, scalar=20, reversed_=True)[0] == [20, 20, 50]


def test_min_of_zero_point_adjusted_operands_unscaled():
    got, record = _elementwise(MIN, A8, B8, zps=(-3, 4, -1), global_scale=False, act=(-128, 127))
    assert got == [-126, -15, 2, 102, -128, -6]  # min: -125, -14, 3, 103, -132 (clipped), -5
    assert record.kind == "elementwise.min"
    # int32 in, int8 out (clamp's MIN), an 8-bit IFM2 broadcast along C
    assert _elementwise(
        MIN,
        [INT32_MIN, 0, 100, 200],
        [-50],
        size=4,
        size2=1,
        ofm_size=1,
        zps=(0, 10, 3),
        act=(-128, 127),
    )[0] == [-128, -57, -57, -57]
    with pytest.raises(
        UnsupportedError,
        match=r"MIN with an OFM scale \(12345, shift 7\) is not "
        r"implemented",
    ):
        _elementwise(MIN, A8, B8, ofm_scale=(12345, 7), global_scale=True)


def test_abs_then_the_ofm_scale():
    """|x + 17| times 1899364355 / 2^30 rounded half up, + the OFM zero point -128: Vela's
    torch.abs stream (its three TOSA operators folded into one ABS)."""
    x = [-128, -17, -16, 0, 50, 127, -100]
    got, record = _elementwise(
        ABS, x, zps=(-17, 0, -128), ofm_scale=(1899364355, 30), rounding=NATURAL, act=(-128, 127)
    )
    magnitude = np.abs(np.array(x) + 17)
    assert got == [68, -128, -126, -98, -9, 127, 19]
    assert got == np.clip((magnitude * 1899364355 + (1 << 29) >> 30) - 128, -128, 127).tolist()
    assert record.kind == "elementwise.abs" and record.bytes_read == ((1, 7),)
    # TFL rounding past shift 31 rounds twice, as TFLite's ABS: |x| / 8 gives 1 for 3
    got, _ = _elementwise(ABS, [-3, 3, 5, -7, 11, -2], ofm_scale=(1 << 30, 33))
    assert got == [1, 1, 1, 1, 2, 0]
    assert (
        got
        == _multiply_by_quantized_multiplier(
            np.array([3, 3, 5, 7, 11, 2]), *_quantize_multiplier(1 / 8)
        ).tolist()
    )


def test_abs_of_32_bit_operands_applies_only_the_shift():
    """Vela's C++ core: "for 32-bit operations scale is not applied but shift is"; |-2^31|
    saturates."""
    assert _elementwise(ABS, [INT32_MIN, -7, 5, 0], size=4, ofm_scale=(12345, 1), rounding=NATURAL)[
        0
    ] == [1 << 30, 4, 3, 0]
    assert _elementwise(ABS, [INT32_MIN, -7, INT32_MAX], size=4)[0] == [INT32_MAX, 7, INT32_MAX]


def test_lrelu_scales_only_negative_values():
    """Legacy Vela's int16 LEAKY_RELU(0.1): OFM_SCALE = alpha = 1717986944 / 2^34, TFL rounding.
    Non-negative values pass unscaled (alpha > 1 too)."""
    x = [-32768, -10, -6, -5, -4, 0, 1, 32767]
    got, record = _elementwise(LRELU, x, size=2, ofm_scale=(1717986944, 34))
    assert got == [-3277, -1, -1, -1, 0, 0, 1, 32767]
    assert got == _tflite_leaky_relu(np.array(x), 0.1).tolist()
    assert record.kind == "elementwise.lrelu"
    got, _ = _elementwise(LRELU, x, size=2, ofm_scale=(1342177280, 29))  # alpha 2.5
    assert got == [-32768, -25, -15, -12, -10, 0, 1, 32767]  # -12.5 rounds half up
    # int8 with zero points: (x - 5) * 0.5 for negatives, + OFM zero point -2
    assert _elementwise(
        LRELU,
        [-128, 4, 5, 6, 127],
        zps=(5, 0, -2),
        ofm_scale=(1 << 30, 31),
        rounding=NATURAL,
        act=(-128, 127),
    )[0] == [-68, -2, -2, -1, 120]
    with pytest.raises(UnsupportedError, match="LRELU of 32-bit operands"):
        _elementwise(LRELU, [1], size=4)


def test_unknown_elementwise_mode_raises():
    with pytest.raises(
        UnsupportedError,
        match=r"elementwise mode unknown is not implemented by "
        r"the simulator \(NPU_OP_ELEMENTWISE \(value 0xa\)",
    ):
        _elementwise(10, [1], [1])


# --- LRELU as Vela emits it: the legacy core's int16 LEAKY_RELU ---------------------------------


def _quantize_multiplier(value: float) -> tuple[int, int]:
    """TFLite's QuantizeMultiplier."""
    fraction, shift = math.frexp(value)
    q = round(fraction * (1 << 31))
    return (q // 2, shift + 1) if q == 1 << 31 else (q, shift)


def _multiply_by_quantized_multiplier(x: np.ndarray, multiplier: int, shift: int) -> np.ndarray:
    """TFLite's reference MultiplyByQuantizedMultiplier: a rounding doubling high multiply, then
    a rounding divide by a power of two (ties away from zero)."""
    x = x.astype(np.int64) << max(shift, 0)
    product = x * multiplier
    high = product + np.where(product >= 0, 1 << 30, 1 - (1 << 30))
    high = np.where(high >= 0, high >> 31, -(-high >> 31))
    right = max(-shift, 0)
    if right == 0:
        return high
    mask = (1 << right) - 1
    return (high >> right) + ((high & mask) > (mask >> 1) + (high < 0))


def _tflite_leaky_relu(x: np.ndarray, alpha: float, zero_point: int = 0) -> np.ndarray:
    """TFLite's reference QuantizeLeakyRelu for int16 with equal input and output scales."""
    identity = _quantize_multiplier(1.0)
    negative = _quantize_multiplier(float(np.float32(alpha)))
    v = x.astype(np.int64) - zero_point
    out = (
        np.where(
            v >= 0,
            _multiply_by_quantized_multiplier(v, *identity),
            _multiply_by_quantized_multiplier(v, *negative),
        )
        + zero_point
    )
    return np.clip(out, -32768, 32767)


def _leaky_relu_int16_tflite(alpha: float, shape: tuple[int, ...], scale: float) -> bytes:
    import flatbuffers
    from ethosu.vela.tflite import (
        LeakyReluOptions,
        Operator,
        OperatorCode,
        Tensor,
    )
    from ethosu.vela.tflite.BuiltinOperator import BuiltinOperator
    from ethosu.vela.tflite.BuiltinOptions import BuiltinOptions
    from ethosu.vela.tflite.TensorType import TensorType

    from .tflite_builder import _ints, _quantization, finish_model, subgraph

    b = flatbuffers.Builder(1024)
    tensors = []
    for i in range(2):
        name = b.CreateString(f"t{i}")
        dims = _ints(b, Tensor.StartShapeVector, list(shape))
        quant = _quantization(b, scale, 0)
        Tensor.Start(b)
        Tensor.AddShape(b, dims)
        Tensor.AddType(b, TensorType.INT16)
        Tensor.AddBuffer(b, i + 1)
        Tensor.AddName(b, name)
        Tensor.AddQuantization(b, quant)
        tensors.append(Tensor.End(b))
    LeakyReluOptions.Start(b)
    LeakyReluOptions.AddAlpha(b, alpha)
    options = LeakyReluOptions.End(b)
    inputs = _ints(b, Operator.StartInputsVector, [0])
    outputs = _ints(b, Operator.StartOutputsVector, [1])
    Operator.Start(b)
    Operator.AddOpcodeIndex(b, 0)
    Operator.AddInputs(b, inputs)
    Operator.AddOutputs(b, outputs)
    Operator.AddBuiltinOptionsType(b, BuiltinOptions.LeakyReluOptions)
    Operator.AddBuiltinOptions(b, options)
    operator = Operator.End(b)
    graph = subgraph(b, tensors, [operator], 1)
    OperatorCode.Start(b)
    OperatorCode.AddBuiltinCode(b, BuiltinOperator.LEAKY_RELU)
    OperatorCode.AddDeprecatedBuiltinCode(b, BuiltinOperator.LEAKY_RELU)
    OperatorCode.AddVersion(b, 2)
    code = OperatorCode.End(b)
    return finish_model(b, graph, [code], 2)


@pytest.mark.parametrize("alpha", [0.1, 0.77, 2.5])
def test_legacy_vela_int16_leaky_relu_matches_tflite_reference(alpha, tmp_path):
    """Every int16 value through legacy Vela's LRELU stream equals TFLite's reference kernel."""
    from ethosu.vela import vela

    path = tmp_path / "leaky_relu.tflite"
    path.write_bytes(_leaky_relu_int16_tflite(alpha, PAIRS, 0.01))
    with contextlib.redirect_stdout(io.StringIO()):
        vela.main(
            [
                *npu_config(ACC).vela_flags,
                "--debug-force-legacy-core",
                "--output-format=raw",
                f"--output-dir={tmp_path}",
                str(path),
            ]
        )
    (npz,) = tmp_path.glob("leaky_relu_vela*.npz")  # the legacy core names it *_vela_sg0.npz
    payload = load_payload(npz)
    x = np.arange(-32768, 32768, dtype=np.int16).reshape(PAIRS)
    result = simulate(payload, [x], ACC)
    assert [r.kind for r in result.operations] == ["elementwise.lrelu"]
    assert np.array_equal(result.outputs[0].ravel(), _tflite_leaky_relu(x.ravel(), alpha))
