"""NPU_OP_CONV and NPU_OP_DEPTHWISE: acc = bias + sum((ifm - zp) * w), then the output stage."""

from __future__ import annotations

import numpy as np

from . import outstage
from .errors import UnsupportedError, at
from .kernel import kernel_from
from .layouts import ifm_map, ofm_map
from .memory import Memory
from .records import OpRecord
from .registers import Registers
from .weights import WeightFormat, decode_scales, decode_weights, ublock_depths


def check_common(regs: Registers) -> None:
    """Modes the output stage and IFM fetch do not implement stop here, never silently."""
    op = regs.op
    checks = (
        ("IFM_UPSCALE", regs.get("IFM_UPSCALE", 0) & 3, 0),
        ("ACTIVATION", regs.get("ACTIVATION", 0) & 0xFFF, 0),
        ("ACTIVATION clip range", regs.get("ACTIVATION", 0) >> 12, 0),
        ("PARALLEL_MODE", regs.get("PARALLEL_MODE", 0), 0),
    )
    for name, value, supported in checks:
        if value != supported:
            raise UnsupportedError(f"{name} = {value} is not implemented by the simulator "
                                   f"(in {at(op.offset, op.name, op.param)})")
    if regs.get("ACC_FORMAT", 0) == 2:
        raise UnsupportedError("ACC_FORMAT = 2 (fp s5.10) is not implemented by the simulator "
                               f"(in {at(op.offset, op.name, op.param)})")


def run_conv(regs: Registers, memory: Memory, accelerator: str, depthwise: bool) -> OpRecord:
    check_common(regs)
    op = regs.op
    what = f"{op.name} at command-stream offset {op.offset:#x}"
    ofm = ofm_map(regs)
    if regs.get("OFM_PRECISION") & (1 << 8):
        raise UnsupportedError(f"global scale on a convolution is not implemented (in "
                               f"{at(op.offset, 'NPU_SET_OFM_PRECISION', regs.get('OFM_PRECISION'))})")
    k = kernel_from(regs)
    ifm_h, ifm_w = k.ifm_extent(ofm.height, ofm.width)
    ifm_depth = regs.get("IFM_DEPTH_M1") + 1
    ifm = ifm_map(regs, ifm_h, ifm_w, ifm_depth)
    if depthwise and ifm_depth < ofm.depth:
        raise UnsupportedError(f"{what}: depthwise with IFM depth {ifm_depth} < OFM depth "
                               f"{ofm.depth} is not implemented")
    x = ifm.read(memory, f"{what} (IFM)").astype(np.int64) - ifm.zero_point

    w_region = regs.get("WEIGHT_REGION") & 7
    w_base, w_len = regs.get("WEIGHT_BASE"), regs.get("WEIGHT_LENGTH")
    s_region = regs.get("SCALE_REGION") & 7
    s_base, s_len = regs.get("SCALE_BASE"), regs.get("SCALE_LENGTH")
    stream = memory.read_bytes(w_region, w_base, w_len, f"{what} (weights)").tobytes()
    scales = memory.read_bytes(s_region, s_base, s_len, f"{what} (scales)")
    iu, ou = ublock_depths(accelerator)
    fmt = WeightFormat(
        ofm_depth=ofm.depth, kernel_height=k.height, kernel_width=k.width,
        ifm_depth=1 if depthwise else ifm_depth, ofm_block_depth=regs.get("OFM_BLK_DEPTH_M1") + 1,
        depthwise=depthwise, part_kernel_first=k.part_kernel_first and not depthwise,
        ifm_bits=8 * ifm.elem_size, dilation_y=k.dilation_y, dilation_x=k.dilation_x,
        ifm_ublock_depth=iu, ofm_ublock_depth=ou)
    w = decode_weights(stream, fmt)  # (O, KH, KW, I)
    bias, scale, shift = decode_scales(scales, ofm.depth, f"{what} (scales)")

    win = k.windows(x, 0, ofm.height, ofm.width)  # (OH, OW, KH, KW, C)
    if depthwise:
        win = win[..., : ofm.depth]
        acc = np.einsum("hwijc,ijc->hwc", win.astype(np.float64),
                        w[..., 0].transpose(1, 2, 0).astype(np.float64), optimize=True)
        macs = ofm.height * ofm.width * ofm.depth * k.elements
    else:
        cols = win.reshape(ofm.height * ofm.width, -1).astype(np.float64)
        acc = cols @ w.transpose(1, 2, 3, 0).reshape(-1, ofm.depth).astype(np.float64)
        acc = acc.reshape(ofm.height, ofm.width, ofm.depth)
        macs = ofm.height * ofm.width * ofm.depth * k.elements * ifm_depth
    # Exact: |sum| < 2^53 for 16-bit activations, 9-bit weights and any kernel the NPU takes.
    acc = np.rint(acc).astype(np.int64) + bias
    out = outstage.scale_acc(acc, scale, shift, regs.get("OFM_PRECISION") >> 14)
    out = outstage.finish(out, ofm.zero_point, regs.s16("ACTIVATION_MIN", -32768),
                          regs.s16("ACTIVATION_MAX", 32767), ofm.dtype)
    ofm.write(memory, out, f"{what} (OFM)")
    return OpRecord(
        kind="depthwise" if depthwise else "conv", offset=op.offset, macs=int(macs),
        bytes_read=((ifm.region, x.size * ifm.elem_size), (w_region, w_len), (s_region, s_len)),
        bytes_written=((ofm.region, out.size * ofm.elem_size),),
        ofm_shape=(ofm.height, ofm.width, ofm.depth), ifm_depth=ifm_depth,
        kernel=(k.height, k.width, k.stride_y, k.stride_x, k.dilation_y, k.dilation_x),
        block=block_of(regs), ifm_elem_size=ifm.elem_size, ofm_elem_size=ofm.elem_size,
        activation=regs.get("ACTIVATION", 0) & 0xFFF, acc_40bit=regs.get("ACC_FORMAT", 0) == 1,
        part_kernel_first=fmt.part_kernel_first)


def block_of(regs: Registers) -> tuple[int, int, int]:
    return (regs.get("OFM_BLK_HEIGHT_M1", 0) + 1, regs.get("OFM_BLK_WIDTH_M1", 0) + 1,
            regs.get("OFM_BLK_DEPTH_M1", 0) + 1)
