"""NPU_OP_POOL: max, average and reduce-sum (the 1x1 average pools Vela uses for transposes too)."""

from __future__ import annotations

import numpy as np

from . import outstage
from .conv import block_of, check_common
from .errors import UnsupportedError, at
from .kernel import kernel_from
from .layouts import ifm_map, ofm_map
from .memory import Memory
from .records import OpRecord
from .registers import Registers

MODES = {0: "max", 1: "average", 2: "reduce_sum"}
_EMPTY = np.iinfo(np.int64).min // 4  # below any IFM value: padding never wins a max


def run_pool(regs: Registers, memory: Memory) -> OpRecord:
    check_common(regs)
    op = regs.op
    what = f"{op.name} at command-stream offset {op.offset:#x}"
    mode = MODES.get(op.param)
    if mode is None:
        raise UnsupportedError(f"pooling mode {op.param} is not implemented "
                               f"({at(op.offset, op.name, op.param)})")
    ofm = ofm_map(regs)
    k = kernel_from(regs)
    ifm_h, ifm_w = k.ifm_extent(ofm.height, ofm.width)
    ifm_depth = regs.get("IFM_DEPTH_M1") + 1
    ifm = ifm_map(regs, ifm_h, ifm_w, ifm_depth)
    global_scale = bool(regs.get("OFM_PRECISION") & (1 << 8))
    padded = (k.pad_top, k.pad_left, k.pad_bottom, k.pad_right) != (0, 0, 0, 0)
    if mode != "max" and not global_scale:
        raise UnsupportedError(
            f"{mode} pooling with per-channel scaling (padded average pool) is not implemented "
            f"(in {at(op.offset, 'NPU_SET_OFM_PRECISION', regs.get('OFM_PRECISION'))})")
    if mode == "reduce_sum" and padded:
        raise UnsupportedError(f"padded reduce-sum is not implemented ({what})")
    depth = ofm.depth if mode != "reduce_sum" else ifm_depth
    x = ifm.read(memory, f"{what} (IFM)").astype(np.int64) - ifm.zero_point
    if mode == "max":
        win = k.windows(x[..., :depth], _EMPTY, ofm.height, ofm.width)
        acc = win.max(axis=(2, 3))
    elif mode == "average":
        acc = k.windows(x[..., :depth], 0, ofm.height, ofm.width).sum(axis=(2, 3))
    else:
        acc = k.windows(x, 0, ofm.height, ofm.width).sum(axis=(2, 3, 4))[..., None]
    if global_scale:
        scale, shift = regs.get("OFM_SCALE"), regs.cmd1_param("OFM_SCALE") & 0x3F
        acc = outstage.scale_acc(acc, scale, shift, regs.get("OFM_PRECISION") >> 14)
    out = outstage.finish(acc, ofm.zero_point, regs.s16("ACTIVATION_MIN", -32768),
                          regs.s16("ACTIVATION_MAX", 32767), ofm.dtype)
    ofm.write(memory, out, f"{what} (OFM)")
    return OpRecord(
        kind=f"pool.{mode}", offset=op.offset,
        macs=int(ofm.height * ofm.width * depth * k.elements),
        bytes_read=((ifm.region, x.size * ifm.elem_size),),
        bytes_written=((ofm.region, out.size * ofm.elem_size),),
        ofm_shape=(ofm.height, ofm.width, ofm.depth), ifm_depth=ifm_depth,
        kernel=(k.height, k.width, k.stride_y, k.stride_x, k.dilation_y, k.dilation_x),
        block=block_of(regs), ifm_elem_size=ifm.elem_size, ofm_elem_size=ofm.elem_size,
        activation=regs.get("ACTIVATION", 0) & 0xFFF, acc_40bit=regs.get("ACC_FORMAT", 0) == 1)
