"""NPU_OP_POOL described from its registers (operations.Pooling): its parameter selects max (0),
average (1) or reduce-sum (2); OFM_PRECISION's global-scale bit applies OFM_SCALE. A padded
average pool divides by its count of taps inside the IFM (pool.py). Without the global-scale bit
(per-channel scaling, what Vela 3.x selects for a padded average pool, with the IFM and OFM zero
points 0 when their quantizations are equal) there is no OFM scale: the NPU divides by the count
of taps itself. pool.py's division (the reciprocal of the count, rounded) then equals TFLite's
reference average pool, which rounds half away from zero: on every int8 sum for counts up to 256,
and tests/sim/test_vela3_average_pool.py checks streams against those kernels."""

from __future__ import annotations

from ... import outstage
from ...errors import UnsupportedError, at
from ...kernel import NEAREST, NO_UPSCALE
from ...operations import Pooling
from ...records import OpRecord
from ...registers import Registers
from ..accelerator_config import Accelerator
from .fields import (
    GLOBAL_SCALE,
    check_common,
    ifm_map,
    kernel_from,
    label,
    ofm_map,
    ofm_rescale,
    output_finish,
    record_fields,
    rounding,
)

MODES = {0: "max", 1: "average", 2: "reduce_sum"}


def describe_pool(regs: Registers, accelerator: Accelerator) -> Pooling:
    check_common(regs, (NO_UPSCALE, NEAREST))
    op = regs.command
    what = label(regs)
    mode = MODES.get(op.param)
    if mode is None:
        raise UnsupportedError(
            f"pooling mode {op.param} is not implemented ({at(op.offset, op.name, op.param)})"
        )
    ofm = ofm_map(regs)
    k = kernel_from(regs)
    ifm_h, ifm_w = k.ifm_extent(ofm.height, ofm.width)
    ifm_depth = regs.get("IFM_DEPTH_M1") + 1
    ifm = ifm_map(regs, ifm_h, ifm_w, ifm_depth)
    global_scale = bool(regs.get("OFM_PRECISION") & GLOBAL_SCALE)
    padded = (k.pad_top, k.pad_left, k.pad_bottom, k.pad_right) != (0, 0, 0, 0)
    if mode == "reduce_sum" and not global_scale:
        raise UnsupportedError(
            f"{mode} pooling with per-channel scaling is not implemented "
            f"(in {at(op.offset, 'NPU_SET_OFM_PRECISION', regs.get('OFM_PRECISION'))})"
        )
    if mode == "reduce_sum" and padded:
        raise UnsupportedError(f"padded reduce-sum is not implemented ({what})")
    depth = ofm.depth if mode != "reduce_sum" else ifm_depth
    rescale = outstage.shared_rescale(*ofm_rescale(regs), rounding(regs)) if global_scale else None
    finish = output_finish(regs, ofm, accelerator)
    record = OpRecord(
        kind=f"pool.{mode}",
        macs=int(ofm.height * ofm.width * depth * k.elements),
        bytes_read=((ifm.region, ifm_h * ifm_w * ifm_depth * ifm.elem_size),),
        bytes_written=((ofm.region, ofm.height * ofm.width * ofm.depth * ofm.elem_size),),
        kernel=(k.height, k.width, k.stride_y, k.stride_x, k.dilation_y, k.dilation_x),
        **record_fields(regs, ifm, ofm),
        acc_40bit=regs.get("ACC_FORMAT", 0) == 1,
    )
    divide = mode == "average" and (padded or not global_scale)
    return Pooling(what, mode, ifm, ofm, k, depth, rescale, divide, finish, record)
