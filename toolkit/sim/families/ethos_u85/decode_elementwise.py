"""NPU_OP_ELEMENTWISE described from Ethos-U85 registers (operations.Elementwise).

Each operand is rescaled by its own scale register first (IFM_SCALE, IFM2_SCALE: scale, shift
and round mode), then combined (the parameter: MUL 0, ADD 1, SUB 2, MIN 3, MAX 4, ABS 6 run;
LRELU, CLZ, the shifts, DIV, the comparisons and the bitwise modes are refused), then OFM_SCALE,
the OFM zero point, the clip and any table lookup. An operand is a feature map (in memory or a
chaining buffer), broadcast along the axes its BROADCAST register names (H 1, W 2, C 4), or the
scalar OP_SCALAR (broadcast mode SCALAR 8, storage NONE).
"""

from __future__ import annotations

from ... import outstage
from ...layouts import FeatureMap
from ...operations import SCALE_EACH, Elementwise, OperandScales
from ...records import OpRecord
from ...registers import Registers
from ..accelerator_config import Accelerator
from .fields import (
    STORAGE_NONE,
    feature_map,
    fm_bytes,
    label,
    ofm_map,
    ofm_scale,
    output_finish,
    record_fields,
    refuse,
    rounding,
    storage,
)

MODES = {0: "mul", 1: "add", 2: "sub", 3: "min", 4: "max", 6: "abs"}
_SCALAR = 8
_NAMES = {5: "LRELU", 7: "CLZ", 8: "SHR", 9: "SHL", 10: "LSR", 11: "DIV", 16: "CMP_EQ",
          17: "CMP_NE", 18: "CMP_GE", 19: "CMP_GT", 33: "AND", 34: "OR", 35: "XOR", 36: "NOT",
          42: "AND_NOT"}  # fmt: skip


def _operand(regs: Registers, name: str, shape: tuple[int, int, int]) -> FeatureMap | None:
    """IFM or IFM2 with its broadcast axes of size 1; None: the scalar."""
    broadcast = regs.get(f"{name}_BROADCAST", 0)
    if broadcast == _SCALAR or storage(regs, name) == STORAGE_NONE:
        return None
    if broadcast > 7:
        raise refuse(regs, f"{name} broadcast mode {broadcast}", f"{name}_BROADCAST")
    h, w, c = shape
    return feature_map(regs, name, 1 if broadcast & 1 else h, 1 if broadcast & 2 else w,
                       1 if broadcast & 4 else c)  # fmt: skip


def _scale(regs: Registers, name: str) -> outstage.Rescale:
    scale = regs.values.get(name, 1) & 0x7FFFFFFF
    shift = regs.cmd1_param(name) & 0x3F
    return outstage.shared_rescale(scale, shift, rounding(regs, name, shift))


def describe_elementwise(regs: Registers, accelerator: Accelerator) -> Elementwise:
    op = regs.command
    mode = MODES.get(op.param)
    if mode is None:
        raise refuse(regs, f"elementwise mode {_NAMES.get(op.param, op.param)}")
    ofm = ofm_map(regs)
    ifm = _operand(regs, "IFM", ofm.shape)
    ifm2 = None if mode == "abs" else _operand(regs, "IFM2", ofm.shape)
    scalar, reversed_ = 0, False
    if ifm is None:  # the scalar is the first operand: swap
        if ifm2 is None:
            raise refuse(regs, "an elementwise operation of two scalars")
        ifm, ifm2, reversed_ = ifm2, None, True
        scalar = _scalar(regs, "IFM")
        operands = OperandScales(SCALE_EACH, rescale=_scale(regs, "IFM2_SCALE"),
                                 rescale_b=_scale(regs, "IFM_SCALE"))  # fmt: skip
    else:
        if ifm2 is None and mode != "abs":
            scalar = _scalar(regs, "IFM2")
        operands = OperandScales(SCALE_EACH, rescale=_scale(regs, "IFM_SCALE"),
                                 rescale_b=_scale(regs, "IFM2_SCALE"))  # fmt: skip
    scale, shift = ofm_scale(regs)
    rescale = outstage.shared_rescale(scale, shift, rounding(regs, shift=shift))
    reads = [fm_bytes(ifm)] + ([] if ifm2 is None else [fm_bytes(ifm2)])
    record = OpRecord(
        kind=f"elementwise.{mode}",
        macs=0,
        bytes_read=tuple(reads),
        bytes_written=(fm_bytes(ofm),),
        **record_fields(regs, ifm, ofm),
    )
    finish = output_finish(regs, ofm)
    return Elementwise(label(regs), mode, ifm, ifm2, scalar, reversed_, ofm, operands, rescale,
                       finish, record)  # fmt: skip


def _scalar(regs: Registers, name: str) -> int:
    """OP_SCALAR minus the operand's zero point."""
    value = regs.get("OP_SCALAR")
    value = value - (1 << 32) if value & 1 << 31 else value
    zero_point = regs.get(f"{name}_ZERO_POINT", 0)
    return value - (zero_point - 0x10000 if zero_point & 0x8000 else zero_point)
