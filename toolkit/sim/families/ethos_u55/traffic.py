"""What each executed NPU operation moves over the AXI ports, as the NPU fetches it.

The NPU works through the OFM one block at a time. For every OFM block it reads the IFM block
that block needs (the block's rows and columns, plus the kernel's halo, clipped to the IFM:
padding is not read); a convolution reads that IFM block again for every OFM depth slice (its
IFM block spans the whole IFM depth), a depthwise or pooling operation reads only the matching
depth slice. Weights and scales are streamed per OFM block column, so the whole weight stream is
read again for every OFM block position in x/y. The OFM is written once. A DMA reads and writes
its length. The command stream is read once from the memory that holds the model.

A beat is one AXI data transfer: 8 bytes on Ethos-U55 (64-bit AXI), 16 on Ethos-U65. Each
contiguous run the NPU fetches is a whole number of beats (runs start aligned: Vela aligns
feature maps and weight streams to 16 bytes). Only shapes, block configuration, strides and
lengths enter: no data, zero point or scale can change a count.
"""

from __future__ import annotations

from ...fvp_timing import Transfer
from ...memory import INTERNAL
from ...records import OpRecord


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _runs(region: int, write: bool, runs: int, run_bytes: int, beat: int) -> Transfer:
    """`runs` contiguous runs of `run_bytes` each, every one starting on a beat boundary."""
    return Transfer(region, write, runs * run_bytes, runs * _ceil(run_bytes, beat), runs)


def _covered(
    out: int, block: int, stride: int, extent: int, pad: int, size: int
) -> tuple[int, int]:
    """(IFM lines read summed over the OFM blocks along one axis, number of blocks)."""
    total, blocks = 0, 0
    for start in range(0, out, block):
        n = min(block, out - start)
        lo = start * stride - pad
        hi = lo + (n - 1) * stride + extent
        total += max(0, min(hi, size) - max(lo, 0))
        blocks += 1
    return total, blocks


def _feature_map(
    region: int,
    write: bool,
    positions: int,
    depth: int,
    elem: int,
    brick: bool,
    slice_depth: int,
    row: int,
    beat: int,
) -> Transfer:
    """`positions` (y, x) positions of `depth` channels, `row` positions per row. NHCWB16 keeps a
    row of 16 channels together; NHWC a position's channels, and a whole row when one slice
    covers the depth."""
    if brick:  # (h, c / 16, w, 16): a row of one brick column is contiguous
        return _runs(region, write, positions // row * _ceil(depth, 16), row * 16 * elem, beat)
    if slice_depth >= depth:
        return _runs(region, write, positions // row, row * depth * elem, beat)
    runs = positions * (depth // slice_depth)
    moves = _runs(region, write, runs, slice_depth * elem, beat)
    rest = depth % slice_depth
    if rest:
        tail = _runs(region, write, positions, rest * elem, beat)
        moves = Transfer(
            region,
            write,
            moves.nbytes + tail.nbytes,
            moves.beats + tail.beats,
            moves.runs + tail.runs,
        )
    return moves


def _repeated(t: Transfer, times: int) -> Transfer:
    return Transfer(t.region, t.write, t.nbytes * times, t.beats * times, t.runs * times)


def op_transfers(rec: OpRecord, beat: int) -> tuple[Transfer, ...]:
    """Every read and write of the operation, with IFM re-reads per OFM block."""
    if rec.kind == "dma":
        (src, n), (dst, _) = rec.bytes_read[0], rec.bytes_written[0]
        moves = [_runs(src, False, 1, n, beat)]
        if dst != INTERNAL:
            moves.append(_runs(dst, True, 1, n, beat))
        return tuple(moves)
    oh, ow, oc = rec.ofm_shape
    ih, iw, ic = rec.ifm_shape
    e_in, e_out = rec.ifm_elem_size, rec.ofm_elem_size
    bh, bw, bc = (min(b, s) for b, s in zip(rec.block, rec.ofm_shape))
    moves = []
    if rec.kind.startswith("elementwise"):
        for region, nbytes in rec.bytes_read:
            depth = nbytes // (e_in * oh * ow) if nbytes >= e_in * oh * ow else 1
            positions = nbytes // (depth * e_in)
            moves.append(
                _feature_map(
                    region,
                    False,
                    positions,
                    depth,
                    e_in,
                    rec.ifm_brick,
                    bc,
                    max(1, min(ow, positions)),
                    beat,
                )
            )
    else:
        kh, kw, sy, sx, dy, dx = rec.kernel
        rows, y_blocks = _covered(oh, bh, sy, (kh - 1) * dy + 1, rec.register("IFM_PAD_TOP"), ih)
        cols, x_blocks = _covered(ow, bw, sx, (kw - 1) * dx + 1, rec.register("IFM_PAD_LEFT"), iw)
        # a convolution reads the whole IFM depth for every OFM depth slice; depthwise and
        # pooling read the IFM depth slice matching the OFM block's
        conv = rec.kind == "conv"
        ifm = _feature_map(
            rec.bytes_read[0][0],
            False,
            rows * cols,
            ic,
            e_in,
            rec.ifm_brick,
            _conv_ifm_slice(rec) if conv else bc,
            cols // x_blocks or 1,
            beat,
        )
        if conv:
            ifm = _repeated(ifm, _ceil(oc, bc))
        moves.append(ifm)
        for region, nbytes in rec.bytes_read[1:]:  # weights, scales: once per OFM block position
            if nbytes:
                moves.append(_runs(region, False, y_blocks * x_blocks, nbytes, beat))
    for region, _nbytes in rec.bytes_written:
        moves.append(_feature_map(region, True, oh * ow, oc, e_out, rec.ofm_brick, bc, ow, beat))
    return tuple(moves)


def _conv_ifm_slice(rec: OpRecord) -> int:
    """Channels of one IFM depth step of a convolution (the IFM block depth)."""
    deepest = 16 if (rec.part_kernel_first or rec.ifm_elem_size > 1) else 32
    return min(deepest, _ceil(rec.ifm_depth, 8) * 8)
