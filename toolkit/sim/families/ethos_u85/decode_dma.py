"""NPU_OP_DMA_START described from Ethos-U85 registers (operations.Dma): a 1-D copy of DMA0_LEN
bytes from DMA0_SRC to DMA0_DST in the regions DMA0_SRC/DST_REGION name (bits 0-2); region mode
INTERNAL (bit 8) on the destination is the LUT memory (Vela's LUT DMAs). 2-D and 3-D stride modes
and indexed (gather/scatter) DMAs are refused."""

from __future__ import annotations

from ...memory import INTERNAL
from ...operations import Dma
from ...records import OpRecord
from ...registers import Registers
from .fields import label, refuse

_INTERNAL_BIT = 1 << 8


def _address(regs: Registers, name: str) -> int:
    return regs.get(name) | (regs.cmd1_param(name) & 0xFF) << 32


def describe_dma(regs: Registers) -> Dma:
    src_reg, dst_reg = regs.get("DMA0_SRC_REGION"), regs.get("DMA0_DST_REGION")
    for name, value in (("DMA0_SRC_REGION", src_reg), ("DMA0_DST_REGION", dst_reg)):
        if value >> 9 & 3:
            raise refuse(regs, f"a {(value >> 9 & 3) + 1}-D DMA", name)
        if value >> 11 & 1:
            raise refuse(regs, "an indexed (gather/scatter) DMA", name)
    if src_reg & _INTERNAL_BIT:
        raise refuse(regs, "a DMA from internal memory", "DMA0_SRC_REGION")
    src, dst = _address(regs, "DMA0_SRC"), _address(regs, "DMA0_DST")
    length = _address(regs, "DMA0_LEN")
    src_region = src_reg & 7
    dst_region = INTERNAL if dst_reg & _INTERNAL_BIT else dst_reg & 7
    record = OpRecord(
        kind="dma",
        offset=regs.command.offset,
        macs=0,
        bytes_read=((src_region, length),),
        bytes_written=((dst_region, length),),
        registers=regs.values,
    )
    return Dma(label(regs), (src_region, src), (dst_region, dst), length, record)
