"""Feature maps as the registers describe them: tiles, strides, NHWC and NHCWB16.

A feature map is read and written through strided views of its memory region: one piece per
tile (BASE0-3) and, in NHCWB16, one for the whole 16-channel bricks and one for the remainder.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .errors import UnsupportedError, at
from .memory import Memory
from .registers import Registers, signed16

# IFM_PRECISION / OFM_PRECISION: element size from the 2-bit size field.
_SIZE_CODES = {0: 1, 1: 2, 2: 4}
BRICK = 16  # channels per NHCWB16 brick
_DTYPES = {
    (signed, size): np.dtype(f"<{'i' if signed else 'u'}{size}")
    for signed in (False, True)
    for size in _SIZE_CODES.values()
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
    """A feature map as an operation's registers describe it, with its element type and the
    pieces of memory it is stored in (ifm_map and ofm_map make it)."""

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


def _precision(
    regs: Registers, name: str, size_shift: int, size_bits: int
) -> tuple[int, bool, bool]:
    value = regs.get(name)
    code = (value >> size_shift) & ((1 << size_bits) - 1)
    if code not in _SIZE_CODES:
        raise UnsupportedError(f"{name} precision code {code}" + _where(regs, value))
    fmt = (value >> 6) & 3
    if fmt > 1:
        raise UnsupportedError(f"{name} format {fmt}" + _where(regs, value))
    return _SIZE_CODES[code], bool(value & 1), fmt == 1


def _where(regs: Registers, value: int) -> str:
    """An error's ' in <command> (value) at command-stream offset ...'; '' for registers read
    back from a record (simulator.op_outputs), which come without their command."""
    op = regs.op
    return "" if op is None else " in " + at(op.offset, op.name, value)


# register names per feature map, made once (planning reads them for every operation)
_REQUIRED = ("REGION", "HEIGHT0_M1", "HEIGHT1_M1", "WIDTH0_M1", "STRIDE_Y", "STRIDE_X", "STRIDE_C")
_NAMES = {
    prefix: (
        f"{prefix}_PRECISION",
        tuple(f"{prefix}_{f}" for f in _REQUIRED),
        tuple(f"{prefix}_BASE{i}" for i in range(4)),
        f"{prefix}_ZERO_POINT",
    )
    for prefix in ("IFM", "IFM2", "OFM")
}


def _feature_map(
    regs: Registers, name: str, size_shift: int, height: int, width: int, depth: int
) -> FeatureMap:
    precision, required, base_names, zero_point = _NAMES[name]
    size, signed, brick = _precision(regs, precision, size_shift, 2)
    region, h0, h1, w0, stride_y, stride_x, stride_c = regs.required(required)
    values = regs.values
    base0, base1, base2, base3 = [values.get(b, 0) for b in base_names]
    bases = (base0, base1, base2, base3)
    height0, height1, width0 = h0 + 1, h1 + 1, w0 + 1
    tiles = _tiles(bases, height0, height1, width0, height, width)
    return FeatureMap(
        region=region & 0x7,
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
        elem_size=size,
        signed=signed,
        brick=brick,
        zero_point=signed16(values.get(zero_point, 0)),
        dtype=_DTYPES[signed, size],
        pieces=_pieces(tiles, depth, stride_y, stride_x, stride_c, size, brick),
    )


def ofm_map(regs: Registers) -> FeatureMap:
    get = regs.get
    return _feature_map(
        regs,
        "OFM",
        1,
        get("OFM_HEIGHT_M1") + 1,
        get("OFM_WIDTH_M1") + 1,
        get("OFM_DEPTH_M1") + 1,
    )


def ifm_map(regs: Registers, height: int, width: int, depth: int, name: str = "IFM") -> FeatureMap:
    """The IFM, or with name="IFM2" the second elementwise operand."""
    return _feature_map(regs, name, 2, height, width, depth)
