"""DMA (operations.Dma): copies between regions (weights into fast scratch, feature maps), and
into the NPU's internal memory (memory.INTERNAL: lookup tables)."""

from __future__ import annotations

from .memory import INTERNAL, Memory
from .native.copy import copy_kernel
from .operations import Dma
from .records import Step


def prepare_dma(op: Dma, memory: Memory) -> Step:
    """The planned run of a DMA: both ends checked against memory, a native copy where one
    runs it."""
    what = op.label
    (src_region, src), (dst_region, dst), length = op.source, op.destination, op.length
    memory.check(src_region, src, src + length, f"{what} (source)")
    if dst_region == INTERNAL:
        memory.check_internal(dst, dst + length, f"{what} (destination)")

        def run(mem: Memory) -> None:
            mem.internal[dst : dst + length] = mem.regions[src_region][src : src + length]
    else:
        memory.check(dst_region, dst, dst + length, f"{what} (destination)")

        def run(mem: Memory) -> None:
            mem.regions[dst_region][dst : dst + length] = mem.regions[src_region][
                src : src + length
            ].copy()

    native = copy_kernel((src_region, src, (1,)), (dst_region, dst, (1,)), (length,), 1)
    return Step(op.record, run if native is None else native)
