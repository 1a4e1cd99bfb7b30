"""NPU_OP_DMA_START: copies between regions (weights into fast scratch, feature maps)."""

from __future__ import annotations

from .errors import UnsupportedError, at
from .memory import Memory
from .records import OpRecord, Step
from .registers import Registers


def prepare_dma(regs: Registers, memory: Memory) -> Step:
    op = regs.op
    what = f"{op.name} at command-stream offset {op.offset:#x}"
    src_reg, dst_reg = regs.get("DMA0_SRC_REGION"), regs.get("DMA0_DST_REGION")
    for name, value in (("DMA0_SRC_REGION", src_reg), ("DMA0_DST_REGION", dst_reg)):
        if (value >> 8) & 1:
            raise UnsupportedError(f"DMA to/from internal memory (LUT) is not implemented "
                                   f"({at(op.offset, 'NPU_SET_' + name, value)})")
        if (value >> 9) & 3:
            raise UnsupportedError(f"2D/3D DMA stride mode {(value >> 9) & 3} is not implemented "
                                   f"({at(op.offset, 'NPU_SET_' + name, value)})")
    src, dst, length = regs.get("DMA0_SRC"), regs.get("DMA0_DST"), regs.get("DMA0_LEN")
    src_region, dst_region = src_reg & 0xFF, dst_reg & 0xFF
    memory.check(src_region, src, src + length, f"{what} (source)")
    memory.check(dst_region, dst, dst + length, f"{what} (destination)")

    def run(mem: Memory) -> None:
        mem.regions[dst_region][dst:dst + length] = mem.regions[src_region][src:src + length].copy()

    record = OpRecord(kind="dma", offset=op.offset, macs=0, bytes_read=((src_region, length),),
                      bytes_written=((dst_region, length),))
    return Step(record, run)
