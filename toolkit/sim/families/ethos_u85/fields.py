"""The register fields every Ethos-U85 operation is described from: its feature maps (in memory,
in a chaining buffer, or a scalar), the permutation of its OFM write, its window, its rounding
and its output stage. Field positions are Vela 5.2.0's (regor's ethos_u85_interface.hpp, read
for the facts; /work notes section 2).

Feature maps: IFM/IFM2_PRECISION bit 0 signed, bits 2-3 size (8/16/32/64 bit), 6-7 format
(NHWC, NHCWB16), 14-15 storage (TILE2X2, TILE3X1, CHAINED, NONE); OFM_PRECISION has its size in
bits 1-2, the global-scale bit 8, reverse in 9-10 and transpose in 11-13. A CHAINED map lives in
the chaining buffer its REGION register numbers: the simulator holds each buffer whole, as region
CHAIN_REGION + index (the hardware streams it block by block; the values are the same).

OFM transpose: OFM_HEIGHT/WIDTH/DEPTH_M1 give the shape before the permutation, the strides the
written tensor's; the code names which source axis lands in the destination's (H, W, C).
"""

from __future__ import annotations

from ... import outstage
from ...activation import InterpolatedLut, Lut
from ...errors import UnsupportedError, at
from ...kernel import Kernel
from ...layouts import FeatureMap, Piece
from ...layouts import feature_map as _layout_map
from ...outstage import Finish
from ...registers import Registers, signed16

CHAIN_REGION = 8  # region of chaining buffer 0 (regions 0-7 are the memory's)
CHAIN_BUFFERS = 6  # Vela's CB_SLOTS
STORAGE_CHAINED, STORAGE_NONE = 2, 3
GLOBAL_SCALE = 1 << 8  # OFM_PRECISION scale_mode: one OFM_SCALE (else the scale stream's)
_SIZES = {0: 1, 1: 2, 2: 4, 3: 8}
# 64-bit maps Vela writes and reads: a16w8 convolutions' 48-bit accumulators kept whole (an
# INT48 tensor with two consumers), an a16w8 RESIZE's INT48 sums whose RESCALE is not a shift,
# and the NONE pool that rescales them (from IFM2)
_WIDE = {
    ("OFM", "NPU_OP_CONV"),
    ("OFM", "NPU_OP_DEPTHWISE"),
    ("OFM", "NPU_OP_RESIZE"),
    ("IFM2", "NPU_OP_POOL"),
}
# transpose code -> for each destination axis (h, w, c), the source axis it takes
_TRANSPOSES = {0: (0, 1, 2), 1: (1, 0, 2), 2: (0, 2, 1), 3: (1, 2, 0), 6: (2, 0, 1), 7: (2, 1, 0)}
# ACTIVATION functions: (OFM bytes of the table entries, signed index)
LUT_NONE, LUT_U8_U8, LUT_S8_S8, LUT_S16_S16 = 0, 1, 4, 8
DOUBLE_SYMMETRIC, NATURAL, TRUNCATE_TO_ZERO = 0, 1, 4  # round modes
_ROUND_NAMES = {
    0: "DOUBLE_SYMMETRIC",
    1: "NATURAL",
    2: "DOUBLE_ASYMMETRIC",
    3: "SYMMETRIC",
    4: "TRUNCATE_TO_ZERO",
    5: "TRUNCATE_TO_LOWER",
}


def label(regs: Registers) -> str:
    op = regs.command
    return f"{op.name} at command-stream offset {op.offset:#x}"


def refuse(regs: Registers, reason: str, register: str | None = None) -> UnsupportedError:
    """'<reason> is not implemented by the simulator (in <register> (value) at ... for <op>)'."""
    op = regs.command
    where = (
        at(op.offset, op.name, op.param)
        if register is None
        else f"{at(op.offset, 'NPU_SET_' + register, regs.get(register, 0))} for {op.name}"
    )
    return UnsupportedError(f"{reason} is not implemented by the simulator (in {where})")


def storage(regs: Registers, name: str) -> int:
    return regs.get(f"{name}_PRECISION", 0) >> 14 & 3


def _layout(regs: Registers, name: str) -> tuple[int, bool, bool]:
    """(element bytes, signed, NHCWB16) of IFM, IFM2 or OFM."""
    value = regs.get(f"{name}_PRECISION")
    size = _SIZES[(value >> (1 if name == "OFM" else 2)) & 3]
    fmt = value >> 6 & 3
    if fmt > 1:
        raise refuse(regs, f"{name} format {fmt}", f"{name}_PRECISION")
    # registers read back from a record (op None) were accepted when the operation was planned
    if size == 8 and regs.op is not None and (name, regs.op.name) not in _WIDE:
        raise refuse(regs, f"a 64-bit {name}", f"{name}_PRECISION")
    return size, bool(value & 1), fmt == 1


def feature_map(regs: Registers, name: str, height: int, width: int, depth: int) -> FeatureMap:
    """IFM, IFM2 or OFM of this shape, in memory or in a chaining buffer."""
    size, signed, brick = _layout(regs, name)
    zero_point = regs.get(f"{name}_ZERO_POINT", 0)
    zero_point = signed16(zero_point) if signed or size > 1 else zero_point
    region = regs.get(f"{name}_REGION") & 7
    if storage(regs, name) == STORAGE_CHAINED:
        if region >= CHAIN_BUFFERS:
            raise refuse(regs, f"chaining buffer {region}", f"{name}_REGION")
        strides = (width * depth * size, depth * size, size)
        chained = _make(CHAIN_REGION + region, (0, 0, 0, 0), (height, height, width),
                        (height, width, depth), strides, size, signed, False, zero_point)  # fmt: skip
        return chained._replace(numpy_only=True)
    h0, h1, w0, sy, sx, sc = regs.required(
        tuple(f"{name}_{f}" for f in ("HEIGHT0_M1", "HEIGHT1_M1", "WIDTH0_M1"))
        + tuple(f"{name}_STRIDE_{a}" for a in "YXC")
    )
    bases = tuple(regs.get(f"{name}_BASE{i}", 0) for i in range(4))
    return _make(region, bases, (h0 + 1, h1 + 1, w0 + 1), (height, width, depth),
                 (sy, sx, sc), size, signed, brick, zero_point)  # fmt: skip


def _make(region, bases, tiles, shape, strides, size, signed, brick, zero_point) -> FeatureMap:
    fm = _layout_map(region, bases, tiles, shape, strides, size, signed, brick, zero_point)
    return fm._replace(numpy_only=True) if size == 8 else fm  # the C kernels stop at 32 bits


def ofm_shape(regs: Registers) -> tuple[int, int, int]:
    """The OFM's shape before any transpose."""
    return (
        regs.get("OFM_HEIGHT_M1") + 1,
        regs.get("OFM_WIDTH_M1") + 1,
        regs.get("OFM_DEPTH_M1") + 1,
    )


def ofm_map(regs: Registers) -> FeatureMap:
    """The OFM as the operation computes it (H, W, C before the permutation), addressed where
    each element is written: a transposed or reversed write is a view with permuted strides."""
    precision = regs.get("OFM_PRECISION")
    transpose, reverse = precision >> 11 & 7, precision >> 9 & 3
    height, width, depth = ofm_shape(regs)
    if transpose == 0 and reverse == 0:
        return feature_map(regs, "OFM", height, width, depth)
    if transpose not in _TRANSPOSES:
        raise refuse(regs, f"OFM transpose {transpose}", "OFM_PRECISION")
    order = _TRANSPOSES[transpose]
    src = (height, width, depth)
    written = feature_map(regs, "OFM", *(src[a] for a in order))
    if storage(regs, "OFM") == STORAGE_CHAINED or (reverse and len(written.pieces) != 1):
        raise refuse(regs, "a transposed or reversed OFM that is chained, or reversed in "
                     "pieces", "OFM_PRECISION")  # fmt: skip
    pieces = tuple(_source_piece(p, order) for p in written.pieces)
    if reverse:  # 1: H, 2: W, 3: C of the source
        pieces = (_reversed(pieces[0], reverse - 1),)
    return written._replace(height=height, width=width, depth=depth, pieces=pieces,
                            numpy_only=True)  # fmt: skip


def _source_piece(piece: Piece, order: tuple[int, int, int]) -> Piece:
    """A piece of the written map addressed by the source's (H, W, C): each destination axis's
    range, size and stride moved to the source axis it comes from. An NHCWB16 piece of whole
    bricks (its C as bricks x 16) splits its source axis the same way, so that reading reshapes
    it back and writing reshapes into it in C order."""
    dest_slices = (piece.ys, piece.xs, piece.cs)
    slices: list[slice] = [slice(0)] * 3
    dims: list[tuple[tuple[int, ...], tuple[int, ...]]] = [((), ())] * 3
    for d, source in enumerate(order):
        slices[source] = dest_slices[d]
        if d < 2:
            dims[source] = ((piece.shape[d],), (piece.strides[d],))
        else:  # the channels: one axis, or bricks x 16
            dims[source] = (tuple(piece.shape[2:]), tuple(piece.strides[2:]))
    shape = tuple(n for sizes, _ in dims for n in sizes)
    strides = tuple(st for _, steps in dims for st in steps)
    return Piece(slices[0], slices[1], slices[2], piece.offset, shape, strides)


def _reversed(piece: Piece, axis: int) -> Piece:
    """The piece with one source axis written last to first."""
    if len(piece.shape) != 3:
        raise UnsupportedError("a reversed OFM in NHCWB16 bricks is not implemented")
    strides = list(piece.strides)
    offset = piece.offset + (piece.shape[axis] - 1) * strides[axis]
    strides[axis] = -strides[axis]
    return piece._replace(offset=offset, strides=tuple(strides))


def kernel_from(regs: Registers) -> Kernel:
    stride, height_m1, width_m1 = regs.required(("KERNEL_STRIDE", "KERNEL_HEIGHT_M1",
                                                  "KERNEL_WIDTH_M1"))  # fmt: skip
    dil_x, dil_y = (stride >> 3 & 1) + 1, (stride >> 4 & 1) + 1
    get = regs.values.get
    return Kernel(
        height=height_m1 // dil_y + 1,
        width=width_m1 // dil_x + 1,
        stride_y=(stride >> 1 & 1 | (stride >> 9 & 1) << 1) + 1,
        stride_x=(stride & 1 | (stride >> 6 & 1) << 1) + 1,
        dilation_y=dil_y,
        dilation_x=dil_x,
        pad_top=get("IFM_PAD_TOP", 0),
        pad_left=get("IFM_PAD_LEFT", 0),
        pad_bottom=get("IFM_PAD_BOTTOM", 0),
        pad_right=get("IFM_PAD_RIGHT", 0),
        upscale=get("IFM_UPSCALE", 0) & 3,
    )


def ofm_scale(regs: Registers) -> tuple[int, int]:
    """OFM_SCALE: (scale, shift)."""
    return regs.get("OFM_SCALE", 0) & 0x7FFFFFFF, regs.cmd1_param("OFM_SCALE") & 0x3F


def rounding(regs: Registers, register: str = "OFM_SCALE", shift: int | None = None) -> int:
    """A scale register's round mode, as outstage numbers it. DOUBLE_SYMMETRIC adds a second
    2^30 only when the shift passes 31 - dbl_rnd (TOSA's double rounding); below, it is
    NATURAL. `shift` None: per-channel shifts, not known when the stream is decoded (with
    dbl_rnd 0, outstage.DOUBLE: TOSA's, channel by channel)."""
    param = regs.cmd1_param(register)
    mode = param >> 13 & (7 if register == "OFM_SCALE" else 1)
    if mode == NATURAL:
        return outstage.NATURAL
    if mode == TRUNCATE_TO_ZERO:
        return outstage.TRUNCATE
    dbl_rnd = param >> 6 & 31
    if mode == DOUBLE_SYMMETRIC and shift is not None and shift <= 31 - dbl_rnd:
        return outstage.NATURAL
    if mode == DOUBLE_SYMMETRIC and shift is None and dbl_rnd == 0:
        return outstage.DOUBLE  # per channel (the convolutions' scale streams): TOSA's
    name = _ROUND_NAMES.get(mode, str(mode))
    if mode == DOUBLE_SYMMETRIC:
        name += " with a shift past 31" if shift is not None else " of per-channel scales"
    raise refuse(regs, f"round mode {name}", register)


def output_finish(regs: Registers, ofm: FeatureMap) -> Finish:
    """Zero point, clip (ACTIVATION_MIN/MAX unless the clip range is NONE) and the table lookup
    ACTIVATION selects in the LUT memory (its table field counts tables of its own size)."""
    value = regs.get("ACTIVATION", 0)
    function, table, no_clip = value & 0x1F, value >> 5 & 7, value >> 12 & 1
    type_lo, type_hi = outstage.limits(ofm.dtype)
    if no_clip:
        lo, hi = type_lo, type_hi
    else:
        raw_lo, raw_hi = regs.get("ACTIVATION_MIN", 0), regs.get("ACTIVATION_MAX", 0xFFFF)
        signed = ofm.signed or ofm.elem_size > 2
        lo = signed16(raw_lo) if signed else raw_lo
        hi = signed16(raw_hi) if signed else raw_hi
    lut: Lut | InterpolatedLut | None = None
    if function == LUT_S8_S8 and ofm.elem_size == 1 and ofm.signed:
        lut = Lut(table * 256, ofm.dtype, -128)
    elif function == LUT_U8_U8 and ofm.elem_size == 1 and not ofm.signed:
        lut = Lut(table * 256, ofm.dtype, 0)
    elif function == LUT_S16_S16 and ofm.elem_size == 2 and ofm.signed:
        # regor's RewriteTable: TOSA's 513-entry int16 TABLE as 512 (base, slope) pairs, the
        # whole 2 KB (table 0), interpolated as on U55 (TABLE then its RESCALE by 1/128)
        lut = InterpolatedLut(table * 2048, ofm.dtype)
    elif function != LUT_NONE:
        raise refuse(regs, f"ACTIVATION function {function} into a {8 * ofm.elem_size}-bit OFM",
                     "ACTIVATION")  # fmt: skip
    return Finish(ofm.zero_point, lo, hi, ofm.dtype, lut)


def block_of(regs: Registers) -> tuple[int, int, int]:
    return (
        regs.get("OFM_BLK_HEIGHT_M1", 0) + 1,
        regs.get("OFM_BLK_WIDTH_M1", 0) + 1,
        regs.get("OFM_BLK_DEPTH_M1", 0) + 1,
    )


def fm_bytes(fm: FeatureMap) -> tuple[int, int]:
    """(region, bytes) of a feature map as a record counts it."""
    return fm.region, fm.height * fm.width * fm.depth * fm.elem_size


def record_fields(regs: Registers, ifm: FeatureMap, ofm: FeatureMap) -> dict:
    """The OpRecord fields every block operation takes from its feature maps and registers."""
    return dict(
        offset=regs.command.offset,
        ofm_shape=ofm.shape,
        ifm_shape=ifm.shape,
        block=block_of(regs),
        ifm_elem_size=ifm.elem_size,
        ofm_elem_size=ofm.elem_size,
        ifm_brick=ifm.brick,
        ofm_brick=ofm.brick,
        activation=regs.get("ACTIVATION", 0) & 0x1F,
        acc_40bit=regs.get("ACC_FORMAT", 0) & 3 == 1,
        registers=regs.values,
    )
