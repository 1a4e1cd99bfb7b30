"""A pooling operation in one native call (pool.c)."""

from __future__ import annotations

import numpy as np

from ..kernel import Kernel
from ..layouts import FeatureMap
from ..memory import INTERNAL, Memory
from ..outstage import Finish, Rescale
from . import (
    FINISH_WORDS,
    FM_WORDS,
    GEOMETRY_WORDS,
    batch,
    finish_words,
    fm_words,
    function,
    geometry_words,
    lut_in_reach,
    run_checked,
    value_range,
)

_KERNEL = function("pool", 2 * FM_WORDS + GEOMETRY_WORDS + 7 + FINISH_WORDS)
_MODES = {"max": 0, "average": 1, "reduce_sum": 2}
_EMPTY = np.iinfo(np.int64).min // 4  # pool._EMPTY
_SAFE = 1 << 62  # outstage.Rescale's int64 limit


class NativePool:
    """One planned pooling operation's native run."""

    def __init__(self, words: list[int], ifm: FeatureMap, ofm: FeatureMap, reads_lut: bool):
        self.desc = np.array(words, np.int64)
        self._desc_address = self.desc.ctypes.data
        self.ifm_region, self.ofm_region = ifm.region, ofm.region
        self.reads_lut = reads_lut  # the SHRAM is made only for a run that reads it

    def row(self) -> batch.Row:
        return batch.row("pool", self.desc, self.ifm_region, None, self.ofm_region, self.reads_lut)

    def __call__(self, mem: Memory) -> None:
        run_checked(
            _KERNEL,  # type: ignore[arg-type]
            "a pooling operation",
            self._desc_address,
            mem.address(self.ifm_region),
            mem.address(self.ofm_region),
            mem.internal_address if self.reads_lut else 0,
            mem.size(self.ifm_region),
            mem.size(self.ofm_region),
            mem.size(INTERNAL) if self.reads_lut else 0,
        )


def _empty_window(k: Kernel, ofm: FeatureMap) -> bool:
    """Whether some output's window lies wholly in the padding (then its max is pool._EMPTY)."""
    h_in, w_in = k.kernel_extent(ofm.height, ofm.width)

    def empty(outputs, size, stride, dilation, pad, extent):
        return any(
            all(not 0 <= o * stride + i * dilation - pad < extent for i in range(size))
            for o in range(outputs)
        )

    return empty(ofm.height, k.height, k.stride_y, k.dilation_y, k.pad_top, h_in) or empty(
        ofm.width, k.width, k.stride_x, k.dilation_x, k.pad_left, w_in
    )


def pool_kernel(
    ifm: FeatureMap,
    ofm: FeatureMap,
    k: Kernel,
    mode: str,
    depth: int,
    rescale: Rescale | None,
    bound: int,
    finish: Finish,
    divide: bool,
) -> NativePool | None:
    """The native run of a planned pool (pool.MODES' `mode` over the IFM's first `depth`
    channels; rescale: the OFM's when the global scale is on, pool.py's `bound` with it), or
    None where the numpy path runs it: kernels not built or turned off, a LUT the clipped
    values could index outside of (lut_in_reach), a reduce-sum into more than one OFM channel
    (numpy's write refuses it), or a rescale where numpy's int64 arithmetic could overflow
    (`bound` is pool.py's bound of |acc|; a zero point outside the IFM's type, or a max
    window wholly in the padding, reaches past it). divide: each sum divided by its count of
    taps inside the IFM (pool.divide_by_count)."""
    if _KERNEL is None or not lut_in_reach(finish) or ofm.numpy_only or ifm.numpy_only:
        return None
    if mode == "reduce_sum" and ofm.depth != 1:
        return None
    scale = shift = right = 0
    if rescale is not None:
        scale, shift, right = (int(v) for v in (rescale.scale, rescale.shift, rescale.right))
        reach = (
            k.elements * (depth if mode == "reduce_sum" else 1) * max(map(abs, value_range(ifm)))
        )
        if mode == "max" and _empty_window(k, ofm):
            reach = max(reach, abs(_EMPTY - ifm.zero_point))
        # numpy runs in int64 while bound * |scale| < 2^62, in Python ints beyond: exact both
        # ways only if the true reach keeps int64 exact too
        if bound * abs(scale) < _SAFE <= reach * abs(scale):
            return None
    words = [
        *fm_words(ifm),
        *fm_words(ofm),
        *geometry_words(k),
        _MODES[mode],
        depth,
        int(divide),
        int(rescale is not None),
        scale,
        shift,
        right,
        *finish_words(finish, rescale.rounding if rescale is not None else 0),
    ]
    return NativePool(words, ifm, ofm, finish.lut is not None)
