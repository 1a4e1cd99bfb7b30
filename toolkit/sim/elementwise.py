"""Elementwise operations (operations.Elementwise): ADD, SUB and MUL of the IFM and IFM2 (a
feature map, broadcast or a scalar); MIN and MAX of the two; ABS and LRELU of the IFM; SHR and
SHL of the IFM by the IFM2; CLZ of the IFM (alu.py).

Operand A is the IFM and B the IFM2, swapped when the description says `reversed` (a broadcast
first operand travels as the IFM2). ADD/SUB scale their operands first (operations.OperandScales:
16-bit scales of A and B, or a 32-bit scale of one operand while the other enters at 2^19).

The 32-bit operand scale works on the operand shifted left by 20, as TFLite's reference ADD does:
operand * 2^20 * scale / 2^(shift + 20), rounded by the scale's round mode. NATURAL and TRUNCATE
give the same as operand * scale / 2^shift (the TOSA streams); TFL double rounds, a rounding
doubling high multiply (at bit 31) then a rounding divide by 2^(shift - 11), ties away from zero:
TFLite's MultiplyByQuantizedMultiplierSmallerThanOneExp((x - zp) << 20, ...), whose multiplier
Vela programs with the shift reduced by 20 (scaling.advanced_elementwise_add_sub_scale). Rounding
the product once at bit `shift` instead differs from TFLite for a few operand pairs.

MUL multiplies the unscaled operands; SHR, SHL and CLZ take 32-bit IFMs and are not scaled;
MIN and MAX compare the zero-point-adjusted operands; ABS takes the magnitude of the adjusted
IFM; LRELU keeps the non-negative adjusted IFM values and scales the negative ones by its rescale
(alu.NegativeRescale), which carries alpha. Then the description's rescale (for 32-bit MUL and
ABS its shift alone: alu.mul32_rescale), the OFM zero point, the clip and the lookup table. How a
family's registers select each of these is its decoder's (families/ethos_u55/elementwise.py).
"""

from __future__ import annotations

import numpy as np

from . import alu
from .memory import Memory, check_lut
from .native.elementwise import elementwise_kernel
from .operations import Elementwise
from .outstage import Rescale
from .records import Step

UNARY = frozenset({"clz", "abs", "lrelu"})
BITWISE = frozenset({"clz", "shr", "shl"})  # integer ops of 32-bit IFMs, no scaling
UNSCALED = BITWISE | {"min", "max"}  # the OFM scale is not applied
_FUNCTIONS = {
    "mul": lambda a, b: a * b,
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "min": np.minimum,
    "max": np.maximum,
    "abs": lambda a, b: np.abs(a),
    "lrelu": lambda a, b: a,  # alpha: the rescale of the negative values
    "clz": lambda a, b: alu.clz32(a),
    "shl": lambda a, b: alu.shift_left(a, b),
}


def _function(op: Elementwise):
    """acc = f(a, b) of the scaled operands."""
    if op.mode == "shr":
        assert isinstance(op.rescale, Rescale)  # SHR is not scaled: its round mode alone
        rounding = op.rescale.rounding
        return lambda a, b: alu.shift_right(a, b, rounding)
    return _FUNCTIONS[op.mode]


def prepare_elementwise(op: Elementwise, memory: Memory) -> Step:
    """The planned run of an elementwise operation: its feature maps and table checked against
    memory, its native kernel where one runs it (else numpy)."""
    what, ifm, ifm2, ofm = op.label, op.ifm, op.ifm2, op.ofm
    if ifm2 is not None:
        ifm2.check(memory, f"{what} (IFM2)")
    ifm.check(memory, f"{what} (IFM)")
    ofm.check(memory, f"{what} (OFM)")
    check_lut(op.finish, memory, what)
    scale_a, scale_b = op.operands.functions()
    combine, rescale, finish, reversed_ = _function(op), op.rescale, op.finish, op.reversed
    value = np.int64(op.scalar)
    native = elementwise_kernel(
        op.mode, ifm, ifm2, ofm, op.scalar, reversed_, op.operands, rescale, finish
    )

    def run(mem: Memory) -> None:  # numpy's, where the native kernel does not run
        a: np.ndarray | np.int64 = ifm.read(mem).astype(np.int64) - ifm.zero_point
        b = value if ifm2 is None else ifm2.read(mem).astype(np.int64) - ifm2.zero_point
        if reversed_:
            a, b = b, a
        acc = np.broadcast_to(combine(scale_a(a), scale_b(b)), ofm.shape)
        ofm.write(mem, finish(rescale.apply(acc, int(np.abs(acc).max(initial=0))), mem))

    return Step(op.record, run if native is None else native)
