"""NPU_OP_CONV and NPU_OP_DEPTHWISE: acc = bias + sum((ifm - zp) * w), then the output stage."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from . import outstage
from .activation import output_finish
from .decoded import DecodedStreams, StreamSlot
from .errors import UnsupportedError, at
from .families import accelerator as architecture
from .kernel import NEAREST, NO_UPSCALE, TRANSPOSE, Kernel, kernel_from
from .layouts import FeatureMap, ifm_map, ofm_map
from .memory import Memory
from .native.batch import Row
from .native.conv import NativeConv, conv_kernel
from .records import OpRecord, Step, feature_map_fields
from .registers import Registers
from .weights import WeightFormat, exact_in_float32, ublock_depths


def check_common(regs: Registers, upscales: tuple[int, ...] = (NO_UPSCALE,)) -> None:
    """Modes the output stage and IFM fetch do not implement stop here, never silently (the
    activation's: activation.output_finish). `upscales`: the IFM_UPSCALE modes the operation
    implements."""
    op = regs.command
    upscale = regs.get("IFM_UPSCALE", 0) & 3  # PARALLEL_MODE: plan._prepare checks it
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


def _accumulate(padded: np.ndarray, k: Kernel, ofm: FeatureMap, w: np.ndarray, depthwise: bool):
    """Exact in float64: |sum| < 2^53 for 16-bit activations, 9-bit weights, any NPU kernel;
    in float32 where the weights allow it (weights.exact_in_float32); depthwise sums also in
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


class NumpyConv:
    """A planned convolution run through numpy: the reference for the native kernel (native/),
    and what runs where it is not built. Called as the native one is, with the decoded weights
    (int16, as weights.decode_matrix lays them out), bias, rescale and max |bias|."""

    def __init__(self, ifm: FeatureMap, ofm: FeatureMap, k: Kernel, depthwise: bool, finish):
        self.ifm, self.ofm, self.k, self.depthwise, self.finish = ifm, ofm, k, depthwise, finish
        terms = k.elements * (1 if depthwise else ifm.depth)
        self.product_bound = terms << (8 * ifm.elem_size + 9)  # |ifm - zp| * |weight| summed
        # depthwise runs elementwise, where int32 is faster; convolutions are BLAS products, in
        # float32 when the weights are exact so and the IFM zero point inside the IFM's type,
        # as weights.exact_in_float32 assumes
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


# per core: its weight and scale streams (core 1's in WEIGHT1_*, SCALE1_*; one region for both)
_STREAMS = tuple(
    (f"WEIGHT{n}_BASE", f"WEIGHT{n}_LENGTH", f"SCALE{n}_BASE", f"SCALE{n}_LENGTH")
    for n in ("", "1")
)


def prepare_conv(
    regs: Registers, memory: Memory, accelerator: str, depthwise: bool, decoded: DecodedStreams
) -> Step:
    check_common(regs, (NO_UPSCALE, NEAREST, TRANSPOSE))
    op = regs.command
    what = f"{op.name} at command-stream offset {op.offset:#x}"
    ofm = ofm_map(regs)
    if regs.get("OFM_PRECISION") & (1 << 8):
        precision = regs.get("OFM_PRECISION")
        raise UnsupportedError(
            f"global scale on a convolution is not implemented (in "
            f"{at(op.offset, 'NPU_SET_OFM_PRECISION', precision)})"
        )
    k = kernel_from(regs)
    ifm_h, ifm_w = k.ifm_extent(ofm.height, ofm.width)
    ifm_depth = regs.get("IFM_DEPTH_M1") + 1
    ifm = ifm_map(regs, ifm_h, ifm_w, ifm_depth)
    if depthwise and ifm_depth < ofm.depth:
        raise UnsupportedError(
            f"{what}: depthwise with IFM depth {ifm_depth} < OFM depth "
            f"{ofm.depth} is not implemented"
        )
    ifm.check(memory, f"{what} (IFM)")
    ofm.check(memory, f"{what} (OFM)")
    w_region, s_region = (r & 7 for r in regs.required(("WEIGHT_REGION", "SCALE_REGION")))
    iu, ou = ublock_depths(accelerator)
    fmt = WeightFormat(
        ofm_depth=ofm.depth,
        kernel_height=k.height,
        kernel_width=k.width,
        ifm_depth=1 if depthwise else ifm_depth,
        ofm_block_depth=regs.get("OFM_BLK_DEPTH_M1") + 1,
        depthwise=depthwise,
        part_kernel_first=k.part_kernel_first and not depthwise,
        ifm_bits=8 * ifm.elem_size,
        dilation_y=k.dilation_y,
        dilation_x=k.dilation_x,
        ifm_ublock_depth=iu,
        ofm_ublock_depth=ou,
    )
    rounding = regs.get("OFM_PRECISION") >> 14
    finish = output_finish(regs, ofm, memory)
    engine = conv_kernel(ifm, ofm, k, depthwise, finish, rounding) or NumpyConv(
        ifm, ofm, k, depthwise, finish
    )
    # Core c computes OFM channels c, c + cores, ... (Vela's core_deinterleave), its stream
    # encoded for its share of each OFM block; a core with no channel has no stream.
    cores = architecture(accelerator).cores
    streams, stream_bytes = [], []
    for core in range(min(cores, ofm.depth, fmt.ofm_block_depth)):
        w_base, w_len, s_base, s_len = regs.required(_STREAMS[core])
        memory.check(w_region, w_base, w_base + w_len, f"{what} (weights)")
        memory.check(s_region, s_base, s_base + s_len, f"{what} (scales)")
        channels = len(range(core, ofm.depth, cores))
        block = -(-(fmt.ofm_block_depth - core) // cores)
        streams.append(
            CoreStreams(
                decoded.slot(w_region, w_base, w_len),
                decoded.slot(s_region, s_base, s_len),
                fmt._replace(ofm_depth=channels, ofm_block_depth=block),
                (channels, rounding, f"{what} (scales)"),
            )
        )
        stream_bytes += [w_len, s_len]
    run = ConvRun(engine, decoded, tuple(streams))
    macs = ofm.height * ofm.width * ofm.depth * k.elements * (1 if depthwise else ifm_depth)
    record = OpRecord(
        kind="depthwise" if depthwise else "conv",
        offset=op.offset,
        macs=int(macs),
        bytes_read=(
            (ifm.region, ifm_h * ifm_w * ifm_depth * ifm.elem_size),
            (w_region, sum(stream_bytes[::2])),
            (s_region, sum(stream_bytes[1::2])),
        ),
        bytes_written=((ofm.region, ofm.height * ofm.width * ofm.depth * ofm.elem_size),),
        kernel=(k.height, k.width, k.stride_y, k.stride_x, k.dilation_y, k.dilation_x),
        **feature_map_fields(regs, ifm, ofm),
        acc_40bit=regs.get("ACC_FORMAT", 0) == 1,
        part_kernel_first=fmt.part_kernel_first,
        registers=regs.values,
    )
    return Step(record, run, blas=isinstance(engine, NumpyConv))


class CoreStreams(NamedTuple):
    """Where one core's weight and scale streams are read, and how they decode."""

    weights: StreamSlot
    scales: StreamSlot
    fmt: WeightFormat
    scale_args: tuple[int, int, str]  # DecodedStreams.scales': channels, rounding, where


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
