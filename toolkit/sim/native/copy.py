"""A strided copy in one native call (copy.c): DMA, and the runs of 1x1 pools Vela builds
transposes from (pool.ByteMap.merged_run)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..memory import Memory
from . import batch, function, run_checked

_DIMS = 4
_KERNEL = function("copy", 4 + 3 * _DIMS)


class NativeCopy:
    """Copies the elements of a strided array in one memory to one in another (or the same):
    all read before any is written, each byte through `table` when there is one."""

    def __init__(self, src_region: int, dst_region: int, words: list[int], table):
        self.desc = np.array(words, np.int64)
        self._desc_address = self.desc.ctypes.data
        self.src_region, self.dst_region = src_region, dst_region
        self.table = table
        self._table_address = 0 if table is None else table.ctypes.data

    def row(self) -> batch.Row:
        return batch.row(
            "copy", self.desc, self.src_region, None, self.dst_region, False, (self.table,)
        )

    def __call__(self, mem: Memory) -> None:
        run_checked(
            _KERNEL,  # type: ignore[arg-type]
            "a copy",
            self._desc_address,
            mem.address(self.src_region),
            mem.address(self.dst_region),
            self._table_address,
            mem.size(self.src_region),
            mem.size(self.dst_region),
        )


def copy_kernel(
    src: tuple[int, int, Sequence[int]],
    dst: tuple[int, int, Sequence[int]],
    shape: Sequence[int],
    elem_size: int,
    table: np.ndarray | None = None,
) -> NativeCopy | None:
    """The native run of a copy from src to dst, each (region, byte offset, byte strides), of
    an array of `shape` (at most four axes) with elements of elem_size bytes, or None where the
    kernels are not built (or turned off). table: the byte written for each of the 256 byte
    values read (8-bit elements only)."""
    if _KERNEL is None or len(shape) > _DIMS:
        return None
    if table is not None:
        if elem_size != 1 or table.dtype.itemsize != 1 or table.shape != (256,):
            return None
        table = np.ascontiguousarray(table).view(np.uint8)
    pad = _DIMS - len(shape)
    words = [
        src[1],
        dst[1],
        elem_size,
        int(table is not None),
        *(1,) * pad,
        *shape,
        *(0,) * pad,
        *src[2],
        *(0,) * pad,
        *dst[2],
    ]
    return NativeCopy(src[0], dst[0], words, table)
