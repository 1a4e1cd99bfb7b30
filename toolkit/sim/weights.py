"""Weights and scales as the NPU reads them.

Scale stream: 10 bytes per OFM channel, bias (40 bits signed), scale (32 bits unsigned),
shift (6 bits). Weight stream: mlw-compressed, in OFM-block / IFM-block / sub-kernel /
u-block order; `stream_order` rebuilds that order so the stream can be put back into OHWI.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from ethosu import mlw_codec

from .errors import PayloadError

SUBKERNEL_MAX = 8


@dataclass(frozen=True)
class WeightFormat:
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


def ublock_depths(accelerator: str) -> tuple[int, int]:
    """(IFM, OFM) u-block depths of an accelerator configuration."""
    return (8, 4) if accelerator == "ethos-u55-32" else (8, 8)


def decode_scales(raw: np.ndarray, channels: int,
                  where: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(bias int64, scale int64, shift int64), one per channel."""
    if len(raw) < channels * 10:
        raise PayloadError(f"{where}: scale stream has {len(raw)} bytes, {channels} channels "
                           f"need {channels * 10}")
    rec = raw[: channels * 10].reshape(channels, 10).astype(np.int64)
    bias = np.zeros(channels, dtype=np.int64)
    for i in range(5):
        bias |= rec[:, i] << (8 * i)
    bias = np.where(bias >= 1 << 39, bias - (1 << 40), bias)
    scale = rec[:, 5] | rec[:, 6] << 8 | rec[:, 7] << 16 | rec[:, 8] << 24
    shift = rec[:, 9] & 0x3F
    return bias, scale, shift


@lru_cache(maxsize=256)
def stream_order(fmt: WeightFormat) -> np.ndarray:
    """For each position of the decoded stream, the flat OHWI index it holds (-1: padding)."""
    o_total, kh_total, kw_total = fmt.ofm_depth, fmt.kernel_height, fmt.kernel_width
    i_total = fmt.ifm_depth
    iu, ou = fmt.ifm_ublock_depth, fmt.ofm_ublock_depth
    decomp_h = SUBKERNEL_MAX // fmt.dilation_y
    decomp_w = SUBKERNEL_MAX // fmt.dilation_x
    ifm_block = 16 if (fmt.part_kernel_first or fmt.ifm_bits == 16) else 32
    pieces = []
    for ofm_z0 in range(0, o_total, fmt.ofm_block_depth):
        ofm_block = min(fmt.ofm_block_depth, o_total - ofm_z0)
        for ifm_z0 in range(0, 1 if fmt.depthwise else i_total, ifm_block):
            if fmt.depthwise:
                ifm_depth_here = iu
            elif fmt.part_kernel_first:
                ifm_depth_here = min(ifm_block, i_total - ifm_z0)
            else:
                ifm_depth_here = ifm_block
            for sy in range(0, kh_total, decomp_h):
                sub_h = min(kh_total - sy, decomp_h)
                for sx in range(0, kw_total, decomp_w):
                    sub_w = min(kw_total - sx, decomp_w)
                    elements = sub_h * sub_w
                    if fmt.part_kernel_first:
                        align = 2 if fmt.ifm_bits == 16 else 4
                        elements = -(-elements // align) * align
                    elif fmt.depthwise:
                        elements = -(-elements // 4) * 4
                    outer = ifm_depth_here if fmt.part_kernel_first else 1
                    inner = 1 if fmt.part_kernel_first else ifm_depth_here
                    ifm_u = 1 if fmt.depthwise else iu
                    # Loop nest, outermost first: ifm u-block (part-kernel), ofm u-block,
                    # kernel element, ifm u-block (depth-first), ofm in u-block, ifm in u-block.
                    a = np.arange(0, outer, iu)[:, None, None, None, None, None]
                    b = np.arange(0, ofm_block, ou)[None, :, None, None, None, None]
                    e = np.arange(elements)[None, None, :, None, None, None]
                    d = np.arange(0, inner, iu)[None, None, None, :, None, None]
                    oz = np.arange(ou)[None, None, None, None, :, None]
                    iz = np.arange(ifm_u)[None, None, None, None, None, :]
                    ky, kx = e // sub_w, e % sub_w
                    ifm_z = ifm_z0 + a + d + iz
                    ofm_z = ofm_z0 + b + oz
                    wy, wx = sy + ky, sx + kx
                    i_dim = 1 if fmt.depthwise else i_total
                    ifm_idx = np.zeros_like(ifm_z) if fmt.depthwise else ifm_z
                    valid = (ifm_z < i_dim) & (ofm_z < o_total) & (ky < sub_h)
                    flat = ((ofm_z * kh_total + wy) * kw_total + wx) * i_dim + ifm_idx
                    shape = np.broadcast_shapes(flat.shape, valid.shape)
                    pieces.append(np.where(valid, flat, -1).reshape(-1) if flat.shape == shape
                                  else np.where(np.broadcast_to(valid, shape),
                                                np.broadcast_to(flat, shape), -1).reshape(-1))
    return np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.int64)


@lru_cache(maxsize=256)
def _matrix_index(fmt: WeightFormat) -> tuple[np.ndarray, np.ndarray]:
    """(stream positions that hold a weight, where each goes in the flat matrix layout)."""
    order = stream_order(fmt)
    positions = np.flatnonzero(order >= 0)
    o, kh, kw = fmt.ofm_depth, fmt.kernel_height, fmt.kernel_width
    i_dim = 1 if fmt.depthwise else fmt.ifm_depth
    ohwi = np.unravel_index(order[positions], (o, kh, kw, i_dim))
    if fmt.depthwise:  # (KH, KW, O)
        target = np.ravel_multi_index((ohwi[1], ohwi[2], ohwi[0]), (kh, kw, o))
    else:  # (KH * KW * I, O)
        target = np.ravel_multi_index((ohwi[1], ohwi[2], ohwi[3], ohwi[0]), (kh, kw, i_dim, o))
    return positions, target


def decode_matrix(stream: bytes, fmt: WeightFormat) -> np.ndarray:
    """The weights one stream holds, as float64 laid out for the convolution's matrix product:
    (KH * KW * I, O), or (KH, KW, O) for depthwise."""
    try:
        values = np.asarray(mlw_codec.decode(bytearray(stream)), dtype=np.float64)
    except Exception as exc:  # the codec raises plain ValueError/RuntimeError on bad input
        raise PayloadError(f"weight stream of {len(stream)} bytes does not decode: {exc}") from None
    needed = len(stream_order(fmt))
    if len(values) < needed:
        raise PayloadError(f"weight stream decodes to {len(values)} weights, the operation "
                           f"needs {needed}")
    positions, target = _matrix_index(fmt)
    kh, kw, o = fmt.kernel_height, fmt.kernel_width, fmt.ofm_depth
    shape = (kh, kw, o) if fmt.depthwise else (kh * kw * fmt.ifm_depth, o)
    out = np.zeros(kh * kw * o * (1 if fmt.depthwise else fmt.ifm_depth))
    out[target] = values[positions]
    return out.reshape(shape)


def forget_formats() -> None:
    """Drop the stream orders computed so far (a fresh start, for benchmarks)."""
    stream_order.cache_clear()
    _matrix_index.cache_clear()
