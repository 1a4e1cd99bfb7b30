"""The activation step of the output stage: ACTIVATION's function and clip range, and the LUT.

ACTIVATION bits 0-11 select the function: 0 clips to ACTIVATION_MIN/MAX; 16 + k clips, then
looks the value up in LUT slot k of the SHRAM (memory.py); 3 (tanh) and 4 (sigmoid) are not
implemented. Bits 12-15 select the clip range: 0 the OFM type, 2 uint8, 3 int8, 5 int16 (Vela
forces int8 where a table of 32-bit entries writes an int32 OFM: the int8 softmax's exp).

A 32-bit OFM without a forced range bypasses the zero point and the clip: its values are written
as the scaling left them. ACTIVATION_MIN/MAX are 16-bit and Vela programs the int16 limits there,
while the int8 softmax's sums of exponentials (> 2^19) and its fixed-point reciprocal pass through
int32 OFMs unclipped. Vela 3.x's softmax programs the softmax input's zero point as the
OFM_ZERO_POINT of every int32 step (its no_scale_quant keeps it; Vela 5.1 writes 0): adding it
makes the Himax WE2 stream's right shift 23 instead of 24 and its outputs [127, -102] where
TFLite's reference kernels give [104, -104]; without it the stream is bit-exact with them. With a
forced range (the softmax's exp table into an int32 OFM) the zero point is added before the clip
and the lookup: it moves x - max into the table's index range.

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

from . import outstage
from .errors import PayloadError, UnsupportedError, at
from .layouts import FeatureMap
from .memory import LUT_SLOT_BYTES, Memory
from .outstage import Finish
from .registers import Registers

NONE, TANH, SIGMOID, LUT_FIRST, LUT_LAST = 0, 3, 4, 16, 23
CLIP_RANGES = {2: (0, 255), 3: (-128, 127), 5: (-32768, 32767)}  # 0: the OFM type's
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


def _unsupported(regs: Registers, reason: str) -> UnsupportedError:
    op = regs.command
    return UnsupportedError(
        f"{reason} is not implemented by the simulator (in "
        f"{at(op.offset, 'NPU_SET_ACTIVATION', regs.get('ACTIVATION', 0))} "
        f"for {op.name} at command-stream offset {op.offset:#x})"
    )


def _table(
    regs: Registers, ofm: FeatureMap, memory: Memory, function: int, clip: tuple[int, int]
) -> Lut | InterpolatedLut:
    """The LUT slot ACTIVATION selects, as the OFM's type reads it (module docstring)."""
    range_lo, range_hi = clip
    slot = function - LUT_FIRST
    offset = memory.lut_base + slot * LUT_SLOT_BYTES
    eight_bit = (ofm.elem_size == 1 and clip == outstage.limits(ofm.dtype)) or (
        ofm.elem_size == 4 and range_hi - range_lo + 1 == LUT_ENTRIES
    )
    lut: Lut | InterpolatedLut
    if eight_bit:
        lut = Lut(offset, ofm.dtype, range_lo)  # little-endian
    elif ofm.elem_size == 2 and ofm.signed and clip == outstage.limits(ofm.dtype):
        lut = InterpolatedLut(offset, ofm.dtype)
    else:
        raise _unsupported(
            regs,
            f"a table lookup into a {8 * ofm.elem_size}-bit "
            f"{'' if ofm.signed else 'un'}signed OFM with clip range {regs.get('ACTIVATION', 0) >> 12}",
        )
    op = regs.command
    memory.check_internal(
        lut.offset,
        lut.offset + lut.nbytes,
        f"{op.name} at command-stream offset {op.offset:#x} (LUT slot {slot})",
    )
    return lut


def output_finish(regs: Registers, ofm: FeatureMap, memory: Memory) -> Finish:
    """Zero point, clip and (if ACTIVATION selects one) table lookup for this operation's OFM."""
    value = regs.get("ACTIVATION", 0)
    function, clip_range = value & 0xFFF, value >> 12
    if function != NONE and not LUT_FIRST <= function <= LUT_LAST:
        op = regs.command
        raise UnsupportedError(
            f"ACTIVATION = {function} is not implemented by the simulator "
            f"(in {at(op.offset, op.name, op.param)})"
        )
    type_range = outstage.limits(ofm.dtype)
    if clip_range == 0:
        range_lo, range_hi = type_range
    elif clip_range in CLIP_RANGES:
        range_lo, range_hi = CLIP_RANGES[clip_range]
    else:
        raise _unsupported(regs, f"ACTIVATION clip range {clip_range}")
    zero_point = ofm.zero_point
    if ofm.elem_size == 4 and clip_range == 0:
        lo, hi, zero_point = range_lo, range_hi, 0
    else:
        lo = max(regs.s16("ACTIVATION_MIN", -32768), range_lo)
        hi = min(regs.s16("ACTIVATION_MAX", 32767), range_hi)
    lut = None if function == NONE else _table(regs, ofm, memory, function, (range_lo, range_hi))
    if lut is not None and hi < range_lo:  # every value clips to hi, below the first entry
        op = regs.command
        raise PayloadError(
            f"{at(op.offset, 'NPU_SET_ACTIVATION_MAX', hi)} is below the first index of "
            f"the activation table ({range_lo}) that {op.name} looks its outputs up in: "
            "the command stream is damaged"
        )
    return Finish(zero_point, lo, hi, ofm.dtype, lut)
