"""Pooling (operations.Pooling): max, average and reduce-sum (the 1x1 average pools Vela uses for
transposes, and for LUT activations whose table lookup the output stage does: activation.py).

A padded average pool (Pooling.divide) divides each sum by the number of its taps inside the IFM
(TOSA AVG_POOL2D, TFLite's SAME padding): Vela 5.1 leaves OFM_SCALE at 1, shift 0 for it (regor's
RescalePooling puts 1/N into the scale only without padding), so the division is the NPU's. It is
TOSA's: the reciprocal_scale multiplier and shift of the count, rounded once (divide_by_count);
the OFM scale then applies as on any pool."""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

import numpy as np

from . import outstage
from .decoded import DecodedStreams
from .errors import UnsupportedError
from .kernel import NO_UPSCALE
from .layouts import FeatureMap
from .memory import MEMORY_REGIONS, Memory, check_lut
from .native.copy import NativeCopy, copy_kernel
from .native.pool import pool_kernel
from .operations import Pooling
from .records import Step

_EMPTY = np.iinfo(np.int64).min // 4  # below any IFM value: padding never wins a max


_SAME = np.zeros(0)  # a byte table that gives back what it reads


@lru_cache(maxsize=256)
def _byte_table(
    dtype: np.dtype, zp: int, rescale: outstage.Rescale | None, bound: int, finish: tuple
) -> np.ndarray:
    """What a 1x1 pool writes for each of the 256 IFM byte values: the run's own arithmetic on
    all of them at once (most are the transposes Vela builds from pools, which copy).
    finish: (zero point, lo, hi, OFM dtype) of the output stage, without a LUT."""
    raw = np.arange(256, dtype=np.uint8)
    acc = raw.view(dtype).astype(np.int64) - zp
    if rescale is not None:
        acc = rescale.apply(acc, bound)
    table = outstage.Finish(*finish)(acc)
    return _SAME if table.dtype == dtype and np.array_equal(table, raw.view(dtype)) else table


class ByteMap(NamedTuple):
    """A 1x1 unpadded pool of 8-bit IFM values, no LUT: the OFM is table[IFM byte] over the
    IFM's first `depth` channels (table _SAME: a copy)."""

    ifm: FeatureMap
    ofm: FeatureMap
    table: np.ndarray
    depth: int

    def copy_run(self, memory: Memory) -> NativeCopy | None:
        """This operation alone as a native strided copy (copy.c reads everything before it
        writes, as the pool does), where merged_run gives one: a transpose needs no output
        stage, only a copy."""
        run = self.merged_run(1, 1, 1, memory)
        return run if isinstance(run, NativeCopy) else None

    def merged_run(self, count: int, ifm_step: int, ofm_step: int, memory: Memory):
        """One run for `count` operations like this one, the k-th with its IFM and OFM at
        k * ifm_step and k * ofm_step bytes further (BASE0 only), or None when merging could
        change what they write: only single-tile NHWC maps, bytes in bounds, and no
        operation's OFM overlapping another's or any IFM of the run, or else each operation's
        IFM and OFM within its own step of bytes (then reading all IFMs first and writing all
        OFMs after is what running them in turn does; numpy copies an overlapping IFM first)."""
        ifm, ofm = self.ifm, self.ofm
        if len(ifm.pieces) != 1 or len(ofm.pieces) != 1 or ifm.brick or ofm.brick:
            return None
        if ifm_step <= 0 or ofm_step <= 0:
            return None
        if not self._reach_last_bytes(count, ifm_step, ofm_step, memory):
            return None  # planned one by one: the failing operation is named
        if not self._merge_is_exact(count, ifm_step, ofm_step, memory):
            return None
        return self._run(count, ifm_step, ofm_step)

    def _views(self, count: int, ifm_step: int, ofm_step: int) -> tuple[tuple, tuple, tuple, tuple]:
        """(shape, byte strides) of the run's IFM and of its OFM, operation k at index k."""
        (src,), (dst,) = self.ifm.pieces, self.ofm.pieces
        return (
            (count, *src.shape[:2], self.depth),
            (ifm_step, *src.strides),
            (count, *dst.shape),
            (ofm_step, *dst.strides),
        )

    def _reach_last_bytes(self, count: int, ifm_step: int, ofm_step: int, memory: Memory) -> bool:
        """Whether the last operation's IFM and then OFM end inside their regions (each that
        does is counted in the region's extent)."""
        (src,), (dst,) = self.ifm.pieces, self.ofm.pieces
        for region, hi in (
            (self.ifm.region, src.byte_range(self.ifm.elem_size)[1] + (count - 1) * ifm_step),
            (self.ofm.region, dst.byte_range(self.ofm.elem_size)[1] + (count - 1) * ofm_step),
        ):
            if region not in memory.regions or hi > len(memory.regions[region]):
                return False
            memory.reach(region, hi)
        return True

    def _merge_is_exact(self, count: int, ifm_step: int, ofm_step: int, memory: Memory) -> bool:
        """Whether reading all IFMs before writing any OFM writes what running the operations
        in turn does (merged_run says when)."""
        ifm, ofm = self.ifm, self.ofm
        (src,), (dst,) = ifm.pieces, ofm.pieces
        src_lo, src_hi = src.byte_range(ifm.elem_size)
        dst_lo, dst_hi = dst.byte_range(ofm.elem_size)
        ofms_apart = ofm_step >= dst_hi - dst_lo
        # IFM and OFM in one memory (one region, or two that alias): Vela's transposes on
        # Ethos-U65 read the fast scratch and write the scratch, which share no byte
        shared = memory.regions[ifm.region] is memory.regions[ofm.region]
        # each operation's IFM and OFM inside its own step of bytes (Vela's in-place
        # transposes): no operation touches another's bytes
        own_slots = (
            shared
            and ifm_step == ofm_step
            and max(src_hi, dst_hi) - min(src_lo, dst_lo) <= ifm_step
        )
        src_hi += (count - 1) * ifm_step
        dst_hi += (count - 1) * ofm_step
        shape_in, strides_in, shape_out, strides_out = self._views(count, ifm_step, ofm_step)
        ranges_apart = not shared or not (src_lo < dst_hi and dst_lo < src_hi)
        apart = ranges_apart and (
            ofms_apart or _each_byte_once(shape_out, strides_out, ofm.elem_size)
        )
        read = (src.offset, shape_in, strides_in, ifm.elem_size) if shared else None
        return (
            apart
            or own_slots
            or _disjoint(read, (dst.offset, shape_out, strides_out, ofm.elem_size))
        )

    def _run(self, count: int, ifm_step: int, ofm_step: int):
        """The merged run: copy.c's native strided copy where it has one, else numpy's."""
        ifm, ofm, table = self.ifm, self.ofm, self.table
        (src,), (dst,) = ifm.pieces, ofm.pieces
        shape_in, strides_in, shape_out, strides_out = self._views(count, ifm_step, ofm_step)
        if shape_in == shape_out and ofm.elem_size == 1:
            native = copy_kernel(
                (ifm.region, src.offset, strides_in),
                (ofm.region, dst.offset, strides_out),
                shape_in,
                1,
                None if table is _SAME else table,
            )
            if native is not None:
                return native

        def run(mem: Memory) -> None:
            x: np.ndarray = np.ndarray(
                shape_in, ifm.dtype, mem.regions[ifm.region], src.offset, strides_in
            )
            out: np.ndarray = np.ndarray(
                shape_out, ofm.dtype, mem.regions[ofm.region], dst.offset, strides_out
            )
            out[...] = x if table is _SAME else table[x.view(np.uint8)]

        return run


_MAX_CHECKED_BYTES = 1 << 20


def _each_byte_once(shape: tuple, strides: tuple, elem_size: int) -> bool:
    """Whether no two elements of a strided array share a byte, shown from its strides alone:
    with its axes in order of stride, each stride reaches past every byte that the axes before
    it cover (as digits of a number). True covers Vela's interleaved transposes; False may
    still be so (then _disjoint lists the bytes)."""
    covered = elem_size  # bytes from the array's start that the axes taken so far reach
    for stride, n in sorted((s, n) for s, n in zip(strides, shape) if n > 1):
        if stride < covered:
            return False
        covered += (n - 1) * stride
    return True


def _addresses(offset: int, shape: tuple, strides: tuple, elem_size: int) -> np.ndarray:
    """Every byte address a strided array covers (its elements' elem_size bytes each)."""
    addresses = np.full((), offset, np.int64)
    for n, stride in zip((*shape, elem_size), (*strides, 1)):
        addresses = np.add.outer(addresses, np.arange(n, dtype=np.int64) * stride)
    return addresses.reshape(-1)


def _disjoint(read: tuple | None, written: tuple) -> bool:
    """Whether a run that reads the bytes of `read` (None: in another memory) and writes those
    of `written` (each (offset, shape, strides, element size)) writes no byte twice and none
    that it reads: then reading all first and writing all after is running its operations in
    turn. Vela's transposes interleave their OFMs (each writes every k-th byte of one span),
    which the byte ranges alone would refuse. False for runs of more than a MiB (not
    checked)."""
    maps = [m for m in (read, written) if m is not None]
    if max(int(np.prod(shape)) * size for _, shape, _, size in maps) > _MAX_CHECKED_BYTES:
        return False
    out = _addresses(*written)
    unique = np.unique(out)
    if len(unique) != len(out):
        return False
    return read is None or not np.isin(_addresses(*read), unique).any()


def reciprocal(count: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """TOSA's reciprocal_scale of each count >= 1: multiplier in [2^30, 2^31) and shift."""
    k = np.ceil(np.log2(count)).astype(np.int64)  # exact for the counts of a window (<= 2^16)
    return (((1 << 30) + 1) << k) // count, 30 + k


def divide_by_count(acc: np.ndarray, count: np.ndarray, bound: int = 1 << 31) -> np.ndarray:
    """acc / count rounded as TOSA's apply_scale_32 of reciprocal(count); count broadcasts.
    |acc| <= bound: past int64's reach (32-bit IFMs), in Python ints."""
    multiplier, shift = reciprocal(np.maximum(count, 1))
    if bound << 31 >= 1 << 62:
        acc, multiplier, shift = (np.asarray(a).astype(object) for a in (acc, multiplier, shift))
    out = (acc * multiplier + (1 << (shift - 1))) >> shift
    return out.astype(np.int64)


def forget_tables() -> None:
    """Drop the output stages built so far (a fresh start, for benchmarks)."""
    outstage.shared_rescale.cache_clear()
    _byte_table.cache_clear()


def prepare_pool(op: Pooling, memory: Memory, decoded: DecodedStreams | None = None) -> Step:
    """The planned run of a pool: its feature maps and table checked against memory; a 1x1
    unpadded pool of bytes as a table of its 256 outputs (ByteMap, which plan.py merges into
    runs), else its native kernel where one runs it (else numpy)."""
    what, ifm, ofm, k, mode = op.label, op.ifm, op.ofm, op.kernel, op.mode
    ifm.check(memory, f"{what} (IFM)")
    ofm.check(memory, f"{what} (OFM)")
    check_lut(op.finish, memory, what)
    if op.scales is not None:
        assert decoded is not None, "a pool scaled per channel reads its scale stream"
        return Step(op.record, _channel_scaled_pool(op, memory, decoded))
    depth, rescale, finish = op.depth, op.rescale, op.finish
    padded = (k.pad_top, k.pad_left, k.pad_bottom, k.pad_right) != (0, 0, 0, 0)
    terms = k.elements * (depth if mode == "reduce_sum" else 1)
    bound = terms << (8 * ifm.elem_size)  # |ifm - zp| summed
    plain = (
        k.elements == 1
        and not padded
        and (k.stride_y, k.stride_x) == (1, 1)
        and mode != "reduce_sum"
        and k.upscale == NO_UPSCALE
    )
    table = (
        _byte_table(
            ifm.dtype,
            ifm.zero_point,
            rescale,
            bound,
            (finish.zero_point, finish.lo, finish.hi, finish.dtype),
        )
        if plain and ifm.elem_size == 1 and finish.lut is None and ofm.region < MEMORY_REGIONS
        else None
    )
    native = pool_kernel(ifm, ofm, k, mode, depth, rescale, bound, finish, op.divide)
    run = _numpy_pool(op, bound, plain, table)
    byte_map = None if table is None else ByteMap(ifm, ofm, table, depth)
    return Step(op.record, run if native is None else native, byte_map)


def _channel_scaled_pool(op: Pooling, memory: Memory, decoded: DecodedStreams):
    """A 1x1 unpadded pool scaled per channel: acc = IFM - zp + bias, rescaled channel by
    channel with the scale stream's scales (Ethos-U85's NONE pools, a RESCALE per channel)."""
    ifm, ofm, k, finish, s = op.ifm, op.ofm, op.kernel, op.finish, op.scales
    assert s is not None
    if op.mode != "average" or op.divide or k.elements != 1 or k.upscale != NO_UPSCALE:
        raise UnsupportedError(f"{op.label}: a per-channel scale on a pool other than 1x1 SUM")
    memory.check(s.scales.region, s.scales.base, s.scales.base + s.scales.length, op.label)
    slot = decoded.slot(*s.scales)
    args = (s.channels, op.rounding, f"{op.label} (scales)", s.scale_fmt)
    ifm_bound = 1 << (8 * ifm.elem_size)

    def run(mem: Memory) -> None:
        bias, rescale, bias_bound = slot.get(mem, decoded.scales, *args)
        acc = ifm.read(mem)[..., : op.depth].astype(np.int64) - ifm.zero_point + bias
        ofm.write(mem, finish(rescale.apply(acc, ifm_bound + bias_bound), mem))

    return run


def _numpy_pool(op: Pooling, bound: int, plain: bool, table: np.ndarray | None):
    """The pool's run through numpy, where the native kernel does not run."""
    ifm, ofm, k, mode, depth = op.ifm, op.ofm, op.kernel, op.mode, op.depth
    rescale, finish, divide, zp = op.rescale, op.finish, op.divide, ifm.zero_point
    oh, ow = ofm.height, ofm.width

    def run(mem: Memory) -> None:
        x = k.upscaled(ifm.read(mem)[..., :depth], zp, oh, ow)
        if table is not None:  # the output is a function of one IFM byte
            ofm.write(mem, x if table is _SAME else table[x.view(np.uint8)])
            return
        if plain:  # 1x1, unpadded: the transposes and copies Vela builds from pools
            acc = x.astype(np.int64)
            acc -= zp
        elif mode == "max":
            taps = k.taps(k.padded(x, _EMPTY, np.int64), oh, ow)
            acc = next(taps).copy()
            for tap in taps:
                np.maximum(acc, tap, out=acc)
            acc -= zp
        else:
            pad = k.padded(x, zp, np.int64)
            pad -= zp  # padding reads as the zero point, so it adds nothing
            taps = k.taps(pad, oh, ow)
            acc = next(taps).copy()
            for tap in taps:
                acc += tap
            if mode == "reduce_sum":
                acc = acc.sum(axis=-1, keepdims=True)
            if divide:
                ones = k.padded(np.ones((*x.shape[:2], 1), np.int64), 0, np.int64)
                acc = divide_by_count(acc, sum(k.taps(ones, oh, ow)), bound)
        if rescale is not None:
            acc = rescale.apply(acc, bound)
        ofm.write(mem, finish(acc, mem))

    return run
