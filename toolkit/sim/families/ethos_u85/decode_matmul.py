"""NPU_OP_CONV taking its weights from IFM2 (the parameter's bit 0), described from Ethos-U85
registers (operations.MatMul): Vela's MatMul (TOSA MATMUL, attention's Q.K^T and its product
with V). The OFM is (N, H, W): OFM height N, width H, depth W; the IFM (N, H, C) and the IFM2
(N, W, C), its depth the IFM's. One global OFM scale, accumulators from zero (no bias)."""

from __future__ import annotations

from ... import outstage
from ...operations import MatMul
from ...records import OpRecord
from ...registers import Registers
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
)


def describe_matmul(regs: Registers) -> MatMul:
    acc = regs.get("ACC_FORMAT", 0)
    if acc >> 4 & 3 or acc >> 6 & 1:
        raise refuse(regs, "a MatMul's accumulators kept or read from IFM2, or not written",
                     "ACC_FORMAT")  # fmt: skip
    k = kernel_from(regs)
    if (k.height, k.width, k.pad_top, k.pad_left, k.pad_bottom, k.pad_right) != (1, 1, 0, 0, 0, 0):
        raise refuse(regs, "a MatMul with a kernel or padding")
    if not regs.get("OFM_PRECISION") & GLOBAL_SCALE:
        raise refuse(regs, "a MatMul scaled per channel", "OFM_PRECISION")
    ofm = ofm_map(regs)
    depth = regs.get("IFM_DEPTH_M1") + 1
    ifm = feature_map(regs, "IFM", ofm.height, ofm.width, depth)
    ifm2 = feature_map(regs, "IFM2", ofm.height, ofm.depth, depth)
    scale, shift = ofm_scale(regs)
    rescale = outstage.shared_rescale(scale, shift, rounding(regs, shift=shift))
    record = OpRecord(
        kind="matmul",
        macs=int(ofm.height * ofm.width * ofm.depth * depth),
        bytes_read=(fm_bytes(ifm), fm_bytes(ifm2)),
        bytes_written=(fm_bytes(ofm),),
        **record_fields(regs, ifm, ofm),
    )
    return MatMul(label(regs), ifm, ifm2, ofm, rescale, output_finish(regs, ofm), record)
