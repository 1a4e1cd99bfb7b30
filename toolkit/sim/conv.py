"""Convolutions and depthwise convolutions (operations.Convolution): acc = bias + sum((ifm - zp)
* w), then the output stage."""

from __future__ import annotations

from collections.abc import Hashable
from typing import NamedTuple

import numpy as np

from . import outstage
from .decoded import DecodedStreams, StreamSlot
from .kernel import TRANSPOSE, Kernel
from .layouts import FeatureMap
from .memory import Memory, check_lut
from .native.batch import Row
from .native.conv import NativeConv, conv_kernel
from .operations import Convolution
from .records import Step


def _accumulate(padded: np.ndarray, k: Kernel, ofm: FeatureMap, w: np.ndarray, depthwise: bool):
    """Exact in float64: |sum| < 2^53 for 16-bit activations, 9-bit weights, any NPU kernel;
    in float32 where the weights allow it (exact_in_float32); depthwise sums also in
    int32 when they stay below 2^31 (NumpyConv.work_dtype)."""
    oh, ow, oc = ofm.shape
    if depthwise:
        w = w.astype(padded.dtype, copy=False)
        acc = np.zeros((oh, ow, oc), padded.dtype)
        product = np.empty_like(acc)
        for (i, j), tap in zip(np.ndindex(k.height, k.width), k.taps(padded, oh, ow)):
            acc += np.multiply(tap[..., :oc], w[i, j], out=product)
        return acc
    unit_steps = (k.stride_y, k.stride_x, k.dilation_y, k.dilation_x) == (1, 1, 1, 1)
    if k.upscale == TRANSPOSE and unit_steps:
        return _accumulate_transposed(padded, k, ofm, w)
    c = padded.shape[-1]
    if k.elements == 1:
        cols = k.tap(padded, 0, 0, oh, ow).reshape(oh * ow, c)
    else:
        cols = np.empty((oh, ow, k.elements, c), padded.dtype)
        for e, tap in enumerate(k.taps(padded, oh, ow)):
            cols[:, :, e] = tap
        cols = cols.reshape(oh * ow, -1)
    return (cols @ w).reshape(oh, ow, oc)


def _accumulate_transposed(padded: np.ndarray, k: Kernel, ofm: FeatureMap, w: np.ndarray):
    """A transposed convolution (IFM_UPSCALE TRANSPOSE: the IFM at the even rows and columns,
    the zero point between, which the adjusted `padded` holds as 0): tap (i, j) meets a real
    IFM element at output (y, x) only when y + i - pad_top and x + j - pad_left are even. Each
    of the four output parities takes its own taps, a quarter of the products, all the others
    being exact zeros."""
    oh, ow, oc = ofm.shape
    c = padded.shape[-1]
    acc = np.zeros((oh, ow, oc), np.result_type(padded.dtype, w.dtype))
    per_tap = w.reshape(k.height, k.width, c, oc)  # rows: tap by tap, channels within
    for a in (0, 1):
        for b in (0, 1):
            rows, cols = len(range(a, oh, 2)), len(range(b, ow, 2))
            ys = [i for i in range(k.height) if (a + i - k.pad_top) % 2 == 0]
            xs = [j for j in range(k.width) if (b + j - k.pad_left) % 2 == 0]
            if not (rows and cols and ys and xs):
                continue
            taps = np.empty((rows, cols, len(ys) * len(xs), c), padded.dtype)
            for e, (i, j) in enumerate((i, j) for i in ys for j in xs):
                y0, x0 = a + i, b + j
                taps[:, :, e] = padded[y0 : y0 + 2 * rows - 1 : 2, x0 : x0 + 2 * cols - 1 : 2]
            weights = per_tap[np.ix_(ys, xs)].reshape(-1, oc)
            acc[a::2, b::2] = (taps.reshape(rows * cols, -1) @ weights).reshape(rows, cols, oc)
    return acc


_FLOAT32_EXACT = 1 << 24  # float32 holds every integer below this exactly


def exact_in_float32(matrix: np.ndarray, ifm_bits: int) -> bool:
    """Whether a convolution's products with these weights ((K, O), one output channel a
    column) are exact in float32: every partial sum of |ifm - zp| * |w| down a column stays
    below 2^24 when |ifm - zp| < 2^ifm_bits (an IFM zero point inside the IFM's type; NumpyConv
    checks that). Then the BLAS product can run in float32, half the bytes of float64."""
    if matrix.size == 0:
        return False
    column_bound = float(np.abs(matrix).sum(axis=0, dtype=np.int64).max())
    return column_bound * ((1 << ifm_bits) - 1) < _FLOAT32_EXACT


class NumpyConv:
    """A planned convolution run through numpy: the reference for the native kernel (native/),
    and what runs where it is not built. Called as the native one is, with the decoded weights
    (int16, as NpuFamily.decode_weights lays them out), bias, rescale and max |bias|."""

    def __init__(self, ifm: FeatureMap, ofm: FeatureMap, k: Kernel, depthwise: bool, finish):
        self.ifm, self.ofm, self.k, self.depthwise, self.finish = ifm, ofm, k, depthwise, finish
        terms = k.elements * (1 if depthwise else ifm.depth)
        self.product_bound = terms << (8 * ifm.elem_size + 9)  # |ifm - zp| * |weight| summed
        # depthwise runs elementwise, where int32 is faster; convolutions are BLAS products, in
        # float32 when the weights are exact so and the IFM zero point inside the IFM's type,
        # as exact_in_float32 assumes
        self.work_dtype = np.int32 if depthwise and self.product_bound < 1 << 31 else np.float64
        type_min, type_max = outstage.limits(ifm.dtype)
        self.zp_in_type = type_min <= ifm.zero_point <= type_max
        self._weights: tuple = (None, None)  # (decoded weights, the matrix this multiplies by)

    def matrix(self, w: np.ndarray) -> np.ndarray:
        """The weights as _accumulate multiplies by them: (K, O) in float32 where the products
        are exact so, else float64; depthwise (KH, KW, O) as decoded. Made once per array."""
        if w is not self._weights[0]:
            if self.depthwise:
                matrix = w
            else:
                columns = w.T
                exact = self.zp_in_type and exact_in_float32(columns, 8 * self.ifm.elem_size)
                matrix = columns.astype(np.float32 if exact else np.float64)
            self._weights = (w, matrix)
        return self._weights[1]

    def __call__(self, mem: Memory, w: np.ndarray, bias, rescale, bias_bound: int) -> None:
        ifm, ofm, k = self.ifm, self.ofm, self.k
        x = k.upscaled(ifm.read(mem), ifm.zero_point, ofm.height, ofm.width)
        matrix = self.matrix(w)
        work = np.float32 if matrix.dtype == np.float32 else self.work_dtype
        padded = k.padded(x, ifm.zero_point, work)
        padded -= ifm.zero_point  # padding reads as the zero point, so it adds nothing
        acc = _accumulate(padded, k, ofm, matrix, self.depthwise).astype(np.int64) + bias
        bound = self.product_bound + bias_bound
        ofm.write(mem, self.finish(rescale.apply(acc, bound), mem))


def prepare_conv(op: Convolution, memory: Memory, decoded: DecodedStreams) -> Step:
    """The planned run of a convolution: its feature maps, table and streams checked against
    memory, its native kernel where one runs it (else NumpyConv)."""
    what, ifm, ofm = op.label, op.ifm, op.ofm
    ifm.check(memory, f"{what} (IFM)")
    ofm.check(memory, f"{what} (OFM)")
    check_lut(op.finish, memory, what)
    engine = conv_kernel(ifm, ofm, op.kernel, op.depthwise, op.finish, op.rounding) or NumpyConv(
        ifm, ofm, op.kernel, op.depthwise, op.finish
    )
    streams = []
    for s in op.streams:
        for at, kind in ((s.weights, "weights"), (s.scales, "scales")):
            memory.check(at.region, at.base, at.base + at.length, f"{what} ({kind})")
        streams.append(
            CoreStreams(
                decoded.slot(*s.weights),
                decoded.slot(*s.scales),
                s.fmt,
                (s.channels, op.rounding, f"{what} (scales)", s.scale_fmt),
            )
        )
    run = ConvRun(engine, decoded, tuple(streams))
    return Step(op.record, run, blas=isinstance(engine, NumpyConv))


class CoreStreams(NamedTuple):
    """Where one core's weight and scale streams are read, and how they decode."""

    weights: StreamSlot
    scales: StreamSlot
    fmt: Hashable  # the family's weight format (NpuFamily.decode_weights)
    # DecodedStreams.scales': channels, rounding, where, the family's scale format
    scale_args: tuple[int, int, str, Hashable]


class ConvRun:
    """A planned convolution's run: each core's weight and scale streams looked up through their
    slots (decoded on first use), their OFM channels interleaved back, then its engine."""

    def __init__(
        self,
        engine: NativeConv | NumpyConv,
        decoded: DecodedStreams,
        streams: tuple[CoreStreams, ...],
    ):
        self.engine, self.decoded, self.streams = engine, decoded, streams
        self._joined: tuple = ((), None)  # (the cores' decoded streams, what they join to)

    def __call__(self, mem: Memory) -> None:
        decoded = self.decoded
        parts = [
            (
                c.weights.get(mem, decoded.weights, c.fmt),
                c.scales.get(mem, decoded.scales, *c.scale_args),
            )
            for c in self.streams
        ]
        w, scales = parts[0] if len(parts) == 1 else self._join(parts)
        self.engine(mem, w, *scales)

    def _join(self, parts: list) -> tuple:
        """The cores' streams as one core's, interleaved again only when one of them changed."""
        seen, flat = self._joined[0], [x for part in parts for x in part]
        if len(seen) != len(flat) or any(a is not b for a, b in zip(flat, seen)):
            self._joined = (flat, _interleaved(parts, self.engine.depthwise))
        return self._joined[1]

    def row(self) -> Row | None:
        """native.batch's Row with the streams of the last run, checked before it runs where
        they lie in memory that operations write (Vela DMAs them in)."""
        if not isinstance(self.engine, NativeConv):
            return None
        made = self.engine.row()
        checks = [slot.check() for c in self.streams for slot in (c.weights, c.scales)]
        if made is None or None in checks:
            return None
        return made._replace(checks=tuple(c for c in checks if c))  # () checks nothing


def _interleaved(parts: list, depthwise: bool) -> tuple:
    """One core's (weights, (bias, rescale, max |bias|)) from each core's, channel c of core k
    becoming OFM channel k + c * cores."""
    cores = len(parts)
    depth = sum(len(bias) for _, (bias, _, _) in parts)
    order = np.argsort(np.concatenate([np.arange(k, depth, cores) for k in range(cores)]))

    def take(arrays, axis=0):
        return np.take(np.concatenate(arrays, axis), order, axis)

    rescales = [rescale for _, (_, rescale, _) in parts]
    rescale = outstage.Rescale(
        take([r.scale for r in rescales]),
        take([r.shift + r.right for r in rescales]),  # the stream's shift (Rescale splits TFL's)
        rescales[0].rounding,
    )
    bias = take([bias for _, (bias, _, _) in parts])
    weights = take([w for w, _ in parts], -1 if depthwise else 0)
    return weights, (bias, rescale, max(bound for _, (_, _, bound) in parts))
