"""A convolution or depthwise convolution in one native call (conv.c)."""

from __future__ import annotations

import numpy as np

from ..kernel import Kernel
from ..layouts import FeatureMap
from ..memory import INTERNAL, Memory
from ..outstage import DOUBLE, Finish, Rescale
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

_NARROW = 2 * FM_WORDS + GEOMETRY_WORDS + 1  # conv_desc.narrow
_WEIGHTS8 = _NARROW + 1  # conv_desc.weights8
# conv_desc.weight_bytes and channels: the sizes of the arrays run with it (conv.c checks
# that the description reads no more of them), set with the arrays
_WEIGHT_BYTES = _WEIGHTS8 + 1
_CHANNELS = _WEIGHT_BYTES + 1
_KERNEL = function("conv", _CHANNELS + 1 + FINISH_WORDS)
_INT16 = (-(1 << 15), (1 << 15) - 1)
_INT32_BOUND = 1 << 31


class NativeConv:
    """One planned convolution's native run. Its weights, bias and scales come from the plan's
    decoded streams at each run (the same objects while the streams do not change); what the
    kernel needs of them is worked out once per object. Called as conv.NumpyConv is (the kernel
    needs no bias_bound: its rescale is exact, 128-bit where 64 bits could overflow)."""

    def __init__(
        self,
        ifm: FeatureMap,
        ofm: FeatureMap,
        k: Kernel,
        depthwise: bool,
        finish: Finish,
        rounding: int,
    ):
        words = [
            *fm_words(ifm),
            *fm_words(ofm),
            *geometry_words(k),
            int(depthwise),
            0,  # narrow, weights8 and weight_bytes: set with the weights
            0,
            0,
            0,  # channels: set with the scales
            *finish_words(finish, rounding),
        ]
        self.desc = np.array(words, np.int64)
        self._desc_address = self.desc.ctypes.data
        self.ifm_region, self.ofm_region = ifm.region, ofm.region
        self.reads_lut = finish.lut is not None
        self.depthwise = depthwise
        low, high = value_range(ifm)
        self._ifm_bound = max(abs(low), abs(high))  # of |IFM - zero point|
        self._ifm_in_int16 = ifm.elem_size == 1 and _INT16[0] <= low and high <= _INT16[1]
        self._weights: tuple = (None, None, 0)  # (decoded weights, the array read, its address)
        self._scales: tuple = (None, None, None, ())  # (bias, rescale, arrays, addresses)

    def __call__(
        self, mem: Memory, w: np.ndarray, bias: np.ndarray, rescale: Rescale, bias_bound: int
    ) -> None:
        if w is not self._weights[0]:
            self._set_weights(w)
        if bias is not self._scales[0] or rescale is not self._scales[1]:
            self._set_scales(bias, rescale)
        run_checked(
            _KERNEL,  # type: ignore[arg-type]
            "a convolution",
            self._desc_address,
            mem.address(self.ifm_region),
            mem.address(self.ofm_region),
            self._weights[2],
            *self._scales[3],
            mem.internal_address if self.reads_lut else 0,
            mem.size(self.ifm_region),
            mem.size(self.ofm_region),
            mem.size(INTERNAL) if self.reads_lut else 0,
        )

    def row(self) -> batch.Row | None:
        """This convolution's batch.Row, with the streams of its last run (None before one);
        its description a copy, made with those weights (a run with others changes this one's)."""
        if self._weights[0] is None or self._scales[0] is None:
            return None
        return batch.row(
            "conv",
            self.desc.copy(),
            self.ifm_region,
            None,
            self.ofm_region,
            self.reads_lut,
            [self._weights[1], *self._scales[2]],
        )

    def _set_weights(self, w: np.ndarray) -> None:
        """Whether the narrow path may run with these weights (int16, as decoded): every
        |IFM - zp| fits int16 and every sum of products fits int32; and whether it reads them
        as int8 (a convolution whose weights all fit: half the bytes, which bound an FC)."""
        magnitudes = np.abs(w)  # 9-bit weights: no int16 overflow
        if self.depthwise:
            sums = magnitudes.reshape(-1, w.shape[-1]).sum(axis=0, dtype=np.int64)
        else:
            sums = magnitudes.sum(axis=1, dtype=np.int64)
        largest = int(sums.max(initial=0))
        narrow = self._ifm_in_int16 and largest * self._ifm_bound < _INT32_BOUND
        eight = narrow and not self.depthwise and int(magnitudes.max(initial=0)) <= 127
        self.desc[_NARROW], self.desc[_WEIGHTS8] = int(narrow), int(eight)
        # int16 already: decoded, or the store's
        weights = np.ascontiguousarray(w, dtype=np.int8 if eight else np.int16)
        self.desc[_WEIGHT_BYTES] = weights.nbytes
        self._weights = (w, weights, weights.ctypes.data)

    def _set_scales(self, bias: np.ndarray, rescale: Rescale) -> None:
        depth = len(bias)
        arrays = [_channels(v, depth) for v in (bias, rescale.scale, rescale.shift, rescale.right)]
        self.desc[_CHANNELS] = min(len(a) for a in arrays)
        self._scales = (bias, rescale, arrays, tuple(a.ctypes.data for a in arrays))


def _channels(values, depth: int) -> np.ndarray:
    """One int64 per channel, contiguous: as decoded (no copy), or a scalar's repeated."""
    if np.ndim(values) == 0:
        return np.full(depth, values, np.int64)
    return np.ascontiguousarray(values, dtype=np.int64)


def conv_kernel(
    ifm: FeatureMap, ofm: FeatureMap, k: Kernel, depthwise: bool, finish: Finish, rounding: int
) -> NativeConv | None:
    """The native run of a planned convolution, or None where the numpy path runs it: kernels
    not built or turned off, a 32-bit IFM (its values minus the zero point need 33 bits), a LUT
    the clipped values could index outside of (lut_in_reach), or TOSA's double rounding."""
    if (
        _KERNEL is None
        or rounding == DOUBLE
        or ifm.elem_size == 4
        or not lut_in_reach(finish)
        or ofm.numpy_only
        or ifm.numpy_only
    ):
        return None
    return NativeConv(ifm, ofm, k, depthwise, finish, rounding)
