"""MatMul (operations.MatMul): each OFM row n is IFM row n times IFM2 row n transposed, less
both zero points: OFM[n, h, w] = sum_c (IFM[n, h, c] - zp) * (IFM2[n, w, c] - zp2), then the
OFM scale and the output stage. Ethos-U85 runs TOSA's MATMUL so: Vela transposes its second
operand to (N, W, C) and folds every other axis into the height."""

from __future__ import annotations

import numpy as np

from .memory import Memory, check_lut
from .operations import MatMul
from .records import Step


def prepare_matmul(op: MatMul, memory: Memory) -> Step:
    what, ifm, ifm2, ofm = op.label, op.ifm, op.ifm2, op.ofm
    ifm.check(memory, f"{what} (IFM)")
    ifm2.check(memory, f"{what} (IFM2)")
    ofm.check(memory, f"{what} (OFM)")
    check_lut(op.finish, memory, what)
    bound = ifm.depth << (8 * (ifm.elem_size + ifm2.elem_size) + 2)  # |a - zp| * |b - zp2| summed

    def run(mem: Memory) -> None:
        a = ifm.read(mem).astype(np.int64) - ifm.zero_point
        b = ifm2.read(mem).astype(np.int64) - ifm2.zero_point
        acc = np.einsum("nhc,nwc->nhw", a, b)
        ofm.write(mem, op.finish(op.rescale.apply(acc, bound), mem))

    return Step(op.record, run)
