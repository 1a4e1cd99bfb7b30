"""What an NPU operation does, as the shared engines run it: the descriptions a family's decoder
makes from its command stream (families/family.py: NpuFamily.describe).

Nothing here is a register. A description says which feature maps an operation reads and
writes (layouts.FeatureMap: region, tiles, strides, element type, zero point), its window
(kernel.Kernel), its arithmetic (the elementwise or pooling mode by name, operand and output
scales, outstage.Rescale) and its output stage (outstage.Finish: zero point, clip, lookup table),
where its weight and scale streams lie and how its family decodes them, and what a DMA copies.
Each carries the record (records.OpRecord) its family's timing and traffic read, and a label
naming its command for messages.

Ethos-U85 fits as new fields and kinds, each refused by the engines until they run it: chaining
(an IFM or OFM in the chaining buffer: a FeatureMap region of its own), RESIZE (Resize: its scale,
step and offset per axis), transpose and reverse on the OFM write (a field of
the OFM's FeatureMap: the order and direction its axes are written in), 48-bit accumulators (an
accumulator width on Convolution and Pooling), four weight streams (WeightStreams per stream,
as the two cores of the Ethos-U65-512 have today), and new elementwise and pooling modes (new
names in Elementwise.mode and Pooling.mode).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import NamedTuple

import numpy as np

from .alu import NegativeRescale
from .kernel import Kernel
from .layouts import FeatureMap
from .outstage import Finish, Rescale
from .records import OpRecord

# OperandScales.mode: how ADD and SUB scale their operands
SCALE_16BIT, SCALE_OPA_32BIT, SCALE_OPB_32BIT, SCALE_EACH = 0, 1, 2, 3
INPUT_SHIFT_8BIT = 20  # where the 32-bit operand scale sees an 8-bit operand
UNSCALED_SHIFT_8BIT = INPUT_SHIFT_8BIT - 1  # the other operand, times 1/2


class OperandScales(NamedTuple):
    """How ADD/SUB scale their operands: SCALE_16BIT multiplies A by opa and B by opb ((1, 1):
    unscaled, every other operation); SCALE_OPA_32BIT (SCALE_OPB_32BIT) scales A (B) by
    `rescale` at << 20 while the other enters at << 19 (the TOSA/TFLite add of 8-bit operands,
    whose input left shift of 20 meets the larger scale halved)."""

    mode: int = SCALE_16BIT
    opa: int = 1
    opb: int = 1
    rescale: Rescale | None = None
    rescale_b: Rescale | None = None  # SCALE_EACH (Ethos-U85's IFM2_SCALE): B's own rescale

    def functions(self):
        """(scale IFM, scale IFM2): functions of the zero-point-adjusted int64 operands."""
        if self.mode == SCALE_EACH:  # each operand by its own rescale, rounded (Ethos-U85)
            assert self.rescale is not None and self.rescale_b is not None
            return _rescaled(self.rescale), _rescaled(self.rescale_b)
        if self.mode == SCALE_16BIT:
            opa, opb = self.opa, self.opb
            if (opa, opb) == (1, 1):
                return (lambda a: a), (lambda b: b)
            return (lambda a: a * opa), (lambda b: b * opb)
        rescale = self.rescale
        assert rescale is not None

        def scaled(x):
            x = x << INPUT_SHIFT_8BIT
            return rescale.apply(x, int(np.abs(x).max(initial=0)))

        def unscaled(x):
            return x << UNSCALED_SHIFT_8BIT

        return (scaled, unscaled) if self.mode == SCALE_OPA_32BIT else (unscaled, scaled)


def _rescaled(rescale: Rescale):
    def scaled(x):
        return rescale.apply(x, int(np.abs(x).max(initial=0)))

    return scaled


class StreamAt(NamedTuple):
    """Where a stream lies: its region, byte address and length."""

    region: int
    base: int
    length: int


class WeightStreams(NamedTuple):
    """One weight stream and its scale stream. An operation with n of them (the cores of an
    Ethos-U65-512) reads OFM channels k, k + n, k + 2n, ... from its k-th."""

    weights: StreamAt
    scales: StreamAt
    fmt: Hashable  # how the family decodes the weights (NpuFamily.decode_weights)
    channels: int  # the OFM channels the stream holds
    scale_fmt: Hashable = None  # how the family decodes the scales (NpuFamily.decode_scales)


class Convolution(NamedTuple):
    """acc = bias + sum((ifm - zp) * w) over the window (depthwise: per channel), rescaled per
    OFM channel by the scale stream with `rounding`, then the output stage."""

    label: str
    ifm: FeatureMap
    ofm: FeatureMap
    kernel: Kernel
    depthwise: bool
    rounding: int  # outstage.NATURAL, TFL or TRUNCATE
    finish: Finish
    streams: tuple[WeightStreams, ...]
    record: OpRecord


class Pooling(NamedTuple):
    """max, average or reduce_sum of the window over the IFM's first `depth` channels (a
    reduce_sum over all of them into one), then the OFM scale (None: not scaled) and the
    output stage."""

    label: str
    mode: str  # "max", "average", "reduce_sum"
    ifm: FeatureMap
    ofm: FeatureMap
    kernel: Kernel
    depth: int
    rescale: Rescale | None
    divide: bool  # each sum divided by its count of taps inside the IFM (a padded average)
    finish: Finish
    record: OpRecord
    # a per-channel OFM scale (Ethos-U85's NONE pools): its scale stream, as a convolution's
    # (bias and rescale per channel, with `rounding`); `rescale` is then None
    scales: WeightStreams | None = None
    rounding: int = 0


class MatMul(NamedTuple):
    """OFM[n, h, w] = sum_c (IFM[n, h, c] - zp) * (IFM2[n, w, c] - zp2), then `rescale` and the
    output stage (matmul.py)."""

    label: str
    ifm: FeatureMap
    ifm2: FeatureMap
    ofm: FeatureMap
    rescale: Rescale
    finish: Finish
    record: OpRecord


class ResizeAxis(NamedTuple):
    """One axis of a resize, as TOSA's RESIZE defines it: output index o samples the input at
    (o * step + offset) / scale_n (its integer part the input index, its remainder the
    weight in units of 1 / scale_n)."""

    scale_n: int
    step: int  # scale_d: the input advance per output index, in units of 1 / scale_n
    offset: int


class Resize(NamedTuple):
    """TOSA's RESIZE of each channel (resize.py): "nearest" takes the nearer input, "bilinear"
    sums the four neighbours weighted in units of 1 / (scale_n of y x scale_n of x); the sum,
    `fraction_bits` to the left, then `rescale` and the output stage."""

    label: str
    mode: str  # "nearest", "bilinear"
    ifm: FeatureMap  # the input rows and columns the operation reads
    ofm: FeatureMap
    y: ResizeAxis
    x: ResizeAxis
    fraction_bits: int  # where the resize unit's sum sits: the OFM scale's shift includes them
    rescale: Rescale
    finish: Finish
    record: OpRecord


class Elementwise(NamedTuple):
    """mode(A, B) of the scaled operands (A the IFM, B the IFM2 or `scalar`; swapped when
    `reversed`), then `rescale` and the output stage. Modes: mul, add, sub, min, max, lrelu,
    abs, clz, shr, shl (elementwise.py)."""

    label: str
    mode: str
    ifm: FeatureMap
    ifm2: FeatureMap | None  # None: unary, or the scalar
    scalar: int  # the second operand minus its zero point, when ifm2 is None
    reversed: bool
    ofm: FeatureMap
    operands: OperandScales
    rescale: Rescale | NegativeRescale
    finish: Finish
    record: OpRecord


class Dma(NamedTuple):
    """Copy `length` bytes; a region memory.INTERNAL is the NPU's internal memory (a LUT)."""

    label: str
    source: tuple[int, int]  # region, byte address
    destination: tuple[int, int]
    length: int
    record: OpRecord


Operation = Convolution | Pooling | Elementwise | Dma | MatMul | Resize
