"""The native convolution kernel (toolkit/sim/native) against the numpy path (conv.NumpyConv),
its reference: the same feature maps in memory, weights, bias and rescale, the same bytes out.

Each case builds its feature maps from registers, as planning does, in layouts the compiled
programs of the other tests do not all reach: NHCWB16 with a partial brick, split tiles,
upscaled IFMs, 16-bit IFMs (the wide path), 16- and 32-bit OFMs, every rounding mode, 40-bit
accumulators and a LUT.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import pytest

from toolkit.sim import native
from toolkit.sim.activation import Lut
from toolkit.sim.conv import NumpyConv
from toolkit.sim.families.ethos_u55.fields import ifm_map, ofm_map
from toolkit.sim.kernel import NEAREST, NO_UPSCALE, TRANSPOSE, Kernel
from toolkit.sim.memory import Memory
from toolkit.sim.native.conv import _NARROW, _WEIGHTS8, NativeConv, conv_kernel
from toolkit.sim.outstage import NATURAL, TFL, TRUNCATE, Finish, Rescale, limits
from toolkit.sim.registers import Registers

_SIZE_CODES = {1: 0, 2: 1, 4: 2}
_REGION_BYTES = 1 << 16


def test_native_kernels_are_built():
    """CI builds them (setup.py); the numpy path alone would hide a broken build."""
    if os.environ.get("ETK_SIM_NATIVE") == "0":
        pytest.skip("turned off by ETK_SIM_NATIVE=0")
    assert native.KERNELS is not None, native.STATUS


@dataclass(frozen=True)
class Layout:
    height: int
    width: int
    depth: int
    elem_size: int = 1
    signed: bool = True
    brick: bool = False
    zero_point: int = 0
    split_rows: int = 0  # > 0: rows from here on are a second tile (BASE2), elsewhere in memory


def _registers(prefix: str, layout: Layout, base: int, size_shift: int) -> dict[str, int]:
    e, h, w, c = layout.elem_size, layout.height, layout.width, layout.depth
    if layout.brick:
        stride_x, stride_c = 16 * e, 16 * w * e
        stride_y = -(-c // 16) * stride_c
    else:
        stride_x, stride_c, stride_y = c * e, e, w * c * e
    precision = (_SIZE_CODES[e] << size_shift) | int(layout.signed) | (int(layout.brick) << 6)
    rows = layout.split_rows or h
    return {
        f"{prefix}_PRECISION": precision,
        f"{prefix}_REGION": 1,
        f"{prefix}_BASE0": base,
        f"{prefix}_BASE1": base,
        f"{prefix}_BASE2": base + _REGION_BYTES // 4,  # the second tile's rows start again at 0
        f"{prefix}_BASE3": base,
        f"{prefix}_HEIGHT0_M1": rows - 1,
        f"{prefix}_HEIGHT1_M1": h - 1,
        f"{prefix}_WIDTH0_M1": w - 1,
        f"{prefix}_STRIDE_Y": stride_y,
        f"{prefix}_STRIDE_X": stride_x,
        f"{prefix}_STRIDE_C": stride_c,
        f"{prefix}_ZERO_POINT": layout.zero_point & 0xFFFF,
    }


@dataclass(frozen=True)
class Case:
    ifm: Layout
    ofm: Layout
    kernel: Kernel
    depthwise: bool = False
    rounding: int = NATURAL
    shifts: tuple[int, int] = (36, 40)  # the scales follow: most outputs land inside the clip
    bias_bits: int = 12
    lo_hi: tuple[int, int] | None = None  # the activation's clip; default: the OFM type's
    lut: bool = False


def _kernel(size=3, stride=1, dilation=1, pads=(1, 1, 1, 1), upscale=NO_UPSCALE) -> Kernel:
    h, w = size if isinstance(size, tuple) else (size, size)
    sy, sx = stride if isinstance(stride, tuple) else (stride, stride)
    return Kernel(h, w, sy, sx, dilation, dilation, *pads, upscale)


CASES = {
    "conv3x3_nhwc": Case(Layout(7, 9, 5, zero_point=-3), Layout(7, 9, 6, zero_point=4), _kernel()),
    "conv_strided_dilated_asym_pads": Case(
        Layout(9, 7, 3),
        Layout(4, 3, 8),
        _kernel((3, 2), (2, 3), 2, (2, 1, 0, 1)),
    ),
    "conv_bricks_partial": Case(
        Layout(5, 6, 20, brick=True, zero_point=7),
        Layout(5, 6, 37, brick=True, zero_point=-9),
        _kernel(),
    ),
    "conv_split_tiles": Case(
        Layout(8, 5, 4, split_rows=3), Layout(8, 5, 9, split_rows=5), _kernel()
    ),
    "conv_uint8_ifm": Case(
        Layout(6, 6, 3, signed=False, zero_point=128), Layout(6, 6, 4), _kernel()
    ),
    "conv_nearest_upscale": Case(
        Layout(4, 3, 6), Layout(8, 6, 5), _kernel(pads=(1, 1, 1, 1), upscale=NEAREST)
    ),
    "conv_transpose_upscale": Case(
        Layout(4, 3, 6), Layout(8, 6, 5), _kernel(pads=(1, 1, 2, 2), upscale=TRANSPOSE)
    ),
    "conv_int16_ifm_wide": Case(
        Layout(5, 4, 7, elem_size=2, zero_point=-300), Layout(5, 4, 3, elem_size=2), _kernel()
    ),
    "conv_int32_ofm": Case(
        Layout(4, 4, 8), Layout(4, 4, 5, elem_size=4), _kernel(), shifts=(10, 14)
    ),
    "conv_tfl_double_rounding": Case(
        Layout(5, 5, 8), Layout(5, 5, 6), _kernel(), rounding=TFL, shifts=(32, 34)
    ),
    "conv_truncate": Case(Layout(5, 5, 8), Layout(5, 5, 6), _kernel(), rounding=TRUNCATE),
    "conv_40bit_accumulators": Case(
        Layout(3, 3, 16),
        Layout(3, 3, 4),
        _kernel(),
        bias_bits=39,
        shifts=(55, 62),  # the largest products pass 2^62: numpy's exact object path
    ),
    "conv_relu_clip_and_lut": Case(
        Layout(5, 5, 4), Layout(5, 5, 3, zero_point=-128), _kernel(), lo_hi=(-128, 90), lut=True
    ),
    "depthwise3x3": Case(
        Layout(9, 8, 12, zero_point=5), Layout(9, 8, 12, zero_point=-2), _kernel(), depthwise=True
    ),
    "depthwise_ifm_deeper_bricks_stride2": Case(
        Layout(9, 9, 24, brick=True),
        Layout(5, 5, 18, brick=True),
        _kernel(3, 2, 1, (1, 1, 1, 1)),
        depthwise=True,
    ),
    "depthwise_int16_wide": Case(
        Layout(6, 6, 4, elem_size=2, zero_point=1000),
        Layout(6, 6, 4),
        _kernel(),
        depthwise=True,
        rounding=TFL,
        shifts=(32, 33),
    ),
}


def _setup(case: Case, seed: int):
    """(numpy engine, native engine, memory, weights, bias, rescale, max |bias|)."""
    rng = np.random.default_rng(seed)
    ifm_base, ofm_base = 64, _REGION_BYTES // 2
    values = {
        **_registers("IFM", case.ifm, ifm_base, 2),
        **_registers("OFM", case.ofm, ofm_base, 1),
    }
    regs = Registers(values)
    ifm = ifm_map(regs, case.ifm.height, case.ifm.width, case.ifm.depth)
    ofm = ofm_map(
        Registers(
            {
                **values,
                "OFM_HEIGHT_M1": case.ofm.height - 1,
                "OFM_WIDTH_M1": case.ofm.width - 1,
                "OFM_DEPTH_M1": case.ofm.depth - 1,
            }
        )
    )
    assert case.kernel.ifm_extent(ofm.height, ofm.width) == (ifm.height, ifm.width)
    lo, hi = case.lo_hi or limits(ofm.dtype)
    lut = None
    internal = 8192
    if case.lut:
        lut = Lut(internal - 2048, ofm.dtype, -128)
    zero_point = 0 if ofm.elem_size == 4 else ofm.zero_point
    finish = Finish(zero_point, lo, hi, ofm.dtype, lut)
    memory = Memory({1: rng.integers(0, 256, _REGION_BYTES, dtype=np.uint8)}, internal)
    if lut is not None:
        memory.internal[lut.offset : lut.offset + 256] = rng.integers(0, 256, 256, np.uint8)
    k, depth, oc = case.kernel, case.ifm.depth, case.ofm.depth
    shape = (k.height, k.width, oc) if case.depthwise else (k.height * k.width * depth, oc)
    limit = 255 if seed % 2 == 0 else 127  # 9-bit weights, or 8-bit (weights8's int8 path)
    weights = rng.integers(-limit, limit + 1, shape).astype(np.int16)
    if not case.depthwise:
        weights = np.ascontiguousarray(weights.T)  # (O, K), as NpuFamily.decode_weights lays it out
    bias = rng.integers(-(1 << case.bias_bits), 1 << case.bias_bits, oc, dtype=np.int64)
    shift = rng.integers(case.shifts[0], case.shifts[1] + 1, oc)
    # scales that bring a typical accumulator to a sixth of the OFM's clip range
    terms = k.height * k.width * (1 if case.depthwise else depth)
    low, high = native.value_range(ifm)
    typical = np.sqrt(terms) * 150 * (high - low) / 3 + (1 << case.bias_bits)
    target = (hi - lo) / 6 if ofm.elem_size < 4 else 1 << 20
    scale = (rng.uniform(0.5, 1.5, oc) * target * 2.0**shift / typical).astype(np.int64)
    assert scale.max() < 1 << 31 and scale.min() > 0, scale
    rescale = Rescale(scale, shift, case.rounding)
    numpy_engine = NumpyConv(ifm, ofm, k, case.depthwise, finish)
    native_engine = conv_kernel(ifm, ofm, k, case.depthwise, finish, case.rounding)
    assert isinstance(native_engine, NativeConv)
    bound = int(np.abs(bias).max())
    return numpy_engine, native_engine, memory, weights, bias, rescale, bound


@pytest.mark.skipif(native.KERNELS is None, reason=native.STATUS)
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("name", sorted(CASES))
def test_native_conv_writes_the_numpy_paths_bytes(name, seed):
    numpy_engine, native_engine, memory, weights, bias, rescale, bound = _setup(CASES[name], seed)
    before = memory.regions[1].copy()
    expected = Memory({1: before.copy()}, memory.internal_size)
    expected.internal[:] = memory.internal
    numpy_engine(expected, weights, bias, rescale, bound)
    native_engine(memory, weights, bias, rescale, bound)
    narrow, eight = native_engine.desc[_NARROW], native_engine.desc[_WEIGHTS8]
    assert eight == (narrow and seed % 2 == 1 and not native_engine.depthwise)
    ofm = numpy_engine.ofm
    written = ofm.read(expected).astype(np.int64)
    if numpy_engine.finish.lut is None:  # the rescale shows: most outputs are not clipped
        inside = (written > numpy_engine.finish.lo) & (written < numpy_engine.finish.hi)
        assert inside.mean() > 0.5, f"{inside.mean():.0%} of the outputs inside the clip"
    differ = np.flatnonzero(memory.regions[1] != expected.regions[1])
    assert differ.size == 0, f"{differ.size} bytes differ, first at {differ[:5]}"


@pytest.mark.skipif(native.KERNELS is None, reason=native.STATUS)
def test_native_conv_takes_the_wide_path_where_sums_leave_int32():
    """narrow (int16 products summed in int32) only where every sum fits: a 16-bit IFM, or
    weights whose column sums times the largest |IFM - zp| reach 2^31, take the 64-bit path;
    the narrow path reads int8 weights where all of them fit (conv_desc.weights8)."""
    _, engine, memory, weights, bias, rescale, bound = _setup(CASES["conv3x3_nhwc"], 0)
    engine(memory, weights, bias, rescale, bound)
    assert (engine.desc[_NARROW], engine.desc[_WEIGHTS8]) == (1, int(np.abs(weights).max() < 128))
    nine_bit = np.full((6, 45), 255, np.int16)  # 45 * 255 * 130 < 2^31: narrow, not int8
    engine._set_weights(nine_bit)
    assert (engine.desc[_NARROW], engine.desc[_WEIGHTS8]) == (1, 0)
    assert engine._weights[1].dtype == np.int16
    engine._set_weights(np.full((6, 45), -127, np.int16))
    assert (engine.desc[_NARROW], engine.desc[_WEIGHTS8]) == (1, 1)
    assert engine._weights[1].dtype == np.int8 and engine._weights[1].min() == -127
    big = np.full((6, 45 * 2000), 255, np.int16)  # 2000 * 45 terms * 255 * 130 > 2^31
    engine._set_weights(big)
    assert (engine.desc[_NARROW], engine.desc[_WEIGHTS8]) == (0, 0)
    _, wide, *_ = _setup(CASES["conv_int16_ifm_wide"], 0)
    wide._set_weights(np.ones((3, 9 * 7), np.int16))
    assert (wide.desc[_NARROW], wide.desc[_WEIGHTS8]) == (0, 0)


@pytest.mark.skipif(native.KERNELS is None, reason=native.STATUS)
def test_native_conv_declines_a_lut_the_clip_could_index_outside_of():
    """ACTIVATION_MAX below the table's range (no Vela stream has it): numpy indexes from the
    table's end there, so numpy runs it."""
    numpy_engine, _, *_ = _setup(CASES["conv_relu_clip_and_lut"], 0)
    ifm, ofm, k, finish = numpy_engine.ifm, numpy_engine.ofm, numpy_engine.k, numpy_engine.finish
    assert conv_kernel(ifm, ofm, k, False, finish, NATURAL) is not None
    below = Finish(finish.zero_point, -128, -129, finish.dtype, finish.lut)
    assert conv_kernel(ifm, ofm, k, False, below, NATURAL) is None
