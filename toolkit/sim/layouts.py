"""Feature maps as an operation's description gives them: tiles, strides, NHWC and NHCWB16.

A feature map is read and written through strided views of its memory region: one piece per
tile (BASE0-3) and, in NHCWB16, one for the whole 16-channel bricks and one for the remainder.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .memory import Memory

BRICK = 16  # channels per NHCWB16 brick
DTYPES = {
    (signed, size): np.dtype(f"<{'i' if signed else 'u'}{size}")
    for signed in (False, True)
    for size in (1, 2, 4, 8)
}


class Piece(NamedTuple):
    """A block of the feature map [ys, xs, cs] stored as a strided array at `offset`."""

    ys: slice
    xs: slice
    cs: slice
    offset: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]

    def view(self, mem: np.ndarray, dtype: np.dtype) -> np.ndarray:
        return np.ndarray(self.shape, dtype, buffer=mem, offset=self.offset, strides=self.strides)

    def byte_range(self, elem_size: int) -> tuple[int, int]:
        last = sum((n - 1) * s for n, s in zip(self.shape, self.strides))
        return self.offset, self.offset + last + elem_size


class FeatureMap(NamedTuple):
    """A feature map as an operation's description gives it (a family's decoder makes it with
    feature_map), with its element type and the pieces of memory it is stored in."""

    region: int
    bases: tuple[int, int, int, int]
    height0: int
    height1: int
    width0: int
    height: int
    width: int
    depth: int
    stride_y: int
    stride_x: int
    stride_c: int
    elem_size: int
    signed: bool
    brick: bool  # NHCWB16
    zero_point: int
    dtype: np.dtype
    pieces: tuple[Piece, ...]
    # only code that reads the pieces (numpy) may run it, not the native kernels: the pieces
    # are not what the fields above give (an Ethos-U85 transposed or reversed OFM write), or the
    # region is none of the memory's 0-7 the kernels address (an Ethos-U85 chaining buffer)
    numpy_only: bool = False

    @property
    def shape(self) -> tuple[int, int, int]:
        return self.height, self.width, self.depth

    def check(self, memory: Memory, what: str) -> None:
        """Bounds of every element against its region (once, when the program is planned)."""
        ranges = [p.byte_range(self.elem_size) for p in self.pieces]
        if ranges:
            memory.check(self.region, min(r[0] for r in ranges), max(r[1] for r in ranges), what)

    def read(self, memory: Memory) -> np.ndarray:
        """(H, W, C) values; may be a view into memory, so copy before memory changes."""
        mem = memory.regions[self.region]
        if len(self.pieces) == 1 and len(self.pieces[0].shape) == 3:
            return self.pieces[0].view(mem, self.dtype)
        out = np.empty(self.shape, self.dtype)
        for p in self.pieces:
            out[p.ys, p.xs, p.cs] = p.view(mem, self.dtype).reshape(
                p.ys.stop - p.ys.start, p.xs.stop - p.xs.start, -1
            )
        return out

    def write(self, memory: Memory, values: np.ndarray) -> None:
        mem = memory.regions[self.region]
        for p in self.pieces:
            p.view(mem, self.dtype)[...] = values[p.ys, p.xs, p.cs].reshape(p.shape)

    def in_memory_order(self, values: np.ndarray) -> np.ndarray:
        """values (H, W, C) by the address each is stored at: the order of the TOSA tensor
        the map holds when its strides are not (W*C, C, 1), as in Vela's transposes."""
        if self.brick:
            return values.reshape(-1)
        addresses = np.empty(self.shape, np.int64)
        for p in self.pieces:
            index = np.indices(p.shape).reshape(len(p.shape), -1)
            at = p.offset + (index * np.array(p.strides)[:, None]).sum(0)
            addresses[p.ys, p.xs, p.cs] = at.reshape(
                p.ys.stop - p.ys.start, p.xs.stop - p.xs.start, -1
            )
        return values.reshape(-1)[np.argsort(addresses.reshape(-1), kind="stable")]


def _tiles(bases, height0: int, height1: int, width0: int, h: int, w: int) -> list:
    """(rows, columns, base) of the up to four tiles, in feature-map coordinates."""
    if 0 < h <= height0 and 0 < w <= width0:  # tile 0 holds it all, as in most maps
        return [(slice(0, h), slice(0, w), bases[0])]
    w0, h0, h1 = min(width0, w), min(height0, h), min(height1, h)
    tiles = ((0, h0, 0, w0, 0), (0, h1, w0, w, 1), (h0, h, 0, w0, 2), (h1, h, w0, w, 3))
    return [
        (slice(y0, y1), slice(x0, x1), bases[t])
        for y0, y1, x0, x1, t in tiles
        if y1 > y0 and x1 > x0
    ]


def _pieces(tiles: list, c: int, stride_y: int, stride_x: int, stride_c: int, e: int, brick: bool):
    """NHWC: channels are contiguous and STRIDE_C is not used (Vela 5.1 leaves 4 there on an
    8-bit map that transposes a mean's int32 sums). NHCWB16: a brick row is 16 elements, so
    STRIDE_X is not used; STRIDE_C steps between bricks. As Vela's
    register_command_stream_util.get_address and check_strides read the registers."""
    pieces = []
    full = c // BRICK
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    for ys, xs, base in tiles:
        th, tw = ys.stop - ys.start, xs.stop - xs.start
        if not brick:
            pieces.append(Piece(ys, xs, slice(0, c), base, (th, tw, c), (stride_y, stride_x, e)))
            continue
        if full:
            shape, strides = (th, tw, full, BRICK), (stride_y, BRICK * e, stride_c, e)
            pieces.append(Piece(ys, xs, slice(0, BRICK * full), base, shape, strides))
        if c % BRICK:
            shape, strides = (th, tw, c % BRICK), (stride_y, BRICK * e, e)
            rest = slice(BRICK * full, c)
            pieces.append(Piece(ys, xs, rest, base + full * stride_c, shape, strides))
    return tuple(pieces)


def feature_map(
    region: int,
    bases: tuple[int, int, int, int],
    tiles: tuple[int, int, int],
    shape: tuple[int, int, int],
    strides: tuple[int, int, int],
    elem_size: int,
    signed: bool,
    brick: bool,
    zero_point: int,
) -> FeatureMap:
    """A feature map of `shape` (h, w, c) stored in up to four tiles at `bases` (tiles: the
    first tile's height, the second's, the first's width), with strides (y, x, c) in bytes."""
    height0, height1, width0 = tiles
    height, width, depth = shape
    stride_y, stride_x, stride_c = strides
    placed = _tiles(bases, height0, height1, width0, height, width)
    return FeatureMap(
        region=region,
        bases=bases,
        height0=height0,
        height1=height1,
        width0=width0,
        height=height,
        width=width,
        depth=depth,
        stride_y=stride_y,
        stride_x=stride_x,
        stride_c=stride_c,
        elem_size=elem_size,
        signed=signed,
        brick=brick,
        zero_point=zero_point,
        dtype=DTYPES[signed, elem_size],
        pieces=_pieces(placed, depth, stride_y, stride_x, stride_c, elem_size, brick),
    )
