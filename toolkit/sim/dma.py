"""NPU_OP_DMA_START: copies between regions (weights into fast scratch, feature maps), and into
the SHRAM's lookup tables (region register bit 8: internal memory, DMA0_DST a SHRAM address)."""

from __future__ import annotations

from .errors import UnsupportedError, at
from .memory import INTERNAL, Memory
from .native.copy import copy_kernel
from .records import OpRecord, Step
from .registers import Registers

_INTERNAL_BIT = 1 << 8


def prepare_dma(regs: Registers, memory: Memory) -> Step:
    op = regs.command
    what = f"{op.name} at command-stream offset {op.offset:#x}"
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
    memory.check(src_region, src, src + length, f"{what} (source)")
    if dst_reg & _INTERNAL_BIT:
        dst_region = INTERNAL
        memory.check_internal(dst, dst + length, f"{what} (destination)")

        def run(mem: Memory) -> None:
            mem.internal[dst : dst + length] = mem.regions[src_region][src : src + length]
    else:
        dst_region = dst_reg & 0xFF
        memory.check(dst_region, dst, dst + length, f"{what} (destination)")

        def run(mem: Memory) -> None:
            mem.regions[dst_region][dst : dst + length] = mem.regions[src_region][
                src : src + length
            ].copy()

    native = copy_kernel((src_region, src, (1,)), (dst_region, dst, (1,)), (length,), 1)

    record = OpRecord(
        kind="dma",
        offset=op.offset,
        macs=0,
        bytes_read=((src_region, length),),
        bytes_written=((dst_region, length),),
        registers=regs.values,
    )
    return Step(record, run if native is None else native)
