"""The lookup tables of the output stage, in the NPU's internal memory (memory.py). A family's
decoder says which table an operation reads (families/ethos_u55/fields.py: ACTIVATION).

LUT lookup: index = clipped value - the range's minimum (-128..127 -> 0..255, as Vela's
convert_to_lut8 orders the table); the entry is the output as written, the OFM zero point
already added before the clip. An 8-bit OFM takes one byte per entry (256 bytes, one slot), a
32-bit OFM one 32-bit little-endian entry (1 KB, four slots).

A 16-bit OFM's table interpolates (InterpolatedLut: 512 32-bit entries, the whole 2 KB; Vela's
lut.create_lut_int16_op): the clipped value v + 32768 indexes entry (v + 32768) >> 7, whose low
16 bits are the base and high 16 bits the slope to the next entry, both signed; the output is
base + ((slope * (v & 127) + 64) >> 7), TOSA's int16 TABLE followed by its RESCALE by 1/128.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .memory import Memory

LUT_ENTRIES = 256


class Lut(NamedTuple):
    """256 entries at a SHRAM address, indexed by the clipped value minus `index_base`."""

    offset: int
    dtype: np.dtype
    index_base: int

    @property
    def nbytes(self) -> int:
        return LUT_ENTRIES * self.dtype.itemsize

    def lookup(self, values: np.ndarray, mem: Memory) -> np.ndarray:
        table = mem.internal[self.offset : self.offset + self.nbytes].view(self.dtype)
        return table[values - self.index_base]


class InterpolatedLut(NamedTuple):
    """A 16-bit OFM's table: 512 entries (base, slope) at a SHRAM address (module docstring)."""

    offset: int
    dtype: np.dtype  # the OFM's: int16

    @property
    def nbytes(self) -> int:
        return 512 * 4  # 512 entries of 32 bits

    def lookup(self, values: np.ndarray, mem: Memory) -> np.ndarray:
        table = mem.internal[self.offset : self.offset + self.nbytes].view("<u4")
        unsigned = values.astype(np.int64) + 32768
        entries = table[unsigned >> 7].astype(np.int64)
        base = ((entries & 0xFFFF) ^ 0x8000) - 0x8000
        slope = ((entries >> 16) ^ 0x8000) - 0x8000
        return base + ((slope * (unsigned & 127) + 64) >> 7)
