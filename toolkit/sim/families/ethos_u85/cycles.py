"""Ethos-U85 cycles per operation, built as Vela 5.2.0's U85 performance model computes them
(regor, architecture/ethosu85/ethos_u85_performance.cpp: EstimateMacCyclesPerBlock,
EstimateMacOpCycles, EstimateElementwiseCycles, MinimumIfmCycles/OfmCycles, MemToMemCycles;
read for the method, written here from the operation's registers), with the configuration's
figures (configurations.py) and the memory system of the Vela ini (memory_system.py).

- MAC operations (convolution, depthwise, pooling): per OFM block, per 8x8 sub-kernel, the MAC
  array's steps over the block's u-blocks (its IFM depth in steps of 8 for depth-first
  convolutions; kernel elements in fours for depthwise and part-kernel-first; pools at
  IFM bits / 2 per u-block), bounded below by the weight decoder's rate, plus the accumulate
  delay of a one-u-block block; convolutions repeat it per IFM block (depth 16, 32, 64 or 128).
  The output stage takes its cycles per element (8/16/32-bit OFM, 32-bit into a chaining buffer,
  an activation or transpose beside it); the command issue limit is a quarter of a block's
  memory, MAC and output work; the slower of MAC and output paces the blocks.
- Elementwise and resize: the output stage per element (the resize unit's: regor's resizeLow
  or resizeHigh by IFM width, high when both upscale ratios reach MACs / 512), or the command
  issue limit if slower.
- MatMul (kind "matmul"): a depth-first convolution over the IFM depth, as regor times it.
- Feature maps in a chaining buffer cost no memory time and move no bytes: a chained operation
  neither writes its OFM nor reads its IFM from memory (Vela: NeedsAllocation).
- Memory: each operation's bytes per region at the ini's bandwidth; the operation takes the
  longest of its compute and each memory's access time (OpTiming.total). DMAs: the slower of
  their read and their write, each with its latency.

These cycles are simulated, not checked against an FVP (no U85 PMU figure is known here).
"""

from __future__ import annotations

from math import ceil
from typing import NamedTuple

from ...memory import INTERNAL, MEMORY_REGIONS
from ...memory_system import MemorySystem
from ...records import OpRecord
from ..accelerator_config import Accelerator
from ..family import OpTiming
from .configurations import FIGURES, U85Figures
from .fields import STORAGE_CHAINED

_MICROBLOCKS = {0: (1, 1), 1: (1, 2), 2: (1, 4), 3: (2, 2), 4: (2, 4), 5: (4, 4)}
_OUTPUT_INDEX = {1: 0, 2: 1, 4: 2, 8: 3}
_CHAINED_32BIT = 4
_CONV_KINDS = ("conv", "matmul")  # what works through the IFM depth in IFM blocks


def _chained(record: OpRecord, name: str) -> bool:
    return record.register(f"{name}_PRECISION") >> 14 & 3 == STORAGE_CHAINED


def ublock(record: OpRecord, figures: U85Figures) -> tuple[int, int, int]:
    """The OFM u-block ACC_FORMAT's microblock selects on this configuration."""
    h, w = _MICROBLOCKS.get(record.register("ACC_FORMAT") >> 8 & 7, (1, 1))
    for uh, uw, uc in figures.ublocks:
        if (uh, uw) == (h, w):
            return uh, uw, uc
    return figures.ublocks[0]


def _ifm_block_depth(record: OpRecord, figures: U85Figures, ub_depth: int) -> int:
    """regor's FindBlockConfig: the IFM block depth, which no register holds."""
    if record.part_kernel_first:
        return 16
    if record.ifm_elem_size == 4:
        return 32
    sparse = record.register("WEIGHT_FORMAT") >> 4 & 1
    if sparse and record.ifm_elem_size == 1:
        return 128
    if figures.macs <= 256 and ub_depth == 16:
        return 32
    return 64


def _streamed(record: OpRecord) -> bool:
    """Whether the operation streams its IFM through the output stage, without the MACs."""
    return record.kind.startswith("elementwise") or record.kind == "resize"


def resize_cycles_per_element(record: OpRecord, figures: U85Figures) -> float:
    """regor's GetOutputCyclesPerElement for a resize: the high rate when the smaller of the
    rounded upscale ratios (OFM + IFM / 2) / IFM of width and height reaches MACs / 512."""
    (ih, iw, _), (oh, ow, _) = record.ifm_shape, record.ofm_shape
    ratio = min((ow + iw // 2) // iw, (oh + ih // 2) // ih)
    rates = figures.resize_high if ratio >= figures.macs // 512 else figures.resize_low
    return rates[0 if record.ifm_elem_size == 1 else 1]


def output_cycles_per_element(record: OpRecord, accelerator: Accelerator) -> float:
    """The output stage's cycles per OFM element, an activation or transpose beside it."""
    figures = FIGURES[accelerator.name]
    size = record.ofm_elem_size
    index = _OUTPUT_INDEX.get(size, 3)
    if _chained(record, "OFM") and size == 4:
        index = _CHAINED_32BIT
    cycles = figures.output_cycles[index]
    if record.kind == "resize":
        cycles = resize_cycles_per_element(record, figures)
    precision = record.register("OFM_PRECISION")
    transpose, reverse = precision >> 11 & 7, precision >> 9 & 3
    if record.activation or transpose or reverse:
        half_rate = transpose in (1, 3, 7) or reverse == 2  # H<->W transposes, reverse W
        cycles = max(cycles, figures.activation_cycles[int(half_rate)])
    return cycles


def _block_read_cycles(
    record: OpRecord, memory: MemorySystem, block_bytes: int, name: str
) -> float:
    if _chained(record, name):
        return 0.0
    region = record.bytes_read[0][0] if record.bytes_read else 1
    port = memory.port(region)
    return port.read_latency + block_bytes / port.bytes_per_cycle


def _block_write_cycles(record: OpRecord, memory: MemorySystem, block_bytes: int) -> float:
    if _chained(record, "OFM") or not record.bytes_written:
        return 0.0
    port = memory.port(record.bytes_written[0][0])
    return port.write_latency + block_bytes / port.bytes_per_cycle


def _mac_cycles_per_block(record: OpRecord, figures: U85Figures, block: tuple, ub: tuple) -> int:
    kh, kw = record.kernel[0], record.kernel[1]
    bh, bw, bc = block
    shape = _BlockShape(
        ub_wh=ceil(bh / ub[0]) * ceil(bw / ub[1]),
        ub_depth=ceil(bc / ub[2]),
        ifm_bits=8 * record.ifm_elem_size,
        ifm_block_depth=min(record.ifm_depth, _ifm_block_depth(record, figures, ub[2])),
        decode=32 * ub[2] // (8 * figures.cores),
        sparse=record.register("WEIGHT_FORMAT") >> 4 & 1,
    )
    total = 0
    for x in range(0, kw, 8):
        for y in range(0, kh, 8):
            elements = min(kh - y, 8) * min(kw - x, 8)
            total += _kernel_part_cycles(record, figures, shape, elements)
    if record.kind in _CONV_KINDS:
        total *= ceil(record.ifm_depth / shape.ifm_block_depth)
    return total


class _BlockShape(NamedTuple):
    ub_wh: int  # micro-blocks across the block's width and height
    ub_depth: int  # micro-blocks through its depth
    ifm_bits: int
    ifm_block_depth: int
    decode: int  # weight decode cycles per micro-block
    sparse: int  # the sparse weight format halves the MAC cycles


def _kernel_part_cycles(
    record: OpRecord, figures: U85Figures, shape: _BlockShape, elements: int
) -> int:
    """The MAC cycles of one block over an (up to) 8x8 part of the kernel, and the delay."""
    kind = record.kind
    ub_wh, ub_depth, ifm_bits, ifm_block_depth, decode, sparse = shape
    if kind.startswith("pool"):
        steps, cycles = 1, max(4, elements) * ub_wh * ub_depth * (ifm_bits // 2)
    elif kind == "depthwise":
        steps = ceil(elements / 4)
        cycles = max(decode, 4 * ub_wh * (ifm_bits // 8)) * steps * ub_depth
    elif not record.part_kernel_first:
        steps = elements
        cycles = max(decode, ifm_block_depth // 8 * ub_wh) * steps * ub_depth
        cycles = cycles * (ifm_bits // 8) // (2 if sparse else 1)
    else:
        steps = ceil(elements / (2 if ifm_bits == 16 else 4))
        cycles = max(decode, 4 * ub_wh) * steps * ub_depth * ceil(ifm_block_depth / 8)
        cycles //= 2 if sparse else 1
    delay_each = 3 if record.acc_40bit and figures.macs <= 128 else 2
    delay = 0
    if ub_wh == 1:
        delay = delay_each * (steps if ub_depth == 1 else max(steps - 1, 0) * ub_depth)
    if kind in _CONV_KINDS and record.part_kernel_first:
        delay *= ceil(ifm_block_depth / 8)
    return cycles + delay


def _ifm_block(record: OpRecord, block: tuple) -> tuple[int, int, int]:
    kh, kw, sy, sx, dy, dx = record.kernel
    ih, iw, ic = record.ifm_shape
    return (
        min(ih, (block[0] - 1) * sy + (kh - 1) * dy + 1),
        min(iw, (block[1] - 1) * sx + (kw - 1) * dx + 1),
        ic if record.kind in _CONV_KINDS else min(ic, block[2]),
    )


def mac_op_cycles(record: OpRecord, accelerator: Accelerator, memory: MemorySystem) -> int:
    """EstimateMacOpCycles: the blocks' MAC and output work, paced by the slower."""
    figures = FIGURES[accelerator.name]
    ub = ublock(record, figures)
    block = tuple(min(b, s) for b, s in zip(record.block, record.ofm_shape))
    ub_in_block = ceil(block[0] / ub[0]) * ceil(block[1] / ub[1]) * ceil(block[2] / ub[2])
    oh, ow, oc = record.ofm_shape
    blocks = ceil(oh / ub[0]) * ceil(ow / ub[1]) * ceil(oc / ub[2]) / ub_in_block
    block_elements = block[0] * block[1] * block[2]
    ao: float = ceil(output_cycles_per_element(record, accelerator) * block_elements)
    if record.kind in ("conv", "depthwise") and len(record.bytes_read) > 2:
        ao = max(ao, 10 * block[2] * memory.port(record.bytes_read[2][0]).read_latency / 256)
    mac = _mac_cycles_per_block(record, figures, block, ub)
    ib = _ifm_block(record, block)
    ifm_read = _block_read_cycles(record, memory, ib[0] * ib[1] * ib[2] * record.ifm_elem_size,
                                  "IFM")  # fmt: skip
    ofm_write = _block_write_cycles(record, memory, block_elements * record.ofm_elem_size)
    issue = ((abs(ofm_write - ifm_read) if blocks > 1 else 0) + mac + ao) / 4
    mac_b, ao_b = max(mac, issue), max(ao, issue)
    total = mac_b * blocks + ao_b if mac_b > ao_b else ao_b * blocks + mac_b
    return int(total + ofm_write + ifm_read)


def elementwise_cycles(record: OpRecord, accelerator: Accelerator, memory: MemorySystem) -> int:
    """EstimateElementwiseCycles (elementwise and resize): the output stage per element, or the
    command issue limit."""
    oh, ow, oc = record.ofm_shape
    depth = ceil(oc / 16) * 16 if record.ofm_brick else oc
    elements = oh * ow * depth
    per_element = output_cycles_per_element(record, accelerator)
    block = tuple(min(b, s) for b, s in zip(record.block, record.ofm_shape))
    block_elements = block[0] * block[1] * block[2]
    ifm_read = _block_read_cycles(record, memory, block_elements * record.ifm_elem_size, "IFM")
    ofm_write = _block_write_cycles(record, memory, block_elements * record.ofm_elem_size)
    issue = ceil((max(ifm_read, ofm_write) / block_elements + per_element) / 4 * elements)
    return int(max(issue, ceil(per_element * elements)))


def dma_cycles(record: OpRecord, memory: MemorySystem) -> int:
    (src, n), (dst, _) = record.bytes_read[0], record.bytes_written[0]
    read = memory.port(src)
    cycles = n / read.bytes_per_cycle + read.read_latency
    if dst != INTERNAL:
        write = memory.port(dst)
        cycles = max(cycles, n / write.bytes_per_cycle + write.write_latency)
    return ceil(cycles)


# transpose code -> for each destination axis (h, w, c), the source axis it takes (fields.py)
_TRANSPOSES = {1: (1, 0, 2), 2: (0, 2, 1), 3: (1, 2, 0), 6: (2, 0, 1), 7: (2, 1, 0)}


def _ofm_run(record: OpRecord, block: tuple) -> int:
    """Bytes of the longest contiguous run an OFM block write makes (Vela's burst): a
    transposed write's run is the source axis that lands in the destination's channels."""
    e = record.ofm_elem_size
    transpose = record.register("OFM_PRECISION") >> 11 & 7
    if transpose in _TRANSPOSES:
        source = _TRANSPOSES[transpose][2]
        return min(block[source], 16 if record.ofm_brick else block[source]) * e
    if record.ofm_brick:
        return 16 * e * block[1]
    depth = record.ofm_shape[2]
    if depth <= 16 and record.register("OFM_STRIDE_X") == depth * e:
        return block[1] * depth * e
    return min(64, 16 * e, depth * e)


def _ifm_run(record: OpRecord, block: tuple) -> int:
    """Bytes of the longest contiguous run an IFM block read makes."""
    e, depth = record.ifm_elem_size, record.ifm_shape[2]
    width = block[1] if _streamed(record) else _ifm_block(record, block)[1]
    if record.ifm_brick:
        return 16 * e * width
    if record.register("IFM_STRIDE_X") == depth * e:
        return width * depth * e
    return depth * e


def memory_cycles(record: OpRecord, memory: MemorySystem) -> dict[str, float]:
    """Per memory (the ini's name), the operation's access cycles: its bytes at the memory's
    bandwidth, the IFM's and OFM's in bursts no longer than a block's contiguous runs (Vela's
    EstimateMemoryTransfer: bytes x the memory's burst / the run; chaining buffers and the LUT
    memory are inside the NPU: none)."""
    block = tuple(min(b, s) for b, s in zip(record.block, record.ofm_shape))
    runs = {}
    if record.kind != "dma":
        runs = {("r", 0): _ifm_run(record, block), ("w", 0): _ofm_run(record, block)}
    times: dict[str, float] = {}
    for direction, moves in (("r", record.bytes_read), ("w", record.bytes_written)):
        for index, (region, nbytes) in enumerate(moves):
            if region == INTERNAL or region >= MEMORY_REGIONS:
                continue
            port = memory.port(region)
            run = runs.get((direction, index), port.burst)
            moved = nbytes * port.burst / min(port.burst, max(run, 1))
            times[port.name] = times.get(port.name, 0.0) + moved / port.bytes_per_cycle
    return times


def op_timing(record: OpRecord, accelerator: Accelerator, memory: MemorySystem) -> OpTiming:
    if record.kind == "dma":
        cycles = dma_cycles(record, memory)
        return OpTiming(0, cycles)
    if _streamed(record):
        compute = elementwise_cycles(record, accelerator, memory)
    else:
        compute = mac_op_cycles(record, accelerator, memory)
    total = max([compute, *memory_cycles(record, memory).values()])
    return OpTiming(compute, ceil(total))


def output_total(record: OpRecord, accelerator: Accelerator) -> int:
    """The output stage's cycles over the whole OFM (what a chain's operations add up)."""
    oh, ow, oc = record.ofm_shape
    return ceil(output_cycles_per_element(record, accelerator) * oh * ow * oc)


def chained_in(record: OpRecord) -> bool:
    """Whether the operation reads an input from a chaining buffer."""
    return _chained(record, "IFM") or _chained(record, "IFM2")


def pipeline_ends(
    record: OpRecord, accelerator: Accelerator, memory: MemorySystem
) -> tuple[float, float]:
    """(fill, drain): the first IFM block's read, and the last OFM block's write: what BLOCKDEP
    lets two kernels overlap."""
    block = tuple(min(b, s) for b, s in zip(record.block, record.ofm_shape))
    ib = block if _streamed(record) else _ifm_block(record, block)
    fill = _block_read_cycles(record, memory, ib[0] * ib[1] * ib[2] * record.ifm_elem_size, "IFM")
    drain = _block_write_cycles(record, memory, block[0] * block[1] * block[2] *
                                record.ofm_elem_size)  # fmt: skip
    return fill, drain
