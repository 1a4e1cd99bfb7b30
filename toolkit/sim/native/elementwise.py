"""An elementwise operation in one native call (elementwise.c)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..alu import NegativeRescale
from ..layouts import FeatureMap
from ..memory import INTERNAL, Memory
from ..outstage import Finish, Rescale
from . import (
    FINISH_WORDS,
    FM_WORDS,
    batch,
    finish_words,
    fm_words,
    function,
    lut_in_reach,
    run_checked,
    value_range,
)

if TYPE_CHECKING:
    from ..operations import OperandScales

_WORDS = 3 * FM_WORDS + 4 + 7 + 4 + FINISH_WORDS
_KERNEL = function("elementwise", _WORDS)
_SCALE_16BIT, _SCALE_EACH = (
    0,
    3,
)  # operations.SCALE_16BIT, SCALE_EACH and INPUT_SHIFT_8BIT (it imports this module)
_INPUT_SHIFT_8BIT = 20
# elementwise.c's operation numbers
_MODES = {
    "mul": 0,
    "add": 1,
    "sub": 2,
    "min": 3,
    "max": 4,
    "lrelu": 5,
    "abs": 6,
    "clz": 7,
    "shr": 8,
    "shl": 9,
}
_INT64_SAFE = 1 << 61  # a scaled operand below it: their sums and differences fit int64


class NativeElementwise:
    """One planned elementwise operation's native run."""

    def __init__(
        self,
        words: list[int],
        ifm: FeatureMap,
        ifm2: FeatureMap | None,
        ofm: FeatureMap,
        reads_lut: bool,
    ):
        self.desc = np.array(words, np.int64)
        self._desc_address = self.desc.ctypes.data
        self.regions = (ifm.region, ifm.region if ifm2 is None else ifm2.region, ofm.region)
        self.reads_lut = reads_lut  # the SHRAM is made only for a run that reads it

    def row(self) -> batch.Row:
        ifm, ifm2, ofm = self.regions
        return batch.row("elementwise", self.desc, ifm, ifm2, ofm, self.reads_lut)

    def __call__(self, mem: Memory) -> None:
        ifm, ifm2, ofm = self.regions
        run_checked(
            _KERNEL,  # type: ignore[arg-type]
            "an elementwise operation",
            self._desc_address,
            mem.address(ifm),
            mem.address(ifm2),
            mem.address(ofm),
            mem.internal_address if self.reads_lut else 0,
            mem.size(ifm),
            mem.size(ifm2),
            mem.size(ofm),
            mem.size(INTERNAL) if self.reads_lut else 0,
        )


def _words(rescale: Rescale) -> tuple[int, int, int]:
    """(scale, shift, right) of a Rescale of one scale and shift (every elementwise one)."""
    return int(rescale.scale), int(rescale.shift), int(rescale.right)


def elementwise_kernel(
    mode: str,
    ifm: FeatureMap,
    ifm2: FeatureMap | None,
    ofm: FeatureMap,
    scalar: int,
    reversed_: bool,
    operands: OperandScales,
    rescale: Rescale | NegativeRescale,
    finish: Finish,
) -> NativeElementwise | None:
    """The native run of a planned elementwise operation (operations.Elementwise's `mode`; IFM2 a
    feature map, or `scalar`), or None where the numpy path runs it: kernels not built or
    turned off, a LUT the clipped values could index outside of (lut_in_reach), or a 32-bit
    operand scale whose result could pass int64 (no Vela stream scales more than an 8-bit
    operand there; numpy would go to Python ints)."""
    if (
        _KERNEL is None
        or not lut_in_reach(finish)
        or operands.mode == _SCALE_EACH
        or ofm.numpy_only
    ):
        return None
    negative_only = isinstance(rescale, NegativeRescale)
    ofm_rescale = rescale.rescale if isinstance(rescale, NegativeRescale) else rescale
    op_scale = op_shift = op_right = op_rounding = 0
    if operands.mode != _SCALE_16BIT:
        assert operands.rescale is not None
        op_scale, op_shift, op_right = _words(operands.rescale)
        op_rounding = operands.rescale.rounding
        sides = [ifm] if ifm2 is None else [ifm, ifm2]
        largest = max([abs(scalar)] + [max(map(abs, value_range(f))) for f in sides])
        reach = (largest << _INPUT_SHIFT_8BIT) * abs(op_scale) >> (op_shift + op_right)
        if reach + 1 >= _INT64_SAFE:
            return None
    words = [
        *fm_words(ifm),
        *(fm_words(ifm2) if ifm2 is not None else [0] * FM_WORDS),
        *fm_words(ofm),
        _MODES[mode],
        int(ifm2 is not None),
        scalar,
        int(reversed_),
        operands.mode,
        operands.opa,
        operands.opb,
        op_scale,
        op_shift,
        op_right,
        op_rounding,
        *_words(ofm_rescale),
        int(negative_only),
        *finish_words(finish, ofm_rescale.rounding),
    ]
    return NativeElementwise(words, ifm, ifm2, ofm, finish.lut is not None)
