"""NPU_OP_CONV and NPU_OP_DEPTHWISE described from Ethos-U85 registers (operations.Convolution).

acc = bias + sum((ifm - IFM_ZERO_POINT) * w) over the window, w as decoded from the weight
streams (Vela has already taken the weight zero point off), then the per-channel rescale of the
scale stream with OFM_SCALE's round mode, the OFM zero point, the clip and any table lookup.
The weight streams (one per core, or one fast-format stream) are read as one span of WEIGHT_REGION
and cut apart again by the family's decode_weights (weights.py).
"""

from __future__ import annotations

from ...kernel import NO_UPSCALE
from ...operations import Convolution, MatMul, StreamAt, WeightStreams
from ...records import OpRecord
from ...registers import Registers
from ..accelerator_config import Accelerator
from ..u85_weights import scale_stream, weight_layout, weight_streams
from .decode_matmul import describe_matmul
from .fields import (
    GLOBAL_SCALE,
    feature_map,
    fm_bytes,
    kernel_from,
    label,
    ofm_map,
    output_finish,
    record_fields,
    refuse,
    rounding,
    storage,
)
from .weights import U85WeightFormat

ACC_48BIT = 1


def check_accumulators(regs: Registers) -> None:
    """Accumulators start from the bias and are written out: KEEP / IFM2 inputs and a disabled
    output (Vela's strided and non-constant-weight decompositions) are refused."""
    acc = regs.get("ACC_FORMAT", 0)
    if acc >> 4 & 3 or acc >> 6 & 1:
        raise refuse(regs, "accumulators kept or read from IFM2, or not written", "ACC_FORMAT")


def describe_conv(
    regs: Registers, accelerator: Accelerator, depthwise: bool
) -> Convolution | MatMul:
    op = regs.command
    if op.param & 1:
        return describe_matmul(regs)
    if regs.get("OFM_PRECISION") & GLOBAL_SCALE:
        raise refuse(regs, "a convolution with one global OFM scale", "OFM_PRECISION")
    check_accumulators(regs)
    k = kernel_from(regs)
    if k.upscale != NO_UPSCALE:
        raise refuse(regs, f"IFM_UPSCALE {k.upscale} on a convolution", "IFM_UPSCALE")
    ofm = ofm_map(regs)
    ifm_h, ifm_w = k.ifm_extent(ofm.height, ofm.width)
    ifm_depth = regs.get("IFM_DEPTH_M1") + 1
    if storage(regs, "IFM") > 1:
        raise refuse(regs, "a convolution's IFM chained or scalar", "IFM_PRECISION")
    ifm = feature_map(regs, "IFM", ifm_h, ifm_w, ifm_depth)
    if depthwise and ifm_depth < ofm.depth:
        raise refuse(regs, f"depthwise with IFM depth {ifm_depth} < OFM depth {ofm.depth}")
    round_mode = rounding(regs)
    layout = weight_layout(regs.values, op.name, accelerator.name)
    listed = weight_streams(regs.values, layout)
    start = min(base for _, base, _ in listed)
    end = max(base + length for _, base, length in listed)
    fmt = U85WeightFormat(layout, tuple((n, b - start, n_) for n, b, n_ in listed),
                          depthwise)  # fmt: skip
    acc48 = regs.get("ACC_FORMAT", 0) & 3 == ACC_48BIT
    w_region, s_region = (r & 7 for r in regs.required(("WEIGHT_REGION", "SCALE_REGION")))
    s_base, s_len = scale_stream(regs.values)
    stream = WeightStreams(
        StreamAt(w_region, start, end - start), StreamAt(s_region, s_base, s_len), fmt,
        ofm.depth, acc48,
    )  # fmt: skip
    macs = ofm.height * ofm.width * ofm.depth * k.elements * (1 if depthwise else ifm_depth)
    record = OpRecord(
        kind="depthwise" if depthwise else "conv",
        macs=int(macs),
        bytes_read=(
            (ifm.region, ifm_h * ifm_w * ifm_depth * ifm.elem_size),
            (w_region, sum(length for _, _, length in listed)),
            (s_region, s_len),
        ),
        bytes_written=(fm_bytes(ofm),),
        kernel=(k.height, k.width, k.stride_y, k.stride_x, k.dilation_y, k.dilation_x),
        part_kernel_first=layout.traversal == "part_kernel",
        **record_fields(regs, ifm, ofm),
    )
    finish = output_finish(regs, ofm)
    return Convolution(label(regs), ifm, ofm, k, depthwise, round_mode, finish, (stream,), record)
