"""The simulator's native kernels (conv.c, elementwise.c, pool.c), built when the package is
installed.

An operation with a native kernel runs in one call: its inputs from memory, the arithmetic, the
output stage, its OFM into memory, the same integer arithmetic as the numpy path (conv.py,
elementwise.py, pool.py), which stays the reference, and the fallback where the kernels were
not built or an operation has something they do not do. ETK_SIM_NATIVE=0 turns them off.

The C side reads its descriptions as arrays of int64 words: fm_words and finish_words pack the
structures native.h declares, field for field. Every kernel is also given the sizes of the
memories it works on and checks its description against them before it touches them (native.h:
the native layer's trust boundary); one that reaches outside is refused (RegionError).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from types import ModuleType

from ..activation import LUT_ENTRIES, Lut
from ..errors import RegionError
from ..kernel import Kernel
from ..layouts import FeatureMap
from ..outstage import Finish


def _load() -> tuple[ModuleType | None, str]:
    """The kernels' module, or None; and which kernels the simulator runs (and why)."""
    if os.environ.get("ETK_SIM_NATIVE", "1") == "0":
        return None, "numpy (native kernels turned off: ETK_SIM_NATIVE=0)"
    try:
        from . import _kernels  # type: ignore[attr-defined]
    except ImportError as exc:
        return None, f"numpy (native kernels not built: {exc})"
    return _kernels, "native"


KERNELS, STATUS = _load()

FM_WORDS = 18
GEOMETRY_WORDS = 11
FINISH_WORDS = 8


def fm_words(fm: FeatureMap) -> list[int]:
    """native.h's fmap."""
    return [
        fm.region,
        *fm.bases,
        fm.height0,
        fm.height1,
        fm.width0,
        fm.height,
        fm.width,
        fm.depth,
        fm.stride_y,
        fm.stride_x,
        fm.stride_c,
        fm.elem_size,
        int(fm.signed),
        int(fm.brick),
        fm.zero_point,
    ]


def geometry_words(k: Kernel) -> list[int]:
    """The kernel geometry conv_desc and pool_desc hold after their feature maps (conv.c, pool.c):
    size, strides, dilations, pads, then the IFM upscale."""
    return [*k[:10], k.upscale]


def finish_words(finish: Finish, rounding: int) -> list[int]:
    """native.h's finish_desc: the rescale's rounding mode, then outstage.Finish."""
    lut = finish.lut
    table = (
        (lut.offset, lut.dtype.itemsize, int(lut.dtype.kind == "i"), lut.index_base)
        if lut is not None
        else (-1, 0, 0, 0)
    )
    return [rounding, finish.zero_point, finish.lo, finish.hi, *table]


def lut_in_reach(finish: Finish) -> bool:
    """Whether every value the clip leaves indexes the LUT (if any): min(max(v, lo), hi) lies in
    [min(lo, hi), hi]. ACTIVATION_MAX below the table's range (no Vela stream has it) would
    read outside it, where numpy indexes from the table's end or raises. The kernels look up
    plain tables only: a 16-bit OFM's interpolating one (activation.InterpolatedLut) runs in
    numpy."""
    lut = finish.lut
    if lut is None:
        return True
    if not isinstance(lut, Lut):
        return False
    return lut.index_base <= min(finish.lo, finish.hi) and finish.hi - lut.index_base < LUT_ENTRIES


INTERFACE = 8  # table.h's: the kernels take their memories' sizes


def function(name: str, words: int, **more_words: int) -> Callable[..., None] | None:
    """The kernel `name`, whose description has `words` int64 words (the module's DESC_WORDS
    must say the same, and the same of more_words); None where the module is not there or was
    built from other sources."""
    if KERNELS is None or KERNELS.DESC_WORDS.get("interface") != INTERFACE:
        return None
    wanted = {name: words, **more_words}
    if any(KERNELS.DESC_WORDS.get(k) != v for k, v in wanted.items()):
        return None
    return getattr(KERNELS, name)


def run_checked(kernel: Callable[..., None], what: str, *args: int) -> None:
    """kernel(*args), its refusal of a description that reaches outside its memory raised as
    RegionError naming what ran."""
    try:
        kernel(*args)
    except ValueError as exc:
        raise RegionError(f"the native kernels refused {what}: {exc}") from None


def value_range(fm: FeatureMap) -> tuple[int, int]:
    """The range of a feature map's values minus its zero point."""
    bits = 8 * fm.elem_size
    low, high = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if fm.signed else (0, (1 << bits) - 1)
    return low - fm.zero_point, high - fm.zero_point
