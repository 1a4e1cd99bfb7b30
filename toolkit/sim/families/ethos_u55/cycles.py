"""Our Ethos-U55/U65 cycle model: computed from what each executed operation does (its record),
never from Vela's numbers.

The structure follows the hardware as Vela's documented estimator (npu_performance.py) describes
it. The MAC array works through an OFM block as u-blocks, one kernel step (IFM depth slice) at a
time, never faster than the weight decoder feeds it; the output stage (AO) scales, activates and
writes each block element; the two pipeline against each other block by block, after the first
IFM block arrives and until the last OFM block is written. Memory traffic (IFM re-fetched per
OFM block, weights and scales per OFM block column, OFM once), at the burst efficiency its layout
allows, costs bytes / bandwidth per memory; the operation takes the longest of compute and each
memory. Only geometry, block configuration, data widths, strides, the activation the ACTIVATION
register selects and byte counts enter: zero points, clip bounds and scales cannot change cycles.
Each operation has two figures, as Vela's: compute (NPU cycles) and total (compute or memory).
"""

from __future__ import annotations

import math
from typing import NamedTuple

from ...memory import INTERNAL
from ...memory_system import MemoryPort, MemorySystem
from ...records import OpRecord
from ..accelerator_config import IFM_UBLOCK_DEPTH, Accelerator
from ..family import OpTiming

SUBKERNEL_MAX = 8
_ADD_SUB = frozenset({"elementwise.add", "elementwise.sub"})
SCALE_RECORD_BYTES = 10  # bias, scale and shift per OFM channel


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


class _Geometry(NamedTuple):
    """An operation's OFM block, u-block and IFM block."""

    block: tuple[int, int, int]  # OFM block clipped to the OFM
    ublock: tuple[int, int, int]
    blocks: float  # OFM blocks, partial edge blocks counted by the u-blocks they hold
    xy_blocks: int  # OFM block columns (weights are fetched again for each)
    ifm_block: tuple[int, int, int]

    @property
    def ublocks(self) -> tuple[int, int, int]:
        (bh, bw, bc), (uh, uw, uc) = self.block, self.ublock
        return _ceil(bh, uh), _ceil(bw, uw), _ceil(bc, uc)


def _geometry(rec: OpRecord, accelerator: Accelerator) -> _Geometry:
    oh, ow, oc = rec.ofm_shape
    kh, kw, sy, sx, dy, dx = rec.kernel
    block = (min(rec.block[0], oh), min(rec.block[1], ow), min(rec.block[2], oc))
    ublock = accelerator.ublock
    if ublock[0] == 2 and rec.kind == "conv" and oh == 1 and ow % 2 == 0 and kh == 1:
        ublock = (1, 4, ublock[2])  # a 2x2 u-block array works as 1x4 on single-row outputs
        block = (1, block[1], block[2])
    total = math.prod(_ceil(s, u) for s, u in zip((oh, ow, oc), ublock))
    per_block = math.prod(_ceil(b, u) for b, u in zip(block, ublock))
    ih, iw, ic = rec.ifm_shape
    ifm_block = (
        min(ih, (block[0] - 1) * sy + min(SUBKERNEL_MAX, (kh - 1) * dy + 1)),
        min(iw, (block[1] - 1) * sx + min(SUBKERNEL_MAX, (kw - 1) * dx + 1)),
        min(ic, _ifm_block_depth(rec) if rec.kind == "conv" else block[2]),
    )
    return _Geometry(
        block, ublock, total / per_block, _ceil(oh, block[0]) * _ceil(ow, block[1]), ifm_block
    )


def _ifm_block_depth(rec: OpRecord) -> int:
    """An IFM block is 16 channels deep for 16-bit IFMs (32 for 8-bit): each kernel step takes
    the same cycles, so a 16x8 conv over a deep IFM makes twice the passes, half the 8x8 MAC
    rate, as Vela prices it (tests/quantize/test_a16w8.py pins a 64-channel conv within 5% of Vela)."""
    deepest = 16 if (rec.part_kernel_first or rec.ifm_elem_size > 1) else 32
    return min(deepest, _ceil(rec.ifm_depth, IFM_UBLOCK_DEPTH) * IFM_UBLOCK_DEPTH)


def _subkernels(rec: OpRecord) -> list[int]:
    kh, kw = rec.kernel[:2]
    return [
        min(SUBKERNEL_MAX, kh - y) * min(SUBKERNEL_MAX, kw - x)
        for y in range(0, kh, SUBKERNEL_MAX)
        for x in range(0, kw, SUBKERNEL_MAX)
    ]


def _mac_cycles_per_block(rec: OpRecord, geo: _Geometry, accelerator: Accelerator) -> int:
    ub_y, ub_x, ub_z = geo.ublocks
    ub_xy = ub_y * ub_x
    ifm_bits = 8 * rec.ifm_elem_size
    weight_feed = 4 * geo.ublock[2]  # the weight decoder delivers 32 bits per OFM channel per cycle
    cycles = 0
    for elements in _subkernels(rec):
        if rec.kind.startswith("pool"):
            steps = 1
            work = max(4, elements) * ub_xy * ub_z
            # Vela's legacy estimator doubles only 16-bit pools; Vela 5.1's C++ estimator books
            # ~4x for 8-bit pools beyond U55-32 (checked: maxpool/avgpool land within 10% of it
            # only with this factor). Unverified against hardware; it inflates 1x1 transposes.
            work *= ifm_bits // 2 if accelerator.pool_rate_by_width else 1
        elif rec.kind == "depthwise":
            steps = _ceil(elements, 4)
            work = max(weight_feed, 4 * ub_xy * ifm_bits // 8) * steps * ub_z
        elif rec.part_kernel_first:
            steps = _ceil(elements, 2 if ifm_bits == 16 else 4)
            work = max(weight_feed, 4 * ub_xy) * steps * ub_z * _ceil(geo.ifm_block[2], 8)
        else:
            steps = elements
            work = max(weight_feed, 4 * ub_xy) * steps * ub_z
        cycles += work + _pipeline_stalls(rec, geo, accelerator, steps)
    if rec.kind == "conv":
        cycles *= _ceil(rec.ifm_depth, geo.ifm_block[2])  # one pass per IFM depth slice
    # cores share each OFM block's channels: its MAC work, stalls included, divides between them
    # (Vela's cycles_dpu_blk /= ncores; their output stages are in the Accelerator's tables)
    return _ceil(cycles, accelerator.cores)


def _pipeline_stalls(rec: OpRecord, geo: _Geometry, accelerator: Accelerator, steps: int) -> int:
    """With a single u-block in x/y, the MAC pipeline cannot hide its accumulate latency."""
    ub_y, ub_x, ub_z = geo.ublocks
    delay = accelerator.accumulate_delay[1 if rec.acc_40bit else 0]
    stalls = 0
    if ub_y * ub_x == 1:
        if ub_z == 1:
            stalls = delay * steps
        elif steps > 1:
            stalls = delay * (steps - 1) * ub_z
    if accelerator.narrow_block_40bit_stall and rec.acc_40bit and ub_z > 1 and 1 in (ub_y, ub_x):
        stalls += delay * ub_z
    if rec.part_kernel_first:
        stalls *= _ceil(geo.ifm_block[2], 8)
    return stalls


def _activation_cost(rec: OpRecord, accelerator: Accelerator, override: float | None) -> float:
    """Cycles per element of the activation the ACTIVATION register selects (clip: none)."""
    if override is not None:
        return override
    return accelerator.activation_cycles[0] if rec.activation != 0 else 0.0


def output_cycles_per_element(
    rec: OpRecord, accelerator: Accelerator, activation_cost: float | None = None
) -> float:
    """Output stage by accumulator and operation, or the activation unit if that is slower.
    `activation_cost` replaces what the ACTIVATION register selects (for what-if comparisons)."""
    acc32, acc40, maxpool = accelerator.output_cycles
    per_elem = acc40 if rec.acc_40bit else (maxpool if rec.kind == "pool.max" else acc32)
    activation_cost = _activation_cost(rec, accelerator, activation_cost)
    return max(per_elem, activation_cost)


def _burst_efficiency(port: MemoryPort, run_bytes: int) -> float:
    """Fraction of each burst that carries data, for contiguous runs of `run_bytes`."""
    return min(port.burst, max(1, run_bytes)) / port.burst


def _ifm_run(rec: OpRecord, geo: _Geometry) -> int:
    """Contiguous bytes per IFM block fetch. The NPU fetches whole block-depth granules, so rows
    are contiguous only when the block depth is exactly the IFM depth."""
    e, bw = rec.ifm_elem_size, geo.ifm_block[1]
    if rec.ifm_brick:
        return 16 * e * bw
    depth = _ifm_block_depth(rec) if rec.kind == "conv" else rec.block[2]
    return bw * depth * e if depth == rec.ifm_depth else depth * e


def _ofm_run(rec: OpRecord, geo: _Geometry) -> int:
    e, bw, depth = rec.ofm_elem_size, geo.block[1], rec.block[2]
    if rec.ofm_brick:
        return 16 * e * bw
    if depth <= 16 and depth == rec.ofm_shape[2]:
        return bw * depth * e
    return min(16 * e, depth * e)  # the output stage writes at most 16 elements per burst


def _block_transfer(rec: OpRecord, geo: _Geometry, memory: MemorySystem) -> tuple[float, float]:
    """Cycles to fetch the first IFM block and to write the last OFM block."""
    ifm_port, ofm_port = memory.port(rec.bytes_read[0][0]), memory.port(rec.bytes_written[0][0])
    ifm_bytes = math.prod(geo.ifm_block) * rec.ifm_elem_size
    ofm_bytes = math.prod(geo.block) * rec.ofm_elem_size
    return (
        ifm_port.read_latency
        + ifm_bytes / _burst_efficiency(ifm_port, _ifm_run(rec, geo)) / ifm_port.bytes_per_cycle,
        ofm_port.write_latency
        + ofm_bytes / _burst_efficiency(ofm_port, _ofm_run(rec, geo)) / ofm_port.bytes_per_cycle,
    )


def _stages(
    rec: OpRecord,
    geo: _Geometry,
    accelerator: Accelerator,
    memory: MemorySystem,
    activation_cost: float | None,
) -> tuple[float, float]:
    """Cycles per OFM block of the MAC array and of the output stage."""
    mac = _mac_cycles_per_block(rec, geo, accelerator)
    out: float = math.ceil(
        output_cycles_per_element(rec, accelerator, activation_cost) * math.prod(geo.block)
    )
    if rec.kind in ("conv", "depthwise"):
        # Bias/scale records stream in per block at the latency of their memory.
        latency = memory.port(rec.bytes_read[2][0]).read_latency
        out = max(out, SCALE_RECORD_BYTES * geo.block[2] * latency / 256)
    return mac, out


def _compute_cycles(
    rec: OpRecord,
    geo: _Geometry,
    accelerator: Accelerator,
    memory: MemorySystem,
    activation_cost: float | None,
) -> float:
    mac, out = _stages(rec, geo, accelerator, memory, activation_cost)
    first_in, last_out = _block_transfer(rec, geo, memory)
    return max(mac, out) * geo.blocks + min(mac, out) + first_in + last_out


def pipeline_ends(
    rec: OpRecord, accelerator: Accelerator, memory: MemorySystem
) -> tuple[float, float]:
    """(fill, drain) that an operation's compute figure includes: the first IFM block's fetch
    and the pipeline's first step; its last step and the last OFM block's write. An
    elementwise operation streams through the output stage alone: its fetch and write."""
    geo = _geometry(rec, accelerator)
    first_in, last_out = _block_transfer(rec, geo, memory)
    if rec.kind.startswith("elementwise"):
        return first_in, last_out
    step = min(_stages(rec, geo, accelerator, memory, None))
    return first_in + step, step + last_out


def _traffic_cycles(rec: OpRecord, geo: _Geometry, memory: MemorySystem) -> float:
    """The busiest memory's cycles for everything the operation reads and writes."""
    ih, iw, ic = rec.ifm_shape
    fetches = geo.xy_blocks * len(_subkernels(rec))
    if rec.kind == "conv":
        fetches *= _ceil(rec.ofm_shape[2], geo.block[2])  # IFM again for every OFM depth slice
    ifm_h, ifm_w, _ = geo.ifm_block
    ifm_bytes = fetches * ifm_h * ifm_w * ic * rec.ifm_elem_size
    per_port: dict[str, float] = {}

    def add(region: int, nbytes: float, run: int | None = None) -> None:
        port = memory.port(region)
        eff = 1.0 if run is None else _burst_efficiency(port, run)
        per_port[port.name] = per_port.get(port.name, 0.0) + nbytes / eff / port.bytes_per_cycle

    add(rec.bytes_read[0][0], ifm_bytes, _ifm_run(rec, geo))
    for region, nbytes in rec.bytes_read[1:]:  # weights and scales, per OFM block column
        add(region, nbytes * geo.xy_blocks)
    for region, nbytes in rec.bytes_written:
        add(region, nbytes, _ofm_run(rec, geo))
    return max(per_port.values())


def _dma_cycles(rec: OpRecord, memory: MemorySystem) -> float:
    """The slower side of the copy; a DMA into the SHRAM (a lookup table) costs its read."""
    (src, n), (dst, _) = rec.bytes_read[0], rec.bytes_written[0]
    src_port = memory.port(src)
    cycles = n / src_port.bytes_per_cycle + src_port.read_latency
    if dst != INTERNAL:
        dst_port = memory.port(dst)
        cycles = max(cycles, n / dst_port.bytes_per_cycle + dst_port.write_latency)
    return cycles


def _elementwise_cycles(
    rec: OpRecord, accelerator: Accelerator, memory: MemorySystem, activation_cost: float | None
) -> tuple[float, float]:
    """The output stage streams every OFM element; the operands are read once, the OFM written
    once, each at its memory's bandwidth. (compute, total)"""
    add16, add32, mul, wide, other = accelerator.elementwise_cycles
    per_elem = (
        wide
        if rec.ifm_elem_size == 4
        else mul
        if rec.kind == "elementwise.mul"
        else (add32 if rec.operand_scale_32bit else add16)
        if rec.kind in _ADD_SUB
        else other
    )
    activation_cost = _activation_cost(rec, accelerator, activation_cost)
    first_in, last_out = _block_transfer(rec, _geometry(rec, accelerator), memory)
    compute = max(per_elem, activation_cost) * math.prod(rec.ofm_shape) + first_in + last_out
    per_port: dict[str, float] = {}
    for region, nbytes in (*rec.bytes_read, *rec.bytes_written):
        port = memory.port(region)
        per_port[port.name] = per_port.get(port.name, 0.0) + nbytes / port.bytes_per_cycle
    return compute, max(compute, *per_port.values())


def op_timing(
    rec: OpRecord,
    accelerator: Accelerator,
    memory: MemorySystem,
    activation_cost: float | None = None,
) -> OpTiming:
    if rec.kind == "dma":
        # memory traffic only, as in Vela's split: how many bytes a weight stream takes (how
        # well the weights compress) must not change the NPU figure
        return OpTiming(0, int(_dma_cycles(rec, memory)))
    if rec.kind.startswith("elementwise"):
        compute, total = _elementwise_cycles(rec, accelerator, memory, activation_cost)
    else:
        geo = _geometry(rec, accelerator)
        compute = _compute_cycles(rec, geo, accelerator, memory, activation_cost)
        total = max(compute, _traffic_cycles(rec, geo, memory))
    return OpTiming(int(compute), int(total))
