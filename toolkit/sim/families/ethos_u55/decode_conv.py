"""NPU_OP_CONV and NPU_OP_DEPTHWISE described from their registers (operations.Convolution).

Each core reads a weight and a scale stream of its own (WEIGHT_*/SCALE_* for core 0, WEIGHT1_*/
SCALE1_* for core 1, one region for both) holding OFM channels c, c + cores, ... (Vela's
core_deinterleave), its weights encoded for its share of each OFM block; a core with no channel
has no stream.
"""

from __future__ import annotations

from ...errors import UnsupportedError, at
from ...kernel import NEAREST, NO_UPSCALE, TRANSPOSE
from ...operations import Convolution, StreamAt, WeightStreams
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
    output_finish,
    part_kernel_first,
    record_fields,
    rounding,
)
from .weights import WeightFormat

# per core: its weight and scale streams
_STREAMS = tuple(
    (f"WEIGHT{n}_BASE", f"WEIGHT{n}_LENGTH", f"SCALE{n}_BASE", f"SCALE{n}_LENGTH")
    for n in ("", "1")
)


def describe_conv(regs: Registers, accelerator: Accelerator, depthwise: bool) -> Convolution:
    check_common(regs, (NO_UPSCALE, NEAREST, TRANSPOSE))
    op = regs.command
    what = label(regs)
    ofm = ofm_map(regs)
    if regs.get("OFM_PRECISION") & GLOBAL_SCALE:
        precision = regs.get("OFM_PRECISION")
        raise UnsupportedError(
            f"global scale on a convolution is not implemented (in "
            f"{at(op.offset, 'NPU_SET_OFM_PRECISION', precision)})"
        )
    k = kernel_from(regs)
    ifm_h, ifm_w = k.ifm_extent(ofm.height, ofm.width)
    ifm_depth = regs.get("IFM_DEPTH_M1") + 1
    ifm = ifm_map(regs, ifm_h, ifm_w, ifm_depth)
    if depthwise and ifm_depth < ofm.depth:
        raise UnsupportedError(
            f"{what}: depthwise with IFM depth {ifm_depth} < OFM depth "
            f"{ofm.depth} is not implemented"
        )
    iu, ou = accelerator.ublock_depths
    fmt = WeightFormat(
        ofm_depth=ofm.depth,
        kernel_height=k.height,
        kernel_width=k.width,
        ifm_depth=1 if depthwise else ifm_depth,
        ofm_block_depth=regs.get("OFM_BLK_DEPTH_M1") + 1,
        depthwise=depthwise,
        part_kernel_first=part_kernel_first(regs) and not depthwise,
        ifm_bits=8 * ifm.elem_size,
        dilation_y=k.dilation_y,
        dilation_x=k.dilation_x,
        ifm_ublock_depth=iu,
        ofm_ublock_depth=ou,
    )
    finish = output_finish(regs, ofm, accelerator)
    streams = _streams(regs, accelerator.cores, fmt)
    macs = ofm.height * ofm.width * ofm.depth * k.elements * (1 if depthwise else ifm_depth)
    record = OpRecord(
        kind="depthwise" if depthwise else "conv",
        macs=int(macs),
        bytes_read=(
            (ifm.region, ifm_h * ifm_w * ifm_depth * ifm.elem_size),
            (streams[0].weights.region, sum(s.weights.length for s in streams)),
            (streams[0].scales.region, sum(s.scales.length for s in streams)),
        ),
        bytes_written=((ofm.region, ofm.height * ofm.width * ofm.depth * ofm.elem_size),),
        kernel=(k.height, k.width, k.stride_y, k.stride_x, k.dilation_y, k.dilation_x),
        **record_fields(regs, ifm, ofm),
        acc_40bit=regs.get("ACC_FORMAT", 0) == 1,
        part_kernel_first=fmt.part_kernel_first,
    )
    return Convolution(what, ifm, ofm, k, depthwise, rounding(regs), finish, streams, record)


def _streams(regs: Registers, cores: int, fmt: WeightFormat) -> tuple[WeightStreams, ...]:
    """Each core's weight and scale stream, and the format its weights decode with."""
    w_region, s_region = (r & 7 for r in regs.required(("WEIGHT_REGION", "SCALE_REGION")))
    streams = []
    for core in range(min(cores, fmt.ofm_depth, fmt.ofm_block_depth)):
        w_base, w_len, s_base, s_len = regs.required(_STREAMS[core])
        channels = len(range(core, fmt.ofm_depth, cores))
        block = -(-(fmt.ofm_block_depth - core) // cores)
        streams.append(
            WeightStreams(
                StreamAt(w_region, w_base, w_len),
                StreamAt(s_region, s_base, s_len),
                fmt._replace(ofm_depth=channels, ofm_block_depth=block),
                channels,
            )
        )
    return tuple(streams)
