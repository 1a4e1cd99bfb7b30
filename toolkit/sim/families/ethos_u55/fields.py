"""The register fields every Ethos-U55/U65 operation is described from: its feature maps, its
window, its output stage, and the fields of its record.

Feature maps: IFM_/IFM2_/OFM_PRECISION give the element size (2-bit size field), signedness
(bit 0) and format (bits 6-7: NHWC or NHCWB16); REGION, BASE0-3, HEIGHT0/1_M1, WIDTH0_M1 and
STRIDE_Y/X/C where the tiles lie, as Vela's register_command_stream_util.get_address reads them.

ACTIVATION bits 0-11 select the function: 0 clips to ACTIVATION_MIN/MAX; 16 + k clips, then
looks the value up in LUT slot k of the SHRAM (memory.py); 3 (tanh) and 4 (sigmoid) are not
implemented. Bits 12-15 select the clip range: 0 the OFM type, 2 uint8, 3 int8, 5 int16 (Vela
forces int8 where a table of 32-bit entries writes an int32 OFM: the int8 softmax's exp).

A 32-bit OFM without a forced range bypasses the zero point and the clip: its values are written
as the scaling left them. ACTIVATION_MIN/MAX are 16-bit and Vela programs the int16 limits there,
while the int8 softmax's sums of exponentials (> 2^19) and its fixed-point reciprocal pass through
int32 OFMs unclipped. Vela 3.x's softmax programs the softmax input's zero point as the
OFM_ZERO_POINT of every int32 step (its no_scale_quant keeps it; Vela 5.1 writes 0): adding it
makes the Himax WE2 stream's right shift 23 instead of 24 and its outputs [127, -102] where
TFLite's reference kernels give [104, -104]; without it the stream is bit-exact with them. With a
forced range (the softmax's exp table into an int32 OFM) the zero point is added before the clip
and the lookup: it moves x - max into the table's index range.
"""

from __future__ import annotations

from ... import outstage
from ...activation import InterpolatedLut, Lut
from ...errors import PayloadError, UnsupportedError, at
from ...kernel import NO_UPSCALE, Kernel
from ...layouts import FeatureMap, feature_map
from ...memory import LUT_BYTES, LUT_SLOT_BYTES
from ...outstage import Finish
from ...registers import Registers, signed16
from ..accelerator_config import Accelerator

_SIZE_CODES = {0: 1, 1: 2, 2: 4}  # the PRECISION registers' size field -> bytes
NONE, TANH, SIGMOID, LUT_FIRST, LUT_LAST = 0, 3, 4, 16, 23  # ACTIVATION functions
CLIP_RANGES = {2: (0, 255), 3: (-128, 127), 5: (-32768, 32767)}  # 0: the OFM type's
GLOBAL_SCALE = 1 << 8  # OFM_PRECISION: one OFM scale from OFM_SCALE (else per channel)


def label(regs: Registers) -> str:
    """How messages name an operation: its command and command-stream offset."""
    op = regs.command
    return f"{op.name} at command-stream offset {op.offset:#x}"


def check_common(regs: Registers, upscales: tuple[int, ...] = (NO_UPSCALE,)) -> None:
    """Modes the output stage and IFM fetch do not implement stop here, never silently (the
    activation's: output_finish). `upscales`: the IFM_UPSCALE modes the operation
    implements."""
    op = regs.command
    upscale = regs.get("IFM_UPSCALE", 0) & 3  # PARALLEL_MODE: decoder.describe checks it
    if upscale not in upscales:
        raise UnsupportedError(
            f"IFM_UPSCALE = {upscale} is not implemented by the simulator "
            f"(in {at(op.offset, op.name, op.param)})"
        )
    if regs.get("ACC_FORMAT", 0) == 2:
        raise UnsupportedError(
            "ACC_FORMAT = 2 (fp s5.10) is not implemented by the simulator "
            f"(in {at(op.offset, op.name, op.param)})"
        )


def _precision(
    regs: Registers, name: str, size_shift: int, size_bits: int
) -> tuple[int, bool, bool]:
    value = regs.get(name)
    code = (value >> size_shift) & ((1 << size_bits) - 1)
    if code not in _SIZE_CODES:
        raise UnsupportedError(f"{name} precision code {code}" + _where(regs, value))
    fmt = (value >> 6) & 3
    if fmt > 1:
        raise UnsupportedError(f"{name} format {fmt}" + _where(regs, value))
    return _SIZE_CODES[code], bool(value & 1), fmt == 1


def _where(regs: Registers, value: int) -> str:
    """An error's ' in <command> (value) at command-stream offset ...'; '' for registers read
    back from a record (NpuFamily.output_map), which come without their command."""
    op = regs.op
    return "" if op is None else " in " + at(op.offset, op.name, value)


# register names per feature map, made once (planning reads them for every operation)
_REQUIRED = ("REGION", "HEIGHT0_M1", "HEIGHT1_M1", "WIDTH0_M1", "STRIDE_Y", "STRIDE_X", "STRIDE_C")
_NAMES = {
    prefix: (
        f"{prefix}_PRECISION",
        tuple(f"{prefix}_{f}" for f in _REQUIRED),
        tuple(f"{prefix}_BASE{i}" for i in range(4)),
        f"{prefix}_ZERO_POINT",
    )
    for prefix in ("IFM", "IFM2", "OFM")
}


def _feature_map(
    regs: Registers, name: str, size_shift: int, height: int, width: int, depth: int
) -> FeatureMap:
    precision, required, base_names, zero_point = _NAMES[name]
    size, signed, brick = _precision(regs, precision, size_shift, 2)
    region, h0, h1, w0, stride_y, stride_x, stride_c = regs.required(required)
    values = regs.values
    base0, base1, base2, base3 = [values.get(b, 0) for b in base_names]
    return feature_map(
        region & 0x7,
        (base0, base1, base2, base3),
        (h0 + 1, h1 + 1, w0 + 1),
        (height, width, depth),
        (stride_y, stride_x, stride_c),
        size,
        signed,
        brick,
        signed16(values.get(zero_point, 0)),
    )


def ofm_map(regs: Registers) -> FeatureMap:
    get = regs.get
    return _feature_map(
        regs,
        "OFM",
        1,
        get("OFM_HEIGHT_M1") + 1,
        get("OFM_WIDTH_M1") + 1,
        get("OFM_DEPTH_M1") + 1,
    )


def ifm_map(regs: Registers, height: int, width: int, depth: int, name: str = "IFM") -> FeatureMap:
    """The IFM, or with name="IFM2" the second elementwise operand."""
    return _feature_map(regs, name, 2, height, width, depth)


def kernel_from(regs: Registers) -> Kernel:
    """The window: KERNEL_STRIDE's stride, dilation fields, the kernel size, IFM_PAD_* and
    IFM_UPSCALE (NEAREST 1, TRANSPOSE 2: the Kernel.upscale numbers)."""
    stride, height_m1, width_m1 = regs.required(_KERNEL)
    values = regs.values
    dil_x = ((stride >> 3) & 1) + 1
    dil_y = ((stride >> 4) & 1) + 1
    return Kernel(
        height=height_m1 // dil_y + 1,
        width=width_m1 // dil_x + 1,
        stride_y=(((stride >> 1) & 1) | (((stride >> 9) & 7) << 1)) + 1,
        stride_x=((stride & 1) | (((stride >> 6) & 7) << 1)) + 1,
        dilation_y=dil_y,
        dilation_x=dil_x,
        pad_top=values.get("IFM_PAD_TOP", 0),
        pad_left=values.get("IFM_PAD_LEFT", 0),
        pad_bottom=values.get("IFM_PAD_BOTTOM", 0),
        pad_right=values.get("IFM_PAD_RIGHT", 0),
        upscale=values.get("IFM_UPSCALE", 0) & 3,
    )


_KERNEL = ("KERNEL_STRIDE", "KERNEL_HEIGHT_M1", "KERNEL_WIDTH_M1")


def part_kernel_first(regs: Registers) -> bool:
    """KERNEL_STRIDE's weight order: the weight stream goes kernel element first."""
    return bool(regs.get("KERNEL_STRIDE") & 4)


def rounding(regs: Registers) -> int:
    """OFM_PRECISION's round mode (outstage.NATURAL, TFL or TRUNCATE)."""
    return regs.get("OFM_PRECISION") >> 14


def ofm_rescale(regs: Registers) -> tuple[int, int]:
    """OFM_SCALE: (scale, shift)."""
    return regs.get("OFM_SCALE", 0), regs.cmd1_param("OFM_SCALE") & 0x3F


def _unsupported_activation(regs: Registers, reason: str) -> UnsupportedError:
    op = regs.command
    return UnsupportedError(
        f"{reason} is not implemented by the simulator (in "
        f"{at(op.offset, 'NPU_SET_ACTIVATION', regs.get('ACTIVATION', 0))} "
        f"for {op.name} at command-stream offset {op.offset:#x})"
    )


def _clip_range(regs: Registers, ofm: FeatureMap) -> tuple[int, int, int, int]:
    """(function, clip range field, lowest, highest value of the clip range)."""
    value = regs.get("ACTIVATION", 0)
    function, clip_range = value & 0xFFF, value >> 12
    if function != NONE and not LUT_FIRST <= function <= LUT_LAST:
        op = regs.command
        raise UnsupportedError(
            f"ACTIVATION = {function} is not implemented by the simulator "
            f"(in {at(op.offset, op.name, op.param)})"
        )
    if clip_range == 0:
        range_lo, range_hi = outstage.limits(ofm.dtype)
    elif clip_range in CLIP_RANGES:
        range_lo, range_hi = CLIP_RANGES[clip_range]
    else:
        raise _unsupported_activation(regs, f"ACTIVATION clip range {clip_range}")
    return function, clip_range, range_lo, range_hi


def output_finish(regs: Registers, ofm: FeatureMap, accelerator: Accelerator) -> Finish:
    """Zero point, clip and (if ACTIVATION selects one) table lookup for this operation's OFM;
    the table at its slot of the configuration's SHRAM (the engines check it lies there)."""
    function, clip_range, range_lo, range_hi = _clip_range(regs, ofm)
    zero_point = ofm.zero_point
    if ofm.elem_size == 4 and clip_range == 0:
        lo, hi, zero_point = range_lo, range_hi, 0
    else:
        lo = max(regs.s16("ACTIVATION_MIN", -32768), range_lo)
        hi = min(regs.s16("ACTIVATION_MAX", 32767), range_hi)
    lut: Lut | InterpolatedLut | None = None
    if function != NONE:
        type_range = outstage.limits(ofm.dtype)
        offset = accelerator.shram_bytes - LUT_BYTES + (function - LUT_FIRST) * LUT_SLOT_BYTES
        eight_bit = (ofm.elem_size == 1 and (range_lo, range_hi) == type_range) or (
            ofm.elem_size == 4 and range_hi - range_lo + 1 == 256
        )
        if eight_bit:
            lut = Lut(offset, ofm.dtype, range_lo)  # little-endian
        elif ofm.elem_size == 2 and ofm.signed and (range_lo, range_hi) == type_range:
            lut = InterpolatedLut(offset, ofm.dtype)
        else:
            raise _unsupported_activation(
                regs,
                f"a table lookup into a {8 * ofm.elem_size}-bit "
                f"{'' if ofm.signed else 'un'}signed OFM with clip range "
                f"{clip_range}",
            )
        if hi < range_lo:  # every value clips to hi, below the table's first entry
            op = regs.command
            raise PayloadError(
                f"{at(op.offset, 'NPU_SET_ACTIVATION_MAX', hi)} is below the first index of "
                f"the activation table ({range_lo}) that {op.name} looks its outputs up in: "
                "the command stream is damaged"
            )
    return Finish(zero_point, lo, hi, ofm.dtype, lut)


def block_of(regs: Registers) -> tuple[int, int, int]:
    return (
        regs.get("OFM_BLK_HEIGHT_M1", 0) + 1,
        regs.get("OFM_BLK_WIDTH_M1", 0) + 1,
        regs.get("OFM_BLK_DEPTH_M1", 0) + 1,
    )


def record_fields(regs: Registers, ifm: FeatureMap, ofm: FeatureMap) -> dict:
    """The OpRecord fields that every block operation (conv, pool, elementwise) takes from its
    IFM, OFM, block configuration and activation."""
    return dict(
        offset=regs.command.offset,
        ofm_shape=ofm.shape,
        ifm_shape=ifm.shape,
        block=block_of(regs),
        ifm_elem_size=ifm.elem_size,
        ofm_elem_size=ofm.elem_size,
        ifm_brick=ifm.brick,
        ofm_brick=ofm.brick,
        activation=regs.get("ACTIVATION", 0) & 0xFFF,
        registers=regs.values,
    )
