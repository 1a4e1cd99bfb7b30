"""NPU_OP_DMA_START described from its registers (operations.Dma): DMA0_SRC, DMA0_DST and
DMA0_LEN, in the regions DMA0_SRC_REGION and DMA0_DST_REGION name (bits 0-7); a region register
with bit 8 set names the SHRAM (internal memory: DMA0_DST a SHRAM address, where Vela puts
lookup tables); bits 9-10 a 2D/3D stride mode, not implemented."""

from __future__ import annotations

from ...errors import UnsupportedError, at
from ...memory import INTERNAL
from ...operations import Dma
from ...records import OpRecord
from ...registers import Registers
from .fields import label

_INTERNAL_BIT = 1 << 8


def describe_dma(regs: Registers) -> Dma:
    op = regs.command
    src_reg, dst_reg = regs.get("DMA0_SRC_REGION"), regs.get("DMA0_DST_REGION")
    for name, value in (("DMA0_SRC_REGION", src_reg), ("DMA0_DST_REGION", dst_reg)):
        if (value >> 9) & 3:
            raise UnsupportedError(
                f"2D/3D DMA stride mode {(value >> 9) & 3} is not implemented "
                f"({at(op.offset, 'NPU_SET_' + name, value)})"
            )
    if src_reg & _INTERNAL_BIT:
        # the simulator keeps only the lookup tables of the SHRAM, not what operations buffer
        raise UnsupportedError(
            f"DMA from internal memory (SHRAM) is not implemented "
            f"({at(op.offset, 'NPU_SET_DMA0_SRC_REGION', src_reg)})"
        )
    src, dst, length = regs.get("DMA0_SRC"), regs.get("DMA0_DST"), regs.get("DMA0_LEN")
    src_region = src_reg & 0xFF
    dst_region = INTERNAL if dst_reg & _INTERNAL_BIT else dst_reg & 0xFF
    record = OpRecord(
        kind="dma",
        offset=op.offset,
        macs=0,
        bytes_read=((src_region, length),),
        bytes_written=((dst_region, length),),
        registers=regs.values,
    )
    return Dma(label(regs), (src_region, src), (dst_region, dst), length, record)
