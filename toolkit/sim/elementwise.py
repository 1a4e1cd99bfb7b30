"""NPU_OP_ELEMENTWISE: ADD, SUB and MUL of the IFM and IFM2 (a feature map, broadcast or a
scalar); MIN and MAX of the two; ABS and LRELU of the IFM; SHR and SHL of the IFM by the IFM2;
CLZ of the IFM (alu.py).

Operand A is the IFM and B the IFM2, swapped when IFM2_BROADCAST reverses the operand order (a
broadcast first operand travels as the IFM2). ADD/SUB scale their operands first, as
IFM_PRECISION's scale mode selects: 16-bit OPA_SCALE and OPB_SCALE multiply A and B; or OPA_SCALE
and its shift (32-bit) scale one operand while the other enters at 2^19 (8-bit operands: the
TOSA/TFLite add, whose input left shift of 20 meets the larger scale halved).

The 32-bit operand scale works on the operand shifted left by 20, as TFLite's reference ADD does:
operand * 2^20 * OPA_SCALE / 2^(shift + 20), rounded by IFM_PRECISION's round mode. NATURAL and
TRUNCATE give the same as operand * OPA_SCALE / 2^shift (the TOSA streams); TFL double rounds, a
rounding doubling high multiply (at bit 31) then a rounding divide by 2^(shift - 11), ties away
from zero: TFLite's MultiplyByQuantizedMultiplierSmallerThanOneExp((x - zp) << 20, ...), whose
multiplier Vela programs with the shift reduced by 20 (scaling.advanced_elementwise_add_sub_scale).
Rounding the product once at bit `shift` instead differs from TFLite for a few operand pairs.

MUL multiplies the unscaled operands; with 32-bit operands the OFM scale's multiplier is not
applied, only its shift (alu.mul32_rescale). SHR, SHL and CLZ take 32-bit IFMs and are not scaled
(Vela leaves OFM_PRECISION's global-scale bit clear for them). Then the OFM scale and rounding,
the OFM zero point, the clip and the activation (activation.py: a 32-bit OFM is not clipped to the
16-bit ACTIVATION_MIN/MAX).

MIN and MAX (alu.py) compare the zero-point-adjusted operands and are not scaled at all: Vela
leaves the global-scale bit clear and OFM_SCALE at 1, shift 0 (its C++ core fuses a rescale into
them only when it is the unit scale), and sets no OPA/OPB_SCALE, which they ignore as MUL does.
For int8 TOSA graphs ExecuTorch emits them on int32 (RESCALE to int32, MAXIMUM, RESCALE back);
the rescales run as ADD and MUL operations. ABS takes the magnitude of the adjusted IFM, then the
OFM scale (Vela's C++ core folds the TOSA rescales around an int8 ABS into one OFM scale of
input scale / output scale); of a 32-bit IFM only the scale's shift applies, as Vela's C++ core
says of every 32-bit elementwise operation (no stream checks this: Vela fuses only unit scales
there). LRELU keeps the non-negative adjusted IFM values and scales the negative ones by the OFM
scale, which carries alpha (Vela: OFM_SCALE = alpha). Only Vela's legacy Python core emits LRELU,
for an int16 TFLite LEAKY_RELU with equal input and output scales (bit-exact with TFLite's
reference kernel for alpha below and above 1); Vela 5.1's C++ core, which compiles every TOSA
graph, lowers leaky ReLU otherwise. 32-bit LRELU is not implemented.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from . import alu, outstage
from .activation import output_finish
from .conv import check_common
from .errors import UnsupportedError, at
from .families.ethos_u55 import elementwise_mode
from .layouts import FeatureMap, ifm_map, ofm_map
from .memory import Memory
from .native.elementwise import elementwise_kernel
from .records import OpRecord, Step, feature_map_fields
from .registers import Registers, signed16

MODES = {
    0: "mul",
    1: "add",
    2: "sub",
    3: "min",
    4: "max",
    5: "lrelu",
    6: "abs",
    7: "clz",
    8: "shr",
    9: "shl",
}
UNARY = frozenset({"clz", "abs", "lrelu"})
BITWISE = frozenset({"clz", "shr", "shl"})  # integer ops of 32-bit IFMs, no scaling
UNSCALED = BITWISE | {"min", "max"}  # the OFM scale is not applied
SCALE_16BIT, SCALE_OPA_32BIT, SCALE_OPB_32BIT = 0, 1, 2
INPUT_SHIFT_8BIT = 20  # where the 32-bit operand scale sees an 8-bit operand
UNSCALED_SHIFT_8BIT = INPUT_SHIFT_8BIT - 1  # the other operand, times 1/2
# IFM2_BROADCAST bits
_BROADCAST_H, _BROADCAST_W, _BROADCAST_C, _REVERSED, _SCALAR = 1, 2, 4, 1 << 6, 1 << 7
_GLOBAL_SCALE = 1 << 8  # OFM_PRECISION: one OFM scale from OFM_SCALE
_ROUND_NAMES = {outstage.TFL: "TFL", outstage.TRUNCATE: "TRUNCATE", outstage.NATURAL: "NATURAL"}


def _unsupported(regs: Registers, reason: str, register: str | None = None) -> UnsupportedError:
    op = regs.command
    where = (
        at(op.offset, op.name, op.param)
        if register is None
        else f"{at(op.offset, 'NPU_SET_' + register, regs.get(register))} for "
        f"{op.name} at command-stream offset {op.offset:#x}"
    )
    return UnsupportedError(f"{reason} is not implemented by the simulator ({where})")


class OperandScales(NamedTuple):
    """How ADD/SUB scale their operands, as IFM_PRECISION's scale mode selects: SCALE_16BIT
    multiplies A by opa and B by opb ((1, 1): unscaled, every other operation); SCALE_OPA_32BIT
    (SCALE_OPB_32BIT) scales A (B) by `rescale` at << 20 while the other enters at << 19."""

    mode: int = SCALE_16BIT
    opa: int = 1
    opb: int = 1
    rescale: outstage.Rescale | None = None

    def functions(self):
        """(scale IFM, scale IFM2): functions of the zero-point-adjusted int64 operands."""
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


def _operands(regs: Registers, mode: str, ifm: FeatureMap) -> OperandScales:
    scale_mode = (regs.get("IFM_PRECISION") >> 8) & 3
    if mode not in ("add", "sub"):
        if scale_mode != SCALE_16BIT:
            raise _unsupported(
                regs, f"{mode.upper()} with operand scale mode {scale_mode}", "IFM_PRECISION"
            )
        return OperandScales()
    if scale_mode == SCALE_16BIT:
        if regs.cmd1_param("OPA_SCALE"):
            raise _unsupported(regs, "a shift with 16-bit operand scales", "OPA_SCALE")
        opa, opb = regs.get("OPA_SCALE"), regs.get("OPB_SCALE")
        if max(opa, opb) > 0xFFFF:
            raise _unsupported(regs, "16-bit operand scales wider than 16 bits", "OPA_SCALE")
        return OperandScales(SCALE_16BIT, opa, opb)
    if scale_mode not in (SCALE_OPA_32BIT, SCALE_OPB_32BIT):
        raise _unsupported(regs, f"operand scale mode {scale_mode}", "IFM_PRECISION")
    if ifm.elem_size != 1:
        raise _unsupported(regs, "32-bit operand scaling of non-8-bit operands", "IFM_PRECISION")
    shift = (regs.cmd1_param("OPA_SCALE") & 0x3F) + INPUT_SHIFT_8BIT
    rescale = outstage.Rescale(regs.get("OPA_SCALE"), shift, regs.get("IFM_PRECISION") >> 14)
    return OperandScales(scale_mode, rescale=rescale)


def _combine(regs: Registers, mode: str, ifm: FeatureMap, ifm2: FeatureMap | None):
    """acc = f(a, b) of the scaled operands, and the OFM's rescale."""
    rounding = regs.get("OFM_PRECISION") >> 14
    scale, shift = regs.get("OFM_SCALE", 0), regs.cmd1_param("OFM_SCALE") & 0x3F
    wide = ifm.elem_size == 4
    if mode in BITWISE and not wide:
        raise _unsupported(
            regs, f"{mode.upper()} of {8 * ifm.elem_size}-bit operands", "IFM_PRECISION"
        )
    if mode in UNSCALED:
        # Vela sets no OFM scale for these (OFM_PRECISION's global-scale bit clear): the
        # result passes unscaled, whatever OFM_SCALE still holds
        if regs.get("OFM_PRECISION") & _GLOBAL_SCALE and (scale, shift) != (1, 0):
            raise _unsupported(
                regs, f"{mode.upper()} with an OFM scale ({scale}, shift {shift})", "OFM_SCALE"
            )
        scale, shift = 1, 0
        if mode == "shr" and rounding != outstage.NATURAL:
            raise _unsupported(
                regs, f"SHR in round mode {_ROUND_NAMES.get(rounding, rounding)}", "OFM_PRECISION"
            )
    if mode == "mul" and ifm2 is not None and wide != (ifm2.elem_size == 4):
        raise _unsupported(regs, "MUL of a 32-bit and a narrower operand", "IFM2_PRECISION")
    if mode == "lrelu" and wide:
        raise _unsupported(regs, "LRELU of 32-bit operands", "IFM_PRECISION")
    rescale: outstage.Rescale | alu.NegativeRescale
    if mode in ("mul", "abs") and wide:
        rescale = alu.mul32_rescale(shift, rounding)
    else:
        rescale = outstage.Rescale(scale, shift, rounding)
    if mode == "lrelu":
        rescale = alu.NegativeRescale(rescale)
    ops = {
        "mul": lambda a, b: a * b,
        "add": lambda a, b: a + b,
        "sub": lambda a, b: a - b,
        "min": np.minimum,
        "max": np.maximum,
        "abs": lambda a, b: np.abs(a),
        "lrelu": lambda a, b: a,  # alpha: the rescale of the negative values
        "clz": lambda a, b: alu.clz32(a),
        "shr": lambda a, b: alu.shift_right(a, b, rounding),
        "shl": lambda a, b: alu.shift_left(a, b),
    }
    return ops[mode], rescale


def prepare_elementwise(regs: Registers, memory: Memory) -> Step:
    op = regs.command
    mode = MODES.get(op.param)
    if mode is None:
        name = next((m.name for m in elementwise_mode if m.value == op.param), "unknown")
        raise _unsupported(regs, f"elementwise mode {name}")
    check_common(regs)
    what = f"{op.name} at command-stream offset {op.offset:#x}"
    ofm = ofm_map(regs)
    if mode not in UNSCALED and not regs.get("OFM_PRECISION") & _GLOBAL_SCALE:
        raise _unsupported(regs, "per-channel scaling of an elementwise operation", "OFM_PRECISION")
    oh, ow, oc = ofm.shape
    ifm = ifm_map(regs, oh, ow, regs.get("IFM_DEPTH_M1") + 1)
    if ifm.depth != oc:
        raise _unsupported(
            regs, f"an IFM depth {ifm.depth} other than the OFM depth {oc}", "IFM_DEPTH_M1"
        )
    broadcast = regs.get("IFM2_BROADCAST", 0)
    if broadcast & ~(_BROADCAST_H | _BROADCAST_W | _BROADCAST_C | _REVERSED | _SCALAR):
        raise _unsupported(regs, "these IFM2 broadcast bits", "IFM2_BROADCAST")
    scalar = bool(broadcast & _SCALAR)
    ifm2, value = None, np.int64(0)
    if mode in UNARY:
        pass
    elif scalar:
        signed = bool(regs.get("IFM2_PRECISION") & 1)
        raw = regs.get("IFM2_SCALAR")
        value = np.int64((signed16(raw) if signed else raw) - regs.s16("IFM2_ZERO_POINT", 0))
    else:
        ifm2 = ifm_map(
            regs,
            1 if broadcast & _BROADCAST_H else oh,
            1 if broadcast & _BROADCAST_W else ow,
            1 if broadcast & _BROADCAST_C else oc,
            name="IFM2",
        )
        ifm2.check(memory, f"{what} (IFM2)")
    ifm.check(memory, f"{what} (IFM)")
    ofm.check(memory, f"{what} (OFM)")
    operands = _operands(regs, mode, ifm)
    scale_a, scale_b = operands.functions()
    combine, rescale = _combine(regs, mode, ifm, ifm2)
    reversed_ = bool(broadcast & _REVERSED) and mode not in UNARY
    finish = output_finish(regs, ofm, memory)
    native = elementwise_kernel(
        op.param, ifm, ifm2, ofm, int(value), reversed_, operands, rescale, finish
    )

    def run(mem: Memory) -> None:  # numpy's, where the native kernel does not run
        a: np.ndarray | np.int64 = ifm.read(mem).astype(np.int64) - ifm.zero_point
        b = value if ifm2 is None else ifm2.read(mem).astype(np.int64) - ifm2.zero_point
        if reversed_:
            a, b = b, a
        acc = np.broadcast_to(combine(scale_a(a), scale_b(b)), ofm.shape)
        ofm.write(mem, finish(rescale.apply(acc, int(np.abs(acc).max(initial=0))), mem))

    ifm2_read = (
        ()
        if ifm2 is None
        else ((ifm2.region, ifm2.height * ifm2.width * ifm2.depth * ifm2.elem_size),)
    )
    record = OpRecord(
        kind=f"elementwise.{mode}",
        offset=op.offset,
        macs=0,
        bytes_read=((ifm.region, oh * ow * oc * ifm.elem_size), *ifm2_read),
        bytes_written=((ofm.region, oh * ow * oc * ofm.elem_size),),
        **feature_map_fields(regs, ifm, ofm),
        operand_scale_32bit=mode in ("add", "sub") and (regs.get("IFM_PRECISION") >> 8) & 3 != 0,
        registers=regs.values,
    )
    return Step(record, run if native is None else native)
