"""The native elementwise and pool kernels (toolkit/sim/native) write the same bytes as the numpy
path, which stays the reference: random single operations over every mode, operand scale mode,
broadcast, layout (NHWC, NHCWB16, tiles), element type, rounding, clip range and LUT, then
whole programs (the MLPerf Tiny files, whose softmax lowering holds the 32-bit modes, and the
shared single-operator cases), each run both ways. Bit-exactness against references we did
not write runs through these kernels too: test_bitexact (TOSA reference model),
test_tflite_softmax and test_tflite_reference_exact (TFLite's reference kernels)."""

from __future__ import annotations

import contextlib
import itertools
from pathlib import Path

import numpy as np
import pytest

from toolkit.lower.tflite import compile_tflite
from toolkit.sim import forget_programs, load_payload, plan
from toolkit.sim.commands import Command
from toolkit.sim.errors import PayloadError
from toolkit.sim.families import accelerator as configuration
from toolkit.sim.memory import Memory
from toolkit.sim.native import elementwise as native_elementwise
from toolkit.sim.native import pool as native_pool
from toolkit.sim.native.copy import NativeCopy, copy_kernel
from toolkit.sim.outstage import NATURAL, TFL, TRUNCATE
from toolkit.sim.registers import RegisterFile
from toolkit.sim.simulator import op_outputs
from toolkit.targets import load_target

from .planned import planned, shram_bytes

ACC = "ethos-u55-128"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
MODULES = (native_elementwise, native_pool)
MUL, ADD, SUB, MIN, MAX, LRELU, ABS, CLZ, SHR, SHL = range(10)  # Vela's elementwise_mode
UNARY, BITWISE = {LRELU, ABS, CLZ}, {CLZ, SHR, SHL}
UNSCALED = BITWISE | {MIN, MAX}
POOL_MAX, POOL_AVERAGE, POOL_SUM = range(3)  # NPU_OP_POOL's parameter
_SIZE_CODE = {1: 0, 2: 1, 4: 2}
_TYPE_RANGE = {(1, True): (-128, 127), (1, False): (0, 255)}

pytestmark = pytest.mark.skipif(
    native_elementwise._KERNEL is None or native_pool._KERNEL is None,
    reason="the native kernels are not built",
)


@contextlib.contextmanager
def numpy_path():
    """Plans made inside run the numpy path: the new kernels' _KERNEL None, programs planned
    afresh (and again after, so later runs plan with the kernels)."""
    saved = [m._KERNEL for m in MODULES]
    for m in MODULES:
        m._KERNEL = None
    forget_programs()
    try:
        yield
    finally:
        for m, kernel in zip(MODULES, saved):
            m._KERNEL = kernel
        forget_programs()


@contextlib.contextmanager
def counting(module):
    """The number of native calls module's kernel makes inside, as a one-element list."""
    calls, kernel = [0], module._KERNEL
    if kernel is None:  # on the numpy path
        yield calls
        return

    def counted(*args):
        calls[0] += 1
        return kernel(*args)

    module._KERNEL = counted
    try:
        yield calls
    finally:
        module._KERNEL = kernel


# --- Single operations on random registers ------------------------------------------------------


class Op:
    """Registers and memory for one operation: feature maps placed one after another in region 1
    (random bytes around them), the SHRAM random too (its LUT slots)."""

    def __init__(self, rng: np.random.Generator):
        self.rng, self.rf, self.end = rng, RegisterFile(), 64
        self.values: dict[str, int] = {}  # what put wrote: the register's value (cmd1: data)

    def put(self, name: str, value: int, data: int | None = None) -> None:
        self.rf.write(Command(0, "NPU_SET_" + name, value, data))
        self.values[name] = value if data is None else data

    def feature_map(self, name: str, h: int, w: int, c: int, size: int, signed: bool, zp: int):
        """Random layout: NHWC or NHCWB16, one tile or four (each in its own span)."""
        brick = bool(self.rng.integers(2))
        depth = -(-c // 16) * 16 if brick else c
        stride_y = w * depth * size + int(self.rng.integers(2)) * 16  # rows may leave a gap
        span = h * stride_y
        tiled = bool(self.rng.integers(2))
        for i in range(4):
            self.put(f"{name}_BASE{i}", 0, self.end + (i * span if tiled else 0))
        self.end += (4 if tiled else 1) * span + 32
        # tiles: rows [0, height0) left of width0 are tile 0; right of it, height1 splits 1 and 3
        h0, h1, w0 = (int(self.rng.integers(1, n + 1)) for n in (h, h, w)) if tiled else (h, h, w)
        self.put(f"{name}_REGION", 1)
        self.put(f"{name}_HEIGHT0_M1", h0 - 1)
        self.put(f"{name}_HEIGHT1_M1", h1 - 1)
        self.put(f"{name}_WIDTH0_M1", w0 - 1)
        self.put(f"{name}_STRIDE_Y", 0, stride_y)
        self.put(f"{name}_STRIDE_X", 0, 16 * size if brick else c * size)
        self.put(f"{name}_STRIDE_C", 0, w * 16 * size if brick else size)
        self.put(f"{name}_ZERO_POINT", zp & 0xFFFF)
        shift = 1 if name == "OFM" else 2
        return int(signed) | _SIZE_CODE[size] << shift | int(brick) << 6

    def output_stage(self, ofm_size: int, ofm_signed: bool) -> None:
        """ACTIVATION (a clip range, or a LUT where the OFM takes one) and its bounds: any
        int16 pair, inside the table's range with a LUT (lut_in_reach_is_checked: beyond)."""
        rng = self.rng
        lo, hi = sorted(int(v) for v in rng.integers(-32768, 32768, 2))
        if ofm_size in (1, 4) and rng.integers(3) == 0:
            clip = 0 if ofm_size == 1 else int(rng.choice([2, 3]))
            slot = int(rng.integers(0, 5 if ofm_size == 4 else 8))  # 32-bit: four slots
            self.put("ACTIVATION", 16 + slot | clip << 12)
            low = -128 if (clip == 3 or (clip == 0 and ofm_signed)) else 0
            lo, hi = sorted(int(v) for v in rng.integers(low, low + 256, 2))
        else:
            self.put("ACTIVATION", int(rng.choice([0, 2, 3, 5])) << 12)
        if rng.integers(2):
            lo, hi = -32768, 32767
        self.put("ACTIVATION_MIN", lo & 0xFFFF)
        self.put("ACTIVATION_MAX", hi & 0xFFFF)

    def ofm_scale(self, scaled: bool) -> tuple[int, int]:
        """OFM_SCALE (random even when unscaled: it must be ignored); (global-scale bit,
        rounding)."""
        rng = self.rng
        # the register's 32 bits: a pool's identity rescale is 2^31 + 1
        self.put("OFM_SCALE", int(rng.integers(0, 64)), int(rng.integers(0, 1 << 32)))
        return int(scaled), int(rng.choice([TFL, TRUNCATE, NATURAL]))

    def run_both_ways(self, prepare, module) -> tuple[int, bytes]:
        """Plan and run the operation natively and on numpy, from the same memory: (native
        calls, the bytes both wrote), asserting they are the same."""
        regions = self.rng.integers(0, 256, self.end + 64, dtype=np.uint8)
        shram = self.rng.integers(0, 256, shram_bytes(ACC), dtype=np.uint8)
        results = []
        for native in (True, False):
            memory = Memory({1: regions.copy()}, shram_bytes(ACC))
            memory.internal[:] = shram
            with contextlib.ExitStack() as stack:
                if not native:
                    stack.enter_context(numpy_path())
                calls = stack.enter_context(counting(module))
                step = prepare(memory)
                step.run(memory)
            results.append((calls[0], memory.regions[1].tobytes()))
        (native_calls, native_bytes), (numpy_calls, numpy_bytes) = results
        assert numpy_calls == 0
        assert native_bytes == numpy_bytes
        return native_calls, native_bytes


def _zp(rng, size: int) -> int:
    return int(rng.integers(-128, 128)) if size < 4 or rng.integers(2) else 0


def random_elementwise(seed: int) -> tuple[Op, int]:
    """One random NPU_OP_ELEMENTWISE that the simulator implements: (op, mode)."""
    rng = np.random.default_rng(seed)
    op = Op(rng)
    mode = int(rng.integers(10))
    h, w, c = (int(v) for v in rng.integers(1, [5, 5, 40]))
    size = 4 if mode in BITWISE else int(rng.choice([1, 2] if mode == LRELU else [1, 2, 4]))
    size2, ofm_size = (int(v) for v in rng.choice([1, 2, 4], 2))
    if mode == MUL:
        size2 = 4 if size == 4 else int(rng.choice([1, 2]))
    scale_mode = int(rng.integers(3)) if mode in (ADD, SUB) else 0
    if scale_mode:  # 32-bit operand scale: 8-bit operands (Vela's int8 ADD/SUB)
        size = size2 = 1
    signed, signed2, ofm_signed = (bool(v) for v in rng.integers(2, size=3))
    rounding_in = int(rng.choice([TFL, TRUNCATE, NATURAL]))
    if scale_mode == 0 and mode in (ADD, SUB):
        op.put("OPA_SCALE", 0, int(rng.integers(0, 1 << 16)))
        op.put("OPB_SCALE", 0, int(rng.integers(0, 1 << 16)))
    else:  # a 32-bit operand scale and its shift (MUL and the others ignore them)
        op.put("OPA_SCALE", int(rng.integers(0, 24)), int(rng.integers(0, 1 << 31)))
        op.put("OPB_SCALE", 0, int(rng.integers(0, 1 << 16)))
    broadcast = 0
    scalar = mode not in UNARY and rng.integers(5) == 0
    if scalar:
        broadcast = 128
        op.put("IFM2_SCALAR", int(rng.integers(0, 1 << 16)))
    elif mode not in UNARY:
        broadcast = int(rng.integers(8))  # H, W, C
    if mode not in UNARY and rng.integers(3) == 0:
        broadcast |= 64  # reversed operands
    op.put("IFM2_BROADCAST", broadcast)
    in_place = rng.integers(6) == 0 and ofm_size == size
    ifm_zp = _zp(rng, size)
    ifm_bits = op.feature_map("IFM", h, w, c, size, signed, ifm_zp)
    if not scalar and mode not in UNARY:
        h2, w2, c2 = (1 if broadcast & bit else n for bit, n in ((1, h), (2, w), (4, c)))
        ifm2_bits = op.feature_map("IFM2", h2, w2, c2, size2, signed2, _zp(rng, size2))
    else:
        ifm2_bits = int(signed2)
        op.put("IFM2_ZERO_POINT", _zp(rng, size2) & 0xFFFF)
    if in_place:  # the OFM over the IFM: the same registers, other than the zero point
        for name in ("REGION", "HEIGHT0_M1", "HEIGHT1_M1", "WIDTH0_M1"):
            op.put(f"OFM_{name}", op.values[f"IFM_{name}"])
        for name in ("BASE0", "BASE1", "BASE2", "BASE3", "STRIDE_Y", "STRIDE_X", "STRIDE_C"):
            op.put(f"OFM_{name}", 0, op.values[f"IFM_{name}"])
        op.put("OFM_ZERO_POINT", _zp(rng, size) & 0xFFFF)
        ofm_bits = int(signed) | _SIZE_CODE[size] << 1 | (ifm_bits & 64)
        ofm_signed = signed
    else:
        ofm_bits = op.feature_map("OFM", h, w, c, ofm_size, ofm_signed, _zp(rng, ofm_size))
    op.output_stage(ofm_size, ofm_signed)
    global_scale, rounding = op.ofm_scale(mode not in UNSCALED)
    if mode == SHR:
        rounding = NATURAL
    op.put("IFM_PRECISION", ifm_bits | scale_mode << 8 | rounding_in << 14)
    op.put("IFM2_PRECISION", ifm2_bits)
    op.put("OFM_PRECISION", ofm_bits | global_scale << 8 | rounding << 14)
    op.put("IFM_DEPTH_M1", c - 1)
    op.put("OFM_HEIGHT_M1", h - 1)
    op.put("OFM_WIDTH_M1", w - 1)
    op.put("OFM_DEPTH_M1", c - 1)
    return op, mode


def _elementwise_step(op: Op, mode: int):
    regs = op.rf.snapshot(Command(0, "NPU_OP_ELEMENTWISE", mode))
    return lambda memory: planned(regs, memory)


@pytest.mark.parametrize("block", range(8))
def test_elementwise_random_operations_native_equals_numpy(block):
    """400 random operations, 50 a block; every mode many times over."""
    modes = []
    for seed in range(50 * block, 50 * block + 50):
        op, mode = random_elementwise(seed)
        calls, _ = op.run_both_ways(_elementwise_step(op, mode), native_elementwise)
        assert calls == 1, f"seed {seed}: the numpy path ran"
        modes.append(mode)
    assert len(set(modes)) >= 8


def test_elementwise_every_mode_and_operand_scale_mode_drawn():
    drawn = set()
    for seed in range(400):
        op, mode = random_elementwise(seed)
        precision = op.values["IFM_PRECISION"]
        drawn.add((mode, (precision >> 8) & 3))
    assert {(m, 0) for m in range(10)} | {(ADD, 1), (ADD, 2), (SUB, 1), (SUB, 2)} <= drawn


def test_elementwise_32_bit_operand_scale_past_int64_falls_back():
    """A 32-bit operand scale of a 32-bit IFM2 (no Vela stream has one) by 2^31 - 1, shift 0:
    x << 20 times the scale passes int64, which numpy leaves to Python ints; the native
    kernel declines it."""
    rng = np.random.default_rng(1)
    op = Op(rng)
    op.feature_map("IFM", 2, 3, 5, 1, True, 0)
    op.feature_map("IFM2", 2, 3, 5, 4, True, 0)
    op.feature_map("OFM", 2, 3, 5, 4, True, 0)
    op.put("OPA_SCALE", 0, (1 << 31) - 1)
    op.put("IFM2_BROADCAST", 64)  # reversed: the IFM2 is operand A, the scaled one
    op.put("IFM_PRECISION", 1 | 1 << 8)
    op.put("IFM2_PRECISION", 1 | 2 << 2)
    op.put("OFM_PRECISION", 1 | 2 << 1 | 1 << 8 | NATURAL << 14)
    op.put("OFM_SCALE", 40, 1 << 30)
    op.output_stage(4, True)
    for name, value in (("IFM_DEPTH_M1", 4), ("OFM_HEIGHT_M1", 1), ("OFM_WIDTH_M1", 2)):
        op.put(name, value)
    op.put("OFM_DEPTH_M1", 4)
    calls, _ = op.run_both_ways(_elementwise_step(op, ADD), native_elementwise)
    assert calls == 0


def _lut_below_its_range(op: Op, ifm_bits: int, ofm_bits: int) -> None:
    """A uint8 OFM through LUT slot 0 (indexed from 0) with ACTIVATION_MAX -3: the clip leaves
    -3, outside the table."""
    op.put("ACTIVATION", 16)
    op.put("ACTIVATION_MIN", -32768 & 0xFFFF)
    op.put("ACTIVATION_MAX", -3 & 0xFFFF)
    op.put("IFM_PRECISION", ifm_bits)
    op.put("OFM_PRECISION", ofm_bits | 1 << 8 | NATURAL << 14)
    op.put("OFM_SCALE", 0, 1)
    for name in ("IFM_DEPTH_M1", "OFM_DEPTH_M1"):
        op.put(name, 6)
    for name in ("OFM_HEIGHT_M1", "OFM_WIDTH_M1"):
        op.put(name, 1)


def test_a_lut_clip_below_the_table_is_damage():
    """A clip that leaves every value below the LUT's first index is a damaged stream, said in
    one line before either engine reads the table (issue 45 item 7: it was an IndexError in
    the numpy lookup, and the native kernels declined it)."""
    rng = np.random.default_rng(2)
    op = Op(rng)
    ifm_bits = op.feature_map("IFM", 2, 2, 7, 1, True, 0)
    ofm_bits = op.feature_map("OFM", 2, 2, 7, 1, False, 0)
    _lut_below_its_range(op, ifm_bits, ofm_bits)
    damaged = "NPU_SET_ACTIVATION_MAX .value -0x3. .* below the first index of the activation table"
    with pytest.raises(PayloadError, match=damaged):
        op.run_both_ways(_elementwise_step(op, ABS), native_elementwise)
    op.put("KERNEL_HEIGHT_M1", 0)
    op.put("KERNEL_WIDTH_M1", 0)
    op.put("KERNEL_STRIDE", 0)
    with pytest.raises(PayloadError, match=damaged):
        op.run_both_ways(_pool_step(op, POOL_MAX), native_pool)


def _kernel_stride(sy: int, sx: int, dy: int, dx: int) -> int:
    """KERNEL_STRIDE's bits, as the U55 decoder reads them (families/ethos_u55/fields.py: kernel_from)."""
    y, x = sy - 1, sx - 1
    return (x & 1) | (y & 1) << 1 | (dx - 1) << 3 | (dy - 1) << 4 | (x >> 1) << 6 | (y >> 1) << 9


def random_pool(
    seed: int, pad_past_kernel: bool = False, one_by_one: bool = False
) -> tuple[Op, int]:
    """One random NPU_OP_POOL that the simulator implements: (op, mode). one_by_one: a 1x1
    window at stride 1, unpadded, not upscaled (Vela's transposes; pool.c's shortcut)."""
    for attempt in itertools.count():  # until the padding leaves some IFM
        rng = np.random.default_rng((seed, attempt))
        mode = int(rng.integers(2 if one_by_one else 3))
        oh, ow = (int(v) for v in rng.integers(1, 6, 2))
        kh, kw, sy, sx = (int(v) for v in rng.integers(1, [5, 5, 4, 4]))
        dy, dx = (int(v) for v in rng.choice([1, 1, 2], 2))
        if one_by_one:
            kh = kw = sy = sx = dy = dx = 1
        pads = [0] * 4
        if mode != POOL_SUM:
            pads = [int(rng.integers(0, k)) for k in (kh, kw, kh, kw)]
        if pad_past_kernel:  # windows wholly in the top padding
            pads[0] = kh * dy + 1
        pad_top, pad_left, pad_bottom, pad_right = pads
        h_in = (oh - 1) * sy + (kh - 1) * dy + 1 - pad_top - pad_bottom
        w_in = (ow - 1) * sx + (kw - 1) * dx + 1 - pad_left - pad_right
        if h_in >= 1 and w_in >= 1:
            break
    op = Op(rng)
    upscale = 0 if one_by_one else int(rng.integers(2))  # NEAREST
    ifm_h, ifm_w = (-(-n // 2) if upscale else n for n in (h_in, w_in))
    size = int(rng.choice([1, 1, 2, 4]))
    ofm_size = int(rng.choice([1, 2, 4]))
    signed, ofm_signed = (bool(v) for v in rng.integers(2, size=2))
    ofm_depth = 1 if mode == POOL_SUM else int(rng.integers(1, 40))
    ifm_depth = int(rng.integers(1, 40)) if mode == POOL_SUM else ofm_depth + int(rng.integers(3))
    if one_by_one:
        ifm_depth = ofm_depth
    ifm_bits = op.feature_map("IFM", ifm_h, ifm_w, ifm_depth, size, signed, _zp(rng, size))
    ofm_bits = op.feature_map("OFM", oh, ow, ofm_depth, ofm_size, ofm_signed, _zp(rng, ofm_size))
    op.output_stage(ofm_size, ofm_signed)
    global_scale, rounding = op.ofm_scale(mode != POOL_MAX or bool(rng.integers(2)))
    op.put("IFM_PRECISION", ifm_bits)
    op.put("OFM_PRECISION", ofm_bits | global_scale << 8 | rounding << 14)
    op.put("IFM_DEPTH_M1", ifm_depth - 1)
    op.put("OFM_HEIGHT_M1", oh - 1)
    op.put("OFM_WIDTH_M1", ow - 1)
    op.put("OFM_DEPTH_M1", ofm_depth - 1)
    op.put("KERNEL_HEIGHT_M1", (kh - 1) * dy)
    op.put("KERNEL_WIDTH_M1", (kw - 1) * dx)
    op.put("KERNEL_STRIDE", _kernel_stride(sy, sx, dy, dx))
    for name, pad in zip(("TOP", "LEFT", "BOTTOM", "RIGHT"), pads):
        op.put(f"IFM_PAD_{name}", pad)
    op.put("IFM_UPSCALE", upscale)
    return op, mode


def _pool_step(op: Op, mode: int):
    regs = op.rf.snapshot(Command(0, "NPU_OP_POOL", mode))
    return lambda memory: planned(regs, memory)


@pytest.mark.parametrize("block", range(6))
def test_pool_random_operations_native_equals_numpy(block):
    """300 random pools, 50 a block: max, average and reduce-sum, kernels to 4x4, strides to 3,
    dilation, padding, NEAREST upscale, 8/16/32-bit IFMs, with and without the OFM scale."""
    modes = []
    for seed in range(50 * block, 50 * block + 50):
        op, mode = random_pool(seed)
        calls, _ = op.run_both_ways(_pool_step(op, mode), native_pool)
        assert calls == 1, f"seed {seed}: the numpy path ran"
        modes.append(mode)
    assert set(modes) == {POOL_MAX, POOL_AVERAGE, POOL_SUM}


def test_pool_one_by_one_windows_native_equals_numpy():
    """60 random 1x1 max and average pools at stride 1 (Vela's transposes and rescales: the
    kernel reads them straight into its outputs), every IFM and OFM size, scaled or not."""
    modes = []
    for seed in range(60):
        op, mode = random_pool(seed, one_by_one=True)
        calls, _ = op.run_both_ways(_pool_step(op, mode), native_pool)
        assert calls == 1, f"seed {seed}: the numpy path ran"
        modes.append(mode)
    assert set(modes) == {POOL_MAX, POOL_AVERAGE}


def test_scaled_max_pool_of_a_window_in_the_padding_falls_back():
    """A window wholly in the padding has the max pool._EMPTY - zero point, which numpy's int64
    rescale overflows (as nothing in Vela's streams does): the native kernel declines those
    (not where numpy's bound sends it to Python ints), and runs the pools without the OFM
    scale."""
    declined = ran = 0
    for seed in range(40):
        op, mode = random_pool(seed, pad_past_kernel=True)
        if mode != POOL_MAX:
            continue
        calls, _ = op.run_both_ways(_pool_step(op, mode), native_pool)
        if not op.values["OFM_PRECISION"] >> 8 & 1:  # unscaled: nothing to overflow
            assert calls == 1, seed
        declined += calls == 0
        ran += calls
    assert declined and ran


# --- Whole programs -----------------------------------------------------------------------------


def _per_operation_both_ways(payload, inputs) -> dict[str, int]:
    """Each operation's OFM, native and numpy, identical; returns the operation kinds."""
    forget_programs()
    with counting(native_elementwise) as elementwise_calls, counting(native_pool) as pool_calls:
        native = op_outputs(payload, inputs, ACC)
    with numpy_path():
        reference = op_outputs(payload, inputs, ACC)
    assert len(native) == len(reference)
    kinds: dict[str, int] = {}
    for (record, got), (_, expected) in zip(native, reference):
        kinds[record.kind] = kinds.get(record.kind, 0) + 1
        assert got.dtype == expected.dtype, record
        assert np.array_equal(got, expected), f"{record.kind} at {record.offset:#x}"
    elementwise = sum(n for k, n in kinds.items() if k.startswith("elementwise."))
    assert (elementwise_calls[0], pool_calls[0]) == (elementwise, _pools_run_alone(payload))
    return kinds


def _pools_run_alone(payload) -> int:
    """The pools that run the pool kernel: neither in a merged run of 1x1 pools (plan._merge_run:
    the run's first operation does them all, as a copy) nor a copy on their own
    (pool.ByteMap.copy_run)."""
    steps = plan.plan_for(payload, configuration(ACC)).steps
    return sum(
        step.record.kind.startswith("pool.")
        and step.run is not plan._merged
        and not isinstance(step.run, NativeCopy)
        for step in steps
    )


@pytest.mark.parametrize(
    "name", ["ad01_int8", "kws_ref_model", "vww_96_int8", "pretrainedResnet_quant"]
)
def test_mlperf_tiny_every_operation_native_equals_numpy(name, tmp_path):
    program = compile_tflite(
        FIXTURES / f"{name}.tflite", load_target("corstone-300").npu(ACC), tmp_path
    )
    payload = load_payload(program.delegates[0].vela_npz_path)
    for seed in range(2):
        rng = np.random.default_rng(seed)
        inputs = [rng.integers(-128, 128, t.shape, dtype=np.int8) for t in payload.inputs]
        kinds = _per_operation_both_ways(payload, inputs)
    if name != "ad01_int8":  # the softmax: every 32-bit mode, pools with a LUT and a sum
        assert {
            "elementwise.sub",
            "elementwise.shr",
            "elementwise.clz",
            "elementwise.shl",
            "elementwise.mul",
            "elementwise.add",
            "pool.max",
            "pool.reduce_sum",
        } <= set(kinds)


@pytest.mark.parametrize(
    "name",
    [
        "add_scaled",
        "add_broadcast",
        "add_broadcast_first",
        "sub_broadcast_first",
        "mul",
        "maxpool3_s2_pad",
        "avgpool3_s1",
        "mean_hw",
        "upsample_nearest2x",
    ],
)
def test_shared_cases_native_equals_numpy(cases, name):
    """The single-operator cases test_bitexact checks against the TOSA reference model."""
    case = cases.get(name, ACC)
    kinds = _per_operation_both_ways(load_payload(case.npz[ACC]), case.inputs)
    assert any(k.startswith(("elementwise.", "pool.")) for k in kinds)


def _strided(buffer: np.ndarray, offset: int, shape, strides, elem_size: int) -> np.ndarray:
    """The elements (as rows of elem_size bytes) at offset + sum(index * stride)."""
    return np.lib.stride_tricks.as_strided(
        buffer[offset:], (*shape, elem_size), (*strides, 1), writeable=True
    )


@pytest.mark.parametrize("seed", range(40))
def test_native_copy_moves_what_numpy_moves(seed):
    """Strided copies with axes of one element anywhere (a transpose's innermost is often one),
    element sizes 1 to 4, source and destination in one buffer (overlapping: every element read
    before any is written), with and without the byte table."""
    rng = np.random.default_rng(seed)
    dims = int(rng.integers(1, 5))
    shape = [int(rng.choice([1, 1, 2, 3, 5])) for _ in range(dims)]
    elem = int(rng.choice([1, 2, 3, 4])) if seed % 4 else 1
    mapped = seed % 4 == 0
    table = rng.integers(0, 256, 256, dtype=np.uint8) if mapped else None
    strides = []
    for _ in range(2):  # each side's strides: its axes in a random order, then spaced out
        order = rng.permutation(dims)
        step, side = elem * int(rng.integers(1, 3)), [0] * dims
        for axis in order[::-1]:
            side[axis] = step
            step *= shape[axis] + int(rng.integers(0, 2))
        strides.append(side)
    span = max(sum((n - 1) * st for n, st in zip(shape, side)) + elem for side in strides)
    src_at, dst_at = (int(v) for v in rng.integers(0, span, 2))
    memory = rng.integers(0, 256, 2 * span + 8, dtype=np.uint8)
    want = memory.copy()
    values = _strided(want, src_at, shape, strides[0], elem).copy()
    _strided(want, dst_at, shape, strides[1], elem)[...] = table[values] if mapped else values
    run = copy_kernel((1, src_at, strides[0]), (1, dst_at, strides[1]), shape, elem, table)
    assert run is not None
    run(Memory({1: memory}, 0))
    assert memory.tobytes() == want.tobytes()
