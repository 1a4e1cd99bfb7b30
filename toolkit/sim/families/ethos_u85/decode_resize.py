"""NPU_OP_RESIZE described from Ethos-U85 registers (operations.Resize): Vela 5.2.0's
GenerateResizeOp (regor, read for the facts; /work notes section 7). The parameter is the mode:
BILINEAR 0, REPLICATE 1, NEAREST 2. Per axis, RESIZE_*_SCALE_N_M1 holds TOSA's scale_n - 1 (11
bits), RESIZE_*_OFFSET its offset (12 bits, signed), and RESIZE_*_STEP its scale_d as a whole
and a remainder of scale_n (one_step_int: parameter bits 0-3, one_step_mod: payload bits 0-10),
with the same for the step across an OFM block (blk_step_int: parameter bits 4-14, blk_step_mod:
payload bits 16-26: (block - 1) x scale_d). KERNEL_HEIGHT_M1 / KERNEL_WIDTH_M1 are the IFM rows
and columns read. The OFM scale is a shift only: 16 (the resize unit's fraction bits) plus the
shift of TOSA's power-of-two RESCALE that Vela fuses into it (BILINEAR's 1 / (n_y x n_x))."""

from __future__ import annotations

from ... import outstage
from ...operations import Resize, ResizeAxis
from ...records import OpRecord
from ...registers import Registers
from .fields import (
    GLOBAL_SCALE,
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

MODES = {0: "bilinear", 2: "nearest"}
FRACTION_BITS = 16  # where the resize unit's sum sits (GenerateResizeOp: "shift + 16")
_NAMES = {1: "REPLICATE"}


def _signed12(value: int) -> int:
    value &= 0xFFF
    return value - 0x1000 if value & 0x800 else value


def _axis(regs: Registers, axis: str, block: int) -> ResizeAxis:
    """One axis's scale_n, step and offset; refused unless its block step is (block - 1) x
    the step (what the hardware advances by across OFM blocks, as TOSA's formula does)."""
    step_register = f"RESIZE_{axis}_STEP"
    n_m1, offset, payload = regs.required(
        (f"RESIZE_{axis}_SCALE_N_M1", f"RESIZE_{axis}_OFFSET", step_register)
    )
    n = (n_m1 & 0x7FF) + 1
    param = regs.cmd1_param(step_register)
    one_int, one_mod = param & 0xF, payload & 0x7FF
    blk_int, blk_mod = param >> 4 & 0x7FF, payload >> 16 & 0x7FF
    step = one_int * n + one_mod
    if one_mod >= n or blk_mod >= n or blk_int * n + blk_mod != (block - 1) * step:
        raise refuse(regs, f"a RESIZE {axis} step whose parts disagree (scale_n {n}, one step "
                     f"{one_int}+{one_mod}/n, block step {blk_int}+{blk_mod}/n for a block of "
                     f"{block})", step_register)  # fmt: skip
    return ResizeAxis(n, step, _signed12(offset))


def describe_resize(regs: Registers) -> Resize:
    mode = MODES.get(regs.command.param & 3)
    if mode is None:
        name = _NAMES.get(regs.command.param & 3, str(regs.command.param))
        raise refuse(regs, f"RESIZE mode {name}")
    if regs.get("IFM_UPSCALE", 0) & 3:
        raise refuse(regs, "a RESIZE of an upscaled IFM", "IFM_UPSCALE")
    if storage(regs, "IFM") > 1:
        raise refuse(regs, "a RESIZE of a chained or scalar IFM", "IFM_PRECISION")
    if not regs.get("OFM_PRECISION") & GLOBAL_SCALE:
        raise refuse(regs, "a RESIZE scaled per channel", "OFM_PRECISION")
    ofm = ofm_map(regs)
    height_m1, width_m1, depth_m1 = regs.required(
        ("KERNEL_HEIGHT_M1", "KERNEL_WIDTH_M1", "IFM_DEPTH_M1")
    )
    ifm = feature_map(regs, "IFM", height_m1 + 1, width_m1 + 1, depth_m1 + 1)
    if ifm.depth != ofm.depth or ifm.elem_size > 2:
        raise refuse(regs, f"a RESIZE of {ifm.depth} {8 * ifm.elem_size}-bit channels into "
                     f"{ofm.depth}", "IFM_PRECISION")  # fmt: skip
    scale, shift = ofm_scale(regs)
    if shift < FRACTION_BITS:
        raise refuse(regs, f"a RESIZE OFM shift of {shift}, below the {FRACTION_BITS} fraction "
                     "bits", "OFM_SCALE")  # fmt: skip
    record = OpRecord(
        kind="resize",
        macs=0,
        bytes_read=(fm_bytes(ifm),),
        bytes_written=(fm_bytes(ofm),),
        **record_fields(regs, ifm, ofm),
    )
    block_width = regs.get("OFM_BLK_WIDTH_M1", 0) + 1
    block_height = regs.get("OFM_BLK_HEIGHT_M1", 0) + 1
    return Resize(
        label(regs),
        mode,
        ifm,
        ofm,
        _axis(regs, "Y", block_height),
        _axis(regs, "X", block_width),
        FRACTION_BITS,
        outstage.shared_rescale(scale, shift, rounding(regs, shift=shift)),
        output_finish(regs, ofm),
        record,
    )
