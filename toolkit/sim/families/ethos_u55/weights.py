"""Weights and scales as Ethos-U55/U65 read them.

Scale stream: 10 bytes per OFM channel, bias (40 bits signed), scale (32 bits unsigned),
shift (6 bits). Weight stream: mlw-compressed, in OFM-block / IFM-block / sub-kernel /
u-block order; `stream_order` rebuilds that order so the stream can be put back into the weight
matrix the convolution multiplies by.
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

import numpy as np

from ...errors import PayloadError
from .mlw_decoder import mlw_decode

SUBKERNEL_MAX = 8


class WeightFormat(NamedTuple):
    """Everything the stream order depends on."""

    ofm_depth: int
    kernel_height: int
    kernel_width: int
    ifm_depth: int  # 1 for depthwise
    ofm_block_depth: int
    depthwise: bool
    part_kernel_first: bool
    ifm_bits: int
    dilation_y: int
    dilation_x: int
    ifm_ublock_depth: int
    ofm_ublock_depth: int


def decode_scales(
    raw: np.ndarray, channels: int, where: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(bias int64, scale int64, shift int64), one per channel."""
    if len(raw) < channels * 10:
        raise PayloadError(
            f"{where}: scale stream has {len(raw)} bytes, {channels} channels need {channels * 10}"
        )
    # each record spread over two little-endian int64: the bias in the first's low 5 bytes,
    # the scale and shift in the second's low 5: a few numpy calls per stream, not one per
    # byte (a program's first run decodes them all)
    rec = raw[: channels * 10].reshape(channels, 10)
    wide = np.zeros((channels, 16), np.uint8)
    wide[:, :5], wide[:, 8:13] = rec[:, :5], rec[:, 5:]
    words = wide.view("<i8")
    bias = (words[:, 0] << 24) >> 24  # 40 bits, sign-extended
    scale = words[:, 1] & 0xFFFFFFFF
    shift = (words[:, 1] >> 32) & 0x3F
    return bias, scale, shift


@lru_cache(maxsize=256)
def stream_order(fmt: WeightFormat) -> np.ndarray:
    """For each position of the decoded stream, the index it fills in the flat weight matrix
    (-1: padding). The matrix is (KH, KW, I, O) for a convolution, (KH, KW, O) for depthwise."""
    o_total, depth, ou = fmt.ofm_depth, fmt.ofm_block_depth, fmt.ofm_ublock_depth
    first = None
    blocks = []
    for ofm_z0 in range(0, o_total, depth):
        ofm_block = min(depth, o_total - ofm_z0)
        whole = ofm_block == depth and ofm_z0 + -(-depth // ou) * ou <= o_total
        if whole and first is not None:
            # a whole block is the first block moved by ofm_z0 output channels
            blocks.append(np.where(first >= 0, first + ofm_z0, -1))
            continue
        blocks.append(_block_order(fmt, ofm_z0, ofm_block))
        if whole and ofm_z0 == 0:
            first = blocks[-1]
    return np.concatenate(blocks) if blocks else np.zeros(0, dtype=np.int64)


def _block_order(fmt: WeightFormat, ofm_z0: int, ofm_block: int) -> np.ndarray:
    """stream_order of the OFM block of depth ofm_block at ofm_z0."""
    kh_total, kw_total, i_total = fmt.kernel_height, fmt.kernel_width, fmt.ifm_depth
    decomp_h = SUBKERNEL_MAX // fmt.dilation_y
    decomp_w = SUBKERNEL_MAX // fmt.dilation_x
    ifm_block = 16 if (fmt.part_kernel_first or fmt.ifm_bits == 16) else 32
    ifm_starts = np.arange(0, 1 if fmt.depthwise else i_total, ifm_block)
    subkernels = [
        (sy, sx) for sy in range(0, kh_total, decomp_h) for sx in range(0, kw_total, decomp_w)
    ]
    if len(subkernels) == 1 and not fmt.part_kernel_first:
        # every IFM block has the same depth: all of them at once, IFM block outermost
        return _piece(fmt, ofm_z0, ofm_block, ifm_starts, ifm_block, 0, 0)
    pieces = []
    for ifm_z0 in ifm_starts:
        ifm_depth_here = min(ifm_block, i_total - ifm_z0) if fmt.part_kernel_first else ifm_block
        for sy, sx in subkernels:
            pieces.append(_piece(fmt, ofm_z0, ofm_block, ifm_z0[None], ifm_depth_here, sy, sx))
    return np.concatenate(pieces)


def _piece(
    fmt: WeightFormat,
    ofm_z0: int,
    ofm_block: int,
    ifm_z0: np.ndarray,
    ifm_depth_here: int,
    sy: int,
    sx: int,
) -> np.ndarray:
    """stream_order of one sub-kernel of one OFM block, for IFM blocks starting at ifm_z0."""
    o_total, kh_total, kw_total = fmt.ofm_depth, fmt.kernel_height, fmt.kernel_width
    iu, ou = fmt.ifm_ublock_depth, fmt.ofm_ublock_depth
    sub_h = min(kh_total - sy, SUBKERNEL_MAX // fmt.dilation_y)
    sub_w = min(kw_total - sx, SUBKERNEL_MAX // fmt.dilation_x)
    elements = sub_h * sub_w
    if fmt.part_kernel_first:
        align = 2 if fmt.ifm_bits == 16 else 4
        elements = -(-elements // align) * align
    elif fmt.depthwise:
        elements = -(-elements // 4) * 4
        ifm_depth_here = iu
    outer = ifm_depth_here if fmt.part_kernel_first else 1
    inner = 1 if fmt.part_kernel_first else ifm_depth_here
    ifm_u = 1 if fmt.depthwise else iu
    # Loop nest, outermost first: IFM block, ifm u-block (part-kernel), ofm u-block, kernel
    # element, ifm u-block (depth-first), ofm in u-block, ifm in u-block.
    z = ifm_z0[:, None, None, None, None, None, None]
    a = np.arange(0, outer, iu)[None, :, None, None, None, None, None]
    b = np.arange(0, ofm_block, ou)[None, None, :, None, None, None, None]
    e = np.arange(elements)[None, None, None, :, None, None, None]
    d = np.arange(0, inner, iu)[None, None, None, None, :, None, None]
    oz = np.arange(ou)[None, None, None, None, None, :, None]
    iz = np.arange(ifm_u)[None, None, None, None, None, None, :]
    ky, kx = e // sub_w, e % sub_w
    ifm_z = z + a + d + iz
    ofm_z = ofm_z0 + b + oz
    wy, wx = sy + ky, sx + kx
    if fmt.depthwise:
        valid = (ifm_z < 1) & (ofm_z < o_total) & (ky < sub_h)
        flat = (wy * kw_total + wx) * o_total + ofm_z
    else:
        i_total = fmt.ifm_depth
        valid = (ifm_z < i_total) & (ofm_z < o_total) & (ky < sub_h)
        flat = ((wy * kw_total + wx) * i_total + ifm_z) * o_total + ofm_z
    shape = np.broadcast_shapes(flat.shape, valid.shape)
    return np.where(np.broadcast_to(valid, shape), np.broadcast_to(flat, shape), -1).reshape(-1)


@lru_cache(maxsize=256)
def _matrix_index(fmt: WeightFormat) -> tuple[np.ndarray, np.ndarray]:
    """(stream positions that hold a weight, where each goes in the flat weight matrix)."""
    order = stream_order(fmt)
    positions = np.flatnonzero(order >= 0)
    return positions, order[positions]


def matrix_shape(fmt: WeightFormat) -> tuple[int, ...]:
    """The shape decode_matrix gives for a format."""
    kh, kw, o = fmt.kernel_height, fmt.kernel_width, fmt.ofm_depth
    return (kh, kw, o) if fmt.depthwise else (o, kh * kw * fmt.ifm_depth)


def decode_matrix(stream: bytes, fmt: WeightFormat) -> np.ndarray:
    """The weights one stream holds, as int16 (the NPU's weights are 9-bit) laid out as the
    convolution kernels read them: (O, KH * KW * I), each output channel's weights contiguous,
    or (KH, KW, O) for depthwise."""
    values = mlw_decode(stream)
    needed = len(stream_order(fmt))
    if len(values) < needed:
        raise PayloadError(
            f"weight stream decodes to {len(values)} weights, the operation needs {needed}"
        )
    positions, target = _matrix_index(fmt)
    kh, kw, o = fmt.kernel_height, fmt.kernel_width, fmt.ofm_depth
    out = np.zeros(kh * kw * o * (1 if fmt.depthwise else fmt.ifm_depth), np.int16)
    out[target] = values[positions]
    if fmt.depthwise:
        return out.reshape(kh, kw, o)
    return np.ascontiguousarray(out.reshape(kh * kw * fmt.ifm_depth, o).T)


def forget_formats() -> None:
    """Drop the stream orders computed so far (a fresh start, for benchmarks)."""
    stream_order.cache_clear()
    _matrix_index.cache_clear()
