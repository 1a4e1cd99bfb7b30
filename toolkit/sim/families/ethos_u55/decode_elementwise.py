"""NPU_OP_ELEMENTWISE described from its registers (operations.Elementwise).

The parameter selects the mode (Vela's elementwise_mode: MUL 0, ADD 1, SUB 2, MIN 3, MAX 4,
LRELU 5, ABS 6, CLZ 7, SHR 8, SHL 9). The IFM2 is a feature map, broadcast along the axes
IFM2_BROADCAST bits 0-2 name, or (bit 7) the scalar IFM2_SCALAR; bit 6 reverses the operand
order. ADD/SUB scale their operands as IFM_PRECISION's scale mode (bits 8-9) selects: 16-bit
OPA_SCALE and OPB_SCALE multiply A and B; or OPA_SCALE and its shift (32-bit) scale one operand
while the other enters at 2^19, rounded by IFM_PRECISION's round mode (bits 14-15).

MUL with 32-bit operands does not apply the OFM scale's multiplier, only its shift
(alu.mul32_rescale). SHR, SHL and CLZ take 32-bit IFMs and are not scaled (Vela leaves
OFM_PRECISION's global-scale bit clear for them). MIN and MAX are not scaled at all: Vela leaves
the global-scale bit clear and OFM_SCALE at 1, shift 0 (its C++ core fuses a rescale into them
only when it is the unit scale), and sets no OPA/OPB_SCALE, which they ignore as MUL does. For
int8 TOSA graphs ExecuTorch emits them on int32 (RESCALE to int32, MAXIMUM, RESCALE back); the
rescales run as ADD and MUL operations. ABS takes the OFM scale (Vela's C++ core folds the TOSA
rescales around an int8 ABS into one OFM scale of input scale / output scale); of a 32-bit IFM
only the scale's shift applies, as Vela's C++ core says of every 32-bit elementwise operation (no
stream checks this: Vela fuses only unit scales there). LRELU's OFM scale carries alpha (Vela:
OFM_SCALE = alpha). Only Vela's legacy Python core emits LRELU, for an int16 TFLite LEAKY_RELU
with equal input and output scales (bit-exact with TFLite's reference kernel for alpha below and
above 1); Vela 5.1's C++ core, which compiles every TOSA graph, lowers leaky ReLU otherwise.
32-bit LRELU is not implemented.
"""

from __future__ import annotations

from ... import alu, outstage
from ...elementwise import BITWISE, UNARY, UNSCALED
from ...errors import UnsupportedError, at
from ...layouts import FeatureMap
from ...operations import (
    INPUT_SHIFT_8BIT,
    SCALE_16BIT,
    SCALE_OPA_32BIT,
    SCALE_OPB_32BIT,
    Elementwise,
    OperandScales,
)
from ...records import OpRecord
from ...registers import Registers, signed16
from ..accelerator_config import Accelerator
from .fields import (
    GLOBAL_SCALE,
    check_common,
    ifm_map,
    label,
    ofm_map,
    ofm_rescale,
    output_finish,
    record_fields,
    rounding,
)
from .registers import elementwise_mode

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
# IFM2_BROADCAST bits
_BROADCAST_H, _BROADCAST_W, _BROADCAST_C, _REVERSED, _SCALAR = 1, 2, 4, 1 << 6, 1 << 7
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


def _check_widths(regs: Registers, mode: str, ifm: FeatureMap, ifm2: FeatureMap | None) -> None:
    """Operand widths each mode takes."""
    wide = ifm.elem_size == 4
    if mode in BITWISE and not wide:
        raise _unsupported(
            regs, f"{mode.upper()} of {8 * ifm.elem_size}-bit operands", "IFM_PRECISION"
        )
    if mode == "mul" and ifm2 is not None and wide != (ifm2.elem_size == 4):
        raise _unsupported(regs, "MUL of a 32-bit and a narrower operand", "IFM2_PRECISION")
    if mode == "lrelu" and wide:
        raise _unsupported(regs, "LRELU of 32-bit operands", "IFM_PRECISION")


def _rescale(regs: Registers, mode: str, ifm: FeatureMap):
    """The OFM's rescale."""
    round_mode = rounding(regs)
    scale, shift = ofm_rescale(regs)
    if mode in UNSCALED:
        # Vela sets no OFM scale for these (OFM_PRECISION's global-scale bit clear): the
        # result passes unscaled, whatever OFM_SCALE still holds
        if regs.get("OFM_PRECISION") & GLOBAL_SCALE and (scale, shift) != (1, 0):
            raise _unsupported(
                regs, f"{mode.upper()} with an OFM scale ({scale}, shift {shift})", "OFM_SCALE"
            )
        scale, shift = 1, 0
        if mode == "shr" and round_mode != outstage.NATURAL:
            raise _unsupported(
                regs,
                f"SHR in round mode {_ROUND_NAMES.get(round_mode, round_mode)}",
                "OFM_PRECISION",
            )
    rescale: outstage.Rescale | alu.NegativeRescale
    if mode in ("mul", "abs") and ifm.elem_size == 4:
        rescale = alu.mul32_rescale(shift, round_mode)
    else:
        rescale = outstage.Rescale(scale, shift, round_mode)
    if mode == "lrelu":
        rescale = alu.NegativeRescale(rescale)
    return rescale


def _second_operand(regs: Registers, mode: str, ofm: FeatureMap) -> tuple[FeatureMap | None, int]:
    """The IFM2 (None: unary, or a scalar) and the scalar minus its zero point."""
    broadcast = regs.get("IFM2_BROADCAST", 0)
    if broadcast & ~(_BROADCAST_H | _BROADCAST_W | _BROADCAST_C | _REVERSED | _SCALAR):
        raise _unsupported(regs, "these IFM2 broadcast bits", "IFM2_BROADCAST")
    if mode in UNARY:
        return None, 0
    if broadcast & _SCALAR:
        signed = bool(regs.get("IFM2_PRECISION") & 1)
        raw = regs.get("IFM2_SCALAR")
        return None, (signed16(raw) if signed else raw) - regs.s16("IFM2_ZERO_POINT", 0)
    oh, ow, oc = ofm.shape
    ifm2 = ifm_map(
        regs,
        1 if broadcast & _BROADCAST_H else oh,
        1 if broadcast & _BROADCAST_W else ow,
        1 if broadcast & _BROADCAST_C else oc,
        name="IFM2",
    )
    return ifm2, 0


def describe_elementwise(regs: Registers, accelerator: Accelerator) -> Elementwise:
    op = regs.command
    mode = MODES.get(op.param)
    if mode is None:
        name = next((m.name for m in elementwise_mode if m.value == op.param), "unknown")
        raise _unsupported(regs, f"elementwise mode {name}")
    check_common(regs)
    ofm = ofm_map(regs)
    if mode not in UNSCALED and not regs.get("OFM_PRECISION") & GLOBAL_SCALE:
        raise _unsupported(regs, "per-channel scaling of an elementwise operation", "OFM_PRECISION")
    oh, ow, oc = ofm.shape
    ifm = ifm_map(regs, oh, ow, regs.get("IFM_DEPTH_M1") + 1)
    if ifm.depth != oc:
        raise _unsupported(
            regs, f"an IFM depth {ifm.depth} other than the OFM depth {oc}", "IFM_DEPTH_M1"
        )
    ifm2, scalar = _second_operand(regs, mode, ofm)
    operands = _operands(regs, mode, ifm)
    _check_widths(regs, mode, ifm, ifm2)
    rescale = _rescale(regs, mode, ifm)
    reversed_ = bool(regs.get("IFM2_BROADCAST", 0) & _REVERSED) and mode not in UNARY
    finish = output_finish(regs, ofm, accelerator)
    ifm2_read = (
        ()
        if ifm2 is None
        else ((ifm2.region, ifm2.height * ifm2.width * ifm2.depth * ifm2.elem_size),)
    )
    record = OpRecord(
        kind=f"elementwise.{mode}",
        macs=0,
        bytes_read=((ifm.region, oh * ow * oc * ifm.elem_size), *ifm2_read),
        bytes_written=((ofm.region, oh * ow * oc * ofm.elem_size),),
        **record_fields(regs, ifm, ofm),
        operand_scale_32bit=mode in ("add", "sub") and operands.mode != SCALE_16BIT,
    )
    return Elementwise(
        label(regs), mode, ifm, ifm2, scalar, reversed_, ofm, operands, rescale, finish, record
    )
