"""Feature maps as the registers describe them: tiles, strides, NHWC and NHCWB16.

A feature map is read and written through strided views of its memory region: one piece per
tile (BASE0-3) and, in NHCWB16, one for the whole 16-channel bricks and one for the remainder.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .errors import UnsupportedError, at
from .memory import Memory
from .registers import Registers

# IFM_PRECISION / OFM_PRECISION: element size from the 2-bit size field.
_SIZE_CODES = {0: 1, 1: 2, 2: 4}
BRICK = 16  # channels per NHCWB16 brick
_DTYPES = {
    (signed, size): np.dtype(f"<{'i' if signed else 'u'}{size}")
    for signed in (False, True)
    for size in _SIZE_CODES.values()
}


@dataclass(frozen=True)
class Piece:
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


@dataclass(frozen=True)
class FeatureMap:
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
    # made with the map (planning reads both for every map; functools.cached_property's first
    # access takes a lock, a tenth of planning a feature map)
    dtype: np.dtype = field(init=False, compare=False, repr=False)
    pieces: tuple[Piece, ...] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "dtype", _DTYPES[self.signed, self.elem_size])
        object.__setattr__(self, "pieces", self._pieces())

    @property
    def shape(self) -> tuple[int, int, int]:
        return self.height, self.width, self.depth

    def _tiles(self):
        """(rows, columns, base) of the up to four tiles, in feature-map coordinates."""
        h, w, w0 = self.height, self.width, min(self.width0, self.width)
        h0, h1 = min(self.height0, h), min(self.height1, h)
        tiles = ((0, h0, 0, w0, 0), (0, h1, w0, w, 1), (h0, h, 0, w0, 2), (h1, h, w0, w, 3))
        return [
            (slice(y0, y1), slice(x0, x1), self.bases[t])
            for y0, y1, x0, x1, t in tiles
            if y1 > y0 and x1 > x0
        ]

    def _pieces(self) -> tuple[Piece, ...]:
        """NHWC: channels are contiguous and STRIDE_C is not used (Vela 5.1 leaves 4 there on an
        8-bit map that transposes a mean's int32 sums). NHCWB16: a brick row is 16 elements, so
        STRIDE_X is not used; STRIDE_C steps between bricks. As Vela's
        register_command_stream_util.get_address and check_strides read the registers."""
        pieces = []
        e, c = self.elem_size, self.depth
        for ys, xs, base in self._tiles():
            th, tw = ys.stop - ys.start, xs.stop - xs.start
            if not self.brick:
                pieces.append(
                    Piece(ys, xs, slice(0, c), base, (th, tw, c), (self.stride_y, self.stride_x, e))
                )
                continue
            yx = (th, tw), (self.stride_y, BRICK * e)
            full = c // BRICK
            if full:
                pieces.append(
                    Piece(
                        ys,
                        xs,
                        slice(0, BRICK * full),
                        base,
                        (*yx[0], full, BRICK),
                        (*yx[1], self.stride_c, e),
                    )
                )
            if c % BRICK:
                pieces.append(
                    Piece(
                        ys,
                        xs,
                        slice(BRICK * full, c),
                        base + full * self.stride_c,
                        (*yx[0], c % BRICK),
                        (*yx[1], e),
                    )
                )
        return tuple(pieces)

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


def _precision(
    regs: Registers, name: str, size_shift: int, size_bits: int
) -> tuple[int, bool, bool]:
    value = regs.get(name)
    code = (value >> size_shift) & ((1 << size_bits) - 1)
    if code not in _SIZE_CODES:
        raise UnsupportedError(
            f"{name} precision code {code} in " + at(regs.op.offset, regs.op.name, value)
        )
    fmt = (value >> 6) & 3
    if fmt > 1:
        raise UnsupportedError(f"{name} format {fmt} in " + at(regs.op.offset, regs.op.name, value))
    return _SIZE_CODES[code], bool(value & 1), fmt == 1


_FIELDS = (
    "REGION",
    "BASE0",
    "BASE1",
    "BASE2",
    "BASE3",
    "HEIGHT0_M1",
    "HEIGHT1_M1",
    "WIDTH0_M1",
    "STRIDE_Y",
    "STRIDE_X",
    "STRIDE_C",
    "ZERO_POINT",
)
# register names per feature map, made once (planning reads them for every operation)
_NAMES = {prefix: tuple(f"{prefix}_{f}" for f in _FIELDS) for prefix in ("IFM", "IFM2", "OFM")}


def _feature_map(
    regs: Registers, name: str, size_shift: int, height: int, width: int, depth: int
) -> FeatureMap:
    size, signed, brick = _precision(regs, f"{name}_PRECISION", size_shift, 2)
    region, b0, b1, b2, b3, h0, h1, w0, sy, sx, sc, zp = _NAMES[name]
    get = regs.get
    return FeatureMap(
        region=get(region) & 0x7,
        bases=(get(b0, 0), get(b1, 0), get(b2, 0), get(b3, 0)),
        height0=get(h0) + 1,
        height1=get(h1) + 1,
        width0=get(w0) + 1,
        height=height,
        width=width,
        depth=depth,
        stride_y=get(sy),
        stride_x=get(sx),
        stride_c=get(sc),
        elem_size=size,
        signed=signed,
        brick=brick,
        zero_point=regs.s16(zp, 0),
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
