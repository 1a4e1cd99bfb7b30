"""Ethos-U85 weights and scales as an operation's registers describe them, decoded.

A convolution or depthwise operation reads its weights from one stream per MAC core
(WEIGHT_BASE/LENGTH, WEIGHT1_*, WEIGHT2_*, WEIGHT3_*: 1, 1, 2, 4, 4 cores on the 128 to 2048-MAC
configurations), or from one fast-format stream whatever the cores (WEIGHT_FORMAT bit 0), and its
per-channel bias and rescale from one scale stream (SCALE_BASE/LENGTH). The codecs are in
u85_codec.py; this module puts the decoded values back where they belong, following the order
Vela 5.2.0's encoder writes them in (regor, ethos_u85_weight_encoder.cpp,
EthosU85WeightOrdering::GetNext and EthosU85WeightOrderingFwd::Get):

    OFM blocks (OFM_BLK_DEPTH), IFM blocks (forwards, then backwards for the next OFM block),
    sub-kernels of at most 8x8 (column outermost), IFM u-blocks, OFM u-blocks, stride phases
    (part-kernel-first and depthwise only), kernel rows, kernel columns (every other row right to
    left), then per kernel element the IFM u-block in steps of 8 (16 when 2:4 sparse), the
    core's groups of 4 OFM channels (core k takes channels 4k..4k+3 of every 4 x cores), 4 OFM
    channels, the step's IFM channels.

Part-kernel-first pads each sub-kernel's elements to a multiple of 5 (8-bit IFM) or 10 (16-bit
IFM or sparse); depthwise pads to 10 and, on larger configurations, adds 2 or 6 empty elements
after every 10. Padding and channels past the tensor's are zeros. A fast-format stream holds the
cores' orders interleaved, a u-block's worth at a time.

Scale stream: one 10-byte record per OFM channel, padded to a multiple of 16 channels. With 32-bit
accumulators (ACC_FORMAT 0): bias int32 (bytes 0-3), scale uint31 (4-7), shift uint6 (8); with
48-bit accumulators (ACC_FORMAT 1): bias int48 (bytes 0-5), scale uint15 (6-7), shift uint6 (8).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np

from ..errors import PayloadError, UnsupportedError
from .u85_codec import decode_fast, decode_standard

__all__ = [
    "ScaleRecords",
    "WeightLayout",
    "decode_scales",
    "decode_weights",
    "scale_stream",
    "stream_orders",
    "weight_layout",
    "weight_streams",
]

SCALE_RECORD_BYTES = 10
_INTERLEAVE = 4  # OFM channels a core takes at a time
_SUBKERNEL_MAX = 8
_MICROBLOCKS = {0: (1, 1), 1: (1, 2), 2: (1, 4), 3: (2, 2), 4: (2, 4), 5: (4, 4)}
# MACs -> (cores, OFM u-block depth by u-block height and width): regor's s_EthosU85Configs
_CONFIGS: dict[int, tuple[int, dict[tuple[int, int], int]]] = {
    128: (1, {(1, 2): 8, (1, 1): 16}),
    256: (1, {(1, 2): 16, (1, 4): 8, (2, 2): 8}),
    512: (2, {(2, 2): 16, (1, 4): 16}),
    1024: (4, {(2, 2): 32, (1, 4): 32, (2, 4): 16}),
    2048: (4, {(2, 2): 64, (1, 4): 64, (4, 4): 16}),
}
_IFM_BITS = {0: 8, 1: 16, 2: 32, 3: 64}
_WEIGHT_STREAMS = ("WEIGHT", "WEIGHT1", "WEIGHT2", "WEIGHT3")


class WeightLayout(NamedTuple):
    """What the order of an operation's weight streams depends on."""

    ofm_depth: int
    kernel_height: int
    kernel_width: int
    ifm_depth: int  # 1 for depthwise
    traversal: str  # "depth_first", "part_kernel" or "depthwise"
    stride: tuple[int, int]  # (y, x) of the kernel
    dilation: tuple[int, int]  # (y, x)
    ofm_block_depth: int
    ifm_block_depth: int
    ofm_ublock_depth: int
    ifm_bits: int
    sparse: bool  # 2:4 sparse weights (WEIGHT_FORMAT bit 4)
    fast: bool  # fast weight format (WEIGHT_FORMAT bit 0)
    cores: int
    macs: int

    @property
    def streams(self) -> int:
        """Weight streams the registers name: one per core, one for the fast format."""
        return 1 if self.fast else self.cores

    @property
    def ifm_ublock_depth(self) -> int:
        if self.traversal == "depthwise":
            return 1
        if self.traversal == "part_kernel" and self.ifm_bits == 16 and not self.sparse:
            return 8
        return self.ifm_block_depth

    @property
    def subkernel_round(self) -> int:
        if self.traversal == "depthwise":
            return 10
        if self.traversal == "part_kernel":
            return 10 if (self.ifm_bits == 16 or self.sparse) else 5
        return 1

    @property
    def depthwise_padding(self) -> int:
        """Empty kernel elements after every 10 of a depthwise kernel."""
        if self.ifm_bits != 16 and self.macs <= 256:
            return 0
        return 2 if self.macs <= 512 else 6

    @property
    def shape(self) -> tuple[int, int, int, int]:
        """(O, KH, KW, I): how decode_weights returns the weights."""
        return (self.ofm_depth, self.kernel_height, self.kernel_width, self.ifm_depth)


class ScaleRecords(NamedTuple):
    """One entry per OFM channel."""

    bias: np.ndarray  # int64
    scale: np.ndarray  # int64
    shift: np.ndarray  # int64


def _macs(accelerator: str) -> int:
    try:
        macs = int(accelerator.rsplit("-", 1)[1])
    except (IndexError, ValueError):
        macs = 0
    if not accelerator.startswith("ethos-u85-") or macs not in _CONFIGS:
        raise UnsupportedError(f"'{accelerator}' is no Ethos-U85 configuration")
    return macs


def _ifm_block_depth(traversal: str, ifm_bits: int, macs: int, ublock: int, sparse: bool) -> int:
    """regor's ArchEthosU85::FindBlockConfig: the fixed IFM block depth of a convolution."""
    if traversal == "part_kernel":
        return 16
    if ifm_bits == 32 or (macs in (128, 256) and ublock == 16 and not sparse):
        return 32
    if sparse and ifm_bits == 8:
        return 128
    return 64


def weight_layout(registers: Mapping[str, int], operation: str, accelerator: str) -> WeightLayout:
    """The layout of a convolution's or depthwise operation's weights, from its registers
    (names as commands.operation_registers gives them: "KERNEL_STRIDE", ...)."""
    macs = _macs(accelerator)
    cores, ublocks = _CONFIGS[macs]
    if operation not in ("NPU_OP_CONV", "NPU_OP_DEPTHWISE"):
        raise UnsupportedError(f"{operation} reads no weight stream")

    def reg(name: str) -> int:
        try:
            return registers[name]
        except KeyError:
            raise PayloadError(f"{operation} runs before NPU_SET_{name} was set") from None

    stride_reg = reg("KERNEL_STRIDE")
    stride = (
        ((stride_reg >> 1) & 1 | ((stride_reg >> 9) & 1) << 1) + 1,
        ((stride_reg >> 0) & 1 | ((stride_reg >> 6) & 1) << 1) + 1,
    )
    dilation = (((stride_reg >> 4) & 1) + 1, ((stride_reg >> 3) & 1) + 1)
    depthwise = operation == "NPU_OP_DEPTHWISE"
    traversal = (
        "depthwise" if depthwise else "part_kernel" if stride_reg >> 2 & 1 else "depth_first"
    )
    microblock = _MICROBLOCKS.get(reg("ACC_FORMAT") >> 8 & 7)
    ublock = ublocks.get(microblock) if microblock else None
    if ublock is None:
        raise PayloadError(
            f"{operation}: ACC_FORMAT {reg('ACC_FORMAT'):#x} names a u-block {accelerator} lacks"
        )
    ifm_bits = _IFM_BITS[reg("IFM_PRECISION") >> 2 & 3]
    weight_format = reg("WEIGHT_FORMAT")
    sparse = bool(weight_format >> 4 & 1)
    return WeightLayout(
        ofm_depth=reg("OFM_DEPTH_M1") + 1,
        kernel_height=reg("KERNEL_HEIGHT_M1") // dilation[0] + 1,
        kernel_width=reg("KERNEL_WIDTH_M1") // dilation[1] + 1,
        ifm_depth=1 if depthwise else reg("IFM_DEPTH_M1") + 1,
        traversal=traversal,
        stride=stride,
        dilation=dilation,
        ofm_block_depth=reg("OFM_BLK_DEPTH_M1") + 1,
        ifm_block_depth=_ifm_block_depth(traversal, ifm_bits, macs, ublock, sparse),
        ofm_ublock_depth=ublock,
        ifm_bits=ifm_bits,
        sparse=sparse,
        fast=bool(weight_format & 1),
        cores=cores,
        macs=macs,
    )


def _address(registers: Mapping[str, int], name: str) -> int:
    """A 40-bit address register: bits 32-39 ride in the command's parameter field."""
    return registers.get(name, 0) | (registers.get(name + ".param", 0) & 0xFF) << 32


def weight_streams(
    registers: Mapping[str, int], layout: WeightLayout
) -> list[tuple[str, int, int]]:
    """(name, base, length) of each weight stream the operation reads, in WEIGHT_REGION."""
    return [
        (name, _address(registers, name + "_BASE"), registers.get(name + "_LENGTH", 0))
        for name in _WEIGHT_STREAMS[: layout.streams]
    ]


def scale_stream(registers: Mapping[str, int]) -> tuple[int, int]:
    """(base, length) of the scale stream, in SCALE_REGION."""
    return _address(registers, "SCALE_BASE"), registers.get("SCALE_LENGTH", 0)


# --- stream order -------------------------------------------------------------------------------


def _elements(layout: WeightLayout, sy: int, sx: int, sub_h: int, sub_w: int) -> np.ndarray:
    """(ky, kx) of a sub-kernel's elements in stream order: stride phases, then rows, every
    other row right to left."""
    step_y, step_x = (1, 1) if layout.traversal == "depth_first" else layout.stride
    order = []
    for phase_y in range(step_y):
        rows = (sub_h + step_y - 1 - phase_y) // step_y
        for phase_x in range(step_x):
            columns = (sub_w + step_x - 1 - phase_x) // step_x
            for ky in range(rows):
                for kx in range(columns):
                    x = kx if ky % 2 == 0 else columns - 1 - kx
                    order.append((sy + phase_y + ky * step_y, sx + phase_x + x * step_x))
    return np.array(order, np.int64).reshape(-1, 2)


def _element_channels(
    layout: WeightLayout, stream: int, ifm_start: int, ofm_start: int
) -> tuple[np.ndarray, np.ndarray]:
    """(ifm, ofm) channel of each weight one kernel element gives a stream, in order."""
    step = 1 if layout.traversal == "depthwise" else 16 if layout.sparse else 8
    ifm_u, ofm_u = layout.ifm_ublock_depth, layout.ofm_ublock_depth
    inner = np.arange(0, ifm_u, step)[:, None, None, None]
    group = np.arange(stream * _INTERLEAVE, ofm_u, _INTERLEAVE * layout.cores)[None, :, None, None]
    lane = np.arange(_INTERLEAVE)[None, None, :, None]
    ifm_lane = np.arange(step)[None, None, None, :]
    shape = (len(inner), group.shape[1], _INTERLEAVE, step)
    ifm = np.broadcast_to(ifm_start + inner + ifm_lane, shape).reshape(-1)
    ofm = np.broadcast_to(ofm_start + group + lane, shape).reshape(-1)
    return ifm, ofm


def _piece(
    layout: WeightLayout, stream: int, elements: np.ndarray, ifm_start: int, ofm_start: int
) -> np.ndarray:
    """Flat (O, KH, KW, I) indices of one OFM u-block's pass over a sub-kernel (-1: padding)."""
    _, kh, kw, i_total = layout.shape
    ifm, ofm = _element_channels(layout, stream, ifm_start, ofm_start)
    valid = (ifm < i_total) & (ofm < layout.ofm_depth)
    base = np.where(valid, (ofm * kh * kw) * i_total + ifm, -1)
    offsets = (elements[:, 0] * kw + elements[:, 1]) * i_total
    rows = np.where(valid[None, :], base[None, :] + offsets[:, None], -1)
    count = len(rows)
    rounded = -(-count // layout.subkernel_round) * layout.subkernel_round
    rows = np.concatenate([rows, np.full((rounded - count, rows.shape[1]), -1)])
    if layout.traversal == "depthwise" and layout.depthwise_padding:
        groups = rows.reshape(rounded // 10, 10, -1)
        empty = np.full((groups.shape[0], layout.depthwise_padding, rows.shape[1]), -1)
        rows = np.concatenate([groups, empty], axis=1)
    return rows.reshape(-1)


def _single_order(layout: WeightLayout, stream: int) -> np.ndarray:
    """The order of one core's stream (EthosU85WeightOrdering::GetNext)."""
    o_total, kh, kw, i_total = layout.shape
    decomp_y, decomp_x = _SUBKERNEL_MAX // layout.dilation[0], _SUBKERNEL_MAX // layout.dilation[1]
    ifm_blocks = list(
        range(0, 1 if layout.traversal == "depthwise" else i_total, layout.ifm_block_depth)
    )
    subkernels = [
        (sy, sx, min(kh - sy, decomp_y), min(kw - sx, decomp_x))
        for sx in range(0, kw, decomp_x)
        for sy in range(0, kh, decomp_y)
    ]
    elements = {s: _elements(layout, *s) for s in subkernels}
    pieces = []
    for n, ofm_block in enumerate(range(0, o_total, layout.ofm_block_depth)):
        ofm_depth = min(layout.ofm_block_depth, o_total - ofm_block)
        for ifm_block in ifm_blocks if n % 2 == 0 else ifm_blocks[::-1]:
            ifm_depth = (
                1
                if layout.traversal == "depthwise"
                else min(layout.ifm_block_depth, i_total - ifm_block)
            )
            for s in subkernels:
                for ifm_u in range(0, ifm_depth, layout.ifm_ublock_depth):
                    for ofm_u in range(0, ofm_depth, layout.ofm_ublock_depth):
                        pieces.append(
                            _piece(
                                layout, stream, elements[s], ifm_block + ifm_u, ofm_block + ofm_u
                            )
                        )
    return np.concatenate(pieces) if pieces else np.zeros(0, np.int64)


def stream_orders(layout: WeightLayout) -> tuple[np.ndarray, ...]:
    """Per weight stream, the flat (O, KH, KW, I) index each decoded value fills (-1: padding).
    A fast-format stream interleaves the cores' orders a block at a time
    (EthosU85WeightOrderingFwd)."""
    orders = [_single_order(layout, core) for core in range(layout.cores)]
    if not layout.fast or layout.cores == 1:
        return tuple(orders) if not layout.fast else (orders[0],)
    block = (
        layout.ofm_ublock_depth * layout.ifm_ublock_depth * layout.subkernel_round // layout.cores
    )
    stacked = np.stack([order.reshape(-1, block) for order in orders], axis=1)
    return (stacked.reshape(-1),)


# --- decoding -----------------------------------------------------------------------------------


def decode_weights(streams: Sequence[tuple[str, bytes]], layout: WeightLayout) -> np.ndarray:
    """The weights of an operation, (O, KH, KW, I) int16 (I = 1 for depthwise), from its
    weight streams (name, bytes) as weight_streams lists them."""
    orders = stream_orders(layout)
    if len(streams) != len(orders):
        raise PayloadError(
            f"{len(streams)} weight streams given, the operation reads {len(orders)}"
        )
    out = np.zeros(int(np.prod(layout.shape)), np.int16)
    for (name, data), order in zip(streams, orders, strict=True):
        if layout.fast:
            values = decode_fast(data, name, len(order))
        else:
            values = decode_standard(data, name, len(order))
            if len(values) != len(order):
                raise PayloadError(
                    f"{name}: weight stream decodes to {len(values)} weights, the operation "
                    f"reads {len(order)}"
                )
        valid = order >= 0
        out[order[valid]] = values[valid]
    return out.reshape(layout.shape)


def decode_scales(
    raw: bytes, channels: int, acc48: bool, name: str = "scale stream"
) -> ScaleRecords:
    """Bias, scale and shift of `channels` OFM channels; acc48: the records of an operation
    with 48-bit accumulators (ACC_FORMAT bits 0-1 = 1)."""
    needed = channels * SCALE_RECORD_BYTES
    if len(raw) < needed:
        raise PayloadError(
            f"{name}: {len(raw)} bytes, {channels} channels need {needed} "
            f"({SCALE_RECORD_BYTES} per channel)"
        )
    records = np.frombuffer(raw[:needed], np.uint8).reshape(channels, SCALE_RECORD_BYTES)
    wide = np.zeros((channels, 16), np.uint8)
    bias_bytes, scale_bytes = (6, 2) if acc48 else (4, 4)
    wide[:, :bias_bytes] = records[:, :bias_bytes]
    wide[:, 8 : 8 + scale_bytes] = records[:, bias_bytes : bias_bytes + scale_bytes]
    words = wide.view("<i8")
    bias = (words[:, 0] << (64 - 8 * bias_bytes)) >> (64 - 8 * bias_bytes)
    scale = words[:, 1] & ((1 << (8 * scale_bytes - 1)) - 1)
    shift = records[:, 8].astype(np.int64) & 0x3F
    return ScaleRecords(bias, scale, shift)
