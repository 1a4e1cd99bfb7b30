"""RESIZE (operations.Resize), as TOSA's RESIZE computes it for integers: output index o of an
axis samples the input at y = o * step + offset in units of 1 / n (n the axis's scale_n), at
input index floor(y / n) with remainder d; the neighbours are clamped into the input.
NEAREST takes the next input where 2d >= n, the index itself otherwise; BILINEAR sums the four
neighbours times (n - d) or d per axis, so the sum is in units of 1 / (n_y * n_x). The sum is
then placed `fraction_bits` to the left (where the NPU's resize unit holds it) and rescaled
with the operation's OFM scale, then the output stage."""

from __future__ import annotations

import numpy as np

from .memory import Memory, check_lut
from .operations import Resize, ResizeAxis
from .records import Step


def taps(axis: ResizeAxis, outputs: int, inputs: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lower input index, upper input index, remainder) for each output index, the indices
    clamped into 0 .. inputs - 1."""
    y = np.arange(outputs, dtype=np.int64) * axis.step + axis.offset
    index = y // axis.scale_n  # floor, as TOSA's
    remainder = y - index * axis.scale_n
    lower = np.clip(index, 0, inputs - 1)
    upper = np.clip(index + 1, 0, inputs - 1)
    return lower, upper, remainder


def prepare_resize(op: Resize, memory: Memory) -> Step:
    what, ifm, ofm = op.label, op.ifm, op.ofm
    ifm.check(memory, f"{what} (IFM)")
    ofm.check(memory, f"{what} (OFM)")
    check_lut(op.finish, memory, what)
    y0, y1, dy = taps(op.y, ofm.height, ifm.height)
    x0, x1, dx = taps(op.x, ofm.width, ifm.width)
    magnitude = 1 << (8 * ifm.elem_size)  # |value - zero point| is below it
    if op.mode == "nearest":
        rows = np.where(2 * dy >= op.y.scale_n, y1, y0)
        cols = np.where(2 * dx >= op.x.scale_n, x1, x0)
        bound = magnitude << op.fraction_bits
    else:
        bound = (magnitude * op.y.scale_n * op.x.scale_n) << op.fraction_bits

    def run(mem: Memory) -> None:
        v = ifm.read(mem).astype(np.int64) - ifm.zero_point
        if op.mode == "nearest":
            acc = v[rows][:, cols]
        else:
            wy, wx = dy[:, None, None], dx[None, :, None]
            column = v[y0] * (op.y.scale_n - wy) + v[y1] * wy
            acc = column[:, x0] * (op.x.scale_n - wx) + column[:, x1] * wx
        ofm.write(mem, op.finish(op.rescale.apply(acc << op.fraction_bits, bound), mem))

    return Step(op.record, run)
