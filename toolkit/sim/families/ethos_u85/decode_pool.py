"""NPU_OP_POOL described from Ethos-U85 registers (operations.Pooling). The parameter selects
MAX 0, AVERAGE 1, REDUCE_SUM 2, SUM 3 (Vela's large average pools and its "AvgPool NOPs":
rescales, activations, copies, transposes), NONE 4, MIN 5, ARGMAX_X 6, ARGMAX_Y 7. AVERAGE
divides each sum by its count of taps inside the IFM, as TOSA's AVG_POOL2D does; SUM divides by
nothing (its OFM scale does what dividing there is). Then the global OFM scale.

NONE with ACC_FORMAT's input IFM2 is regor's NullPool: a RESCALE (or copy) of a 32-bit tensor
(32-bit accumulators) or a 64-bit one (48-bit: an a16w8 convolution's INT48 output kept whole),
its values loaded into the accumulators from IFM2 (the IFM, set to int8, is not read), then the
output stage, with one OFM scale or the scale stream's per channel; it runs as a 1x1 SUM of IFM2."""

from __future__ import annotations

from ... import outstage
from ...kernel import NEAREST, NO_UPSCALE
from ...operations import Pooling, StreamAt, WeightStreams
from ...records import OpRecord
from ...registers import Registers
from ..accelerator_config import Accelerator
from ..u85_weights import scale_stream
from .decode_conv import check_accumulators
from .fields import (
    GLOBAL_SCALE,
    feature_map,
    fm_bytes,
    kernel_from,
    label,
    ofm_map,
    ofm_scale,
    output_finish,
    record_fields,
    refuse,
    rounding,
    storage,
)

MODES = {0: "max", 1: "average", 2: "reduce_sum", 3: "sum"}
NONE = 4
ACC_I32, ACC_I48, ACC_INPUT_IFM2 = 0, 1, 2  # ACC_FORMAT: format bits 0-1, input bits 4-5
_NAMES = {4: "NONE", 5: "MIN", 6: "ARGMAX_X", 7: "ARGMAX_Y"}


def _null_pool_input(regs: Registers) -> str:
    """'IFM2' for a NONE pool restoring the accumulators from IFM2 (1x1, unpadded, written
    out); any other NONE pool is refused."""
    acc = regs.get("ACC_FORMAT", 0)
    k = kernel_from(regs)
    if acc >> 4 & 3 != ACC_INPUT_IFM2 or acc >> 6 & 1:
        raise refuse(regs, "pooling mode NONE other than a rescale of IFM2", "ACC_FORMAT")
    if (k.height, k.width, k.pad_top, k.pad_left, k.pad_bottom, k.pad_right) != (1, 1, 0, 0, 0, 0):
        raise refuse(regs, "pooling mode NONE with a kernel or padding")
    return "IFM2"


def _mode_and_source(regs: Registers) -> tuple[str, str]:
    """(pooling mode, the feature map it reads: IFM, or IFM2 for a NONE pool)."""
    op = regs.command
    if op.param == NONE:
        return "sum", _null_pool_input(regs)
    mode = MODES.get(op.param)
    if mode is None:
        raise refuse(regs, f"pooling mode {_NAMES.get(op.param, op.param)}")
    check_accumulators(regs)
    return mode, "IFM"


def describe_pool(regs: Registers, accelerator: Accelerator) -> Pooling:
    mode, source = _mode_and_source(regs)
    k = kernel_from(regs)
    if k.upscale not in (NO_UPSCALE, NEAREST):
        raise refuse(regs, f"IFM_UPSCALE {k.upscale} on a pool", "IFM_UPSCALE")
    if storage(regs, source) > 1:
        raise refuse(regs, "a pool's IFM chained or scalar", f"{source}_PRECISION")
    ofm = ofm_map(regs)
    ifm_h, ifm_w = k.ifm_extent(ofm.height, ofm.width)
    ifm_depth = regs.get("IFM_DEPTH_M1") + 1
    ifm = feature_map(regs, source, ifm_h, ifm_w, ifm_depth)
    if source == "IFM2" and ifm.elem_size != (4 if regs.get("ACC_FORMAT") & 3 == ACC_I32 else 8):
        raise refuse(regs, f"pooling mode NONE from a {8 * ifm.elem_size}-bit IFM2 into "
                     "other accumulators", "IFM2_PRECISION")  # fmt: skip
    per_channel = not regs.get("OFM_PRECISION") & GLOBAL_SCALE
    if per_channel and source != "IFM2":
        raise refuse(regs, "a pool scaled per channel", "OFM_PRECISION")
    padded = (k.pad_top, k.pad_left, k.pad_bottom, k.pad_right) != (0, 0, 0, 0)
    if mode == "reduce_sum" and padded:
        raise refuse(regs, "a padded reduce-sum")
    scale, shift = ofm_scale(regs)
    rescale = (
        None if per_channel else outstage.shared_rescale(scale, shift, rounding(regs, shift=shift))
    )
    depth = ofm.depth if mode != "reduce_sum" else ifm_depth
    record = OpRecord(
        kind=f"pool.{mode}",
        macs=int(ofm.height * ofm.width * depth * k.elements),
        bytes_read=((ifm.region, ifm_h * ifm_w * ifm_depth * ifm.elem_size),),
        bytes_written=(fm_bytes(ofm),),
        kernel=(k.height, k.width, k.stride_y, k.stride_x, k.dilation_y, k.dilation_x),
        **record_fields(regs, ifm, ofm),
    )
    engine_mode = "average" if mode == "sum" else mode
    divide = mode == "average"
    finish = output_finish(regs, ofm)
    pool = Pooling(label(regs), engine_mode, ifm, ofm, k, depth, rescale, divide, finish, record)
    return _scaled_per_channel(regs, pool) if per_channel else pool


def _scaled_per_channel(regs: Registers, pool: Pooling) -> Pooling:
    """A NONE pool's per-channel RESCALE: its scale stream, records as a convolution's."""
    s_base, s_len = scale_stream(regs.values)
    at = StreamAt(regs.required(("SCALE_REGION",))[0] & 7, s_base, s_len)
    acc48 = regs.get("ACC_FORMAT", 0) & 3 == ACC_I48
    streams = WeightStreams(at, at, None, pool.ofm.depth, acc48)
    return pool._replace(scales=streams, rounding=rounding(regs))
