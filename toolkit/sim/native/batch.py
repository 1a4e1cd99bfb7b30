"""Consecutive native operations in one call (module.c's run_batch).

After a program's first run, every native operation whose arguments no longer change (its
description, and for a convolution the weights and scales it read from a region that nothing
writes) is a row of int64 words; a run of such operations is one call, with the addresses of the
run's memory regions: a Python call per operation cost more than a small operation's work.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ..memory import INTERNAL, Memory
from . import function

ROW_WORDS = 11  # kernel, description, IFM, IFM2, OFM and LUT memory slots, five stream arrays
KERNEL_IDS = {"conv": 0, "elementwise": 1, "pool": 2}
MEMORY_SLOTS = 9  # regions 0-7, then the SHRAM
_SHRAM_SLOT = 8
_RUN = function("run_batch", ROW_WORDS)


def memory_slot(region: int) -> int:
    """Where run_batch finds a region's address (memory.INTERNAL, the SHRAM, last)."""
    return _SHRAM_SLOT if region == INTERNAL else region


def row(
    kernel: str,
    desc: np.ndarray,
    ifm: int,
    ifm2: int | None,
    ofm: int,
    reads_lut: bool,
    streams: Sequence[int] = (0, 0, 0, 0, 0),
) -> list[int]:
    """One operation's row: its kernel, the address of its description, its regions (None: no
    IFM2) and, for a convolution, the addresses of its weights, bias, scale, shift and right."""
    return [
        KERNEL_IDS[kernel],
        desc.ctypes.data,
        memory_slot(ifm),
        -1 if ifm2 is None else memory_slot(ifm2),
        memory_slot(ofm),
        _SHRAM_SLOT if reads_lut else -1,
        *streams,
    ]


class NativeBatch:
    """Operations run in turn by one native call. Holds the objects its rows point into."""

    def __init__(self, rows: list[list[int]], owners: list[object]):
        self.table = np.array(rows, np.int64).reshape(-1, ROW_WORDS)
        self._address, self._count = self.table.ctypes.data, len(rows)
        slots = sorted({slot for r in rows for slot in r[2:6] if slot >= 0})
        self._regions = tuple((s, INTERNAL if s == _SHRAM_SLOT else s) for s in slots)
        self._owners = owners  # descriptions and decoded streams: alive while the rows are

    def __call__(self, mem: Memory) -> None:
        memory = [0] * MEMORY_SLOTS
        for slot, region in self._regions:
            memory[slot] = mem.address(region)
        _RUN(self._address, self._count, *memory)  # type: ignore[misc]


def batched(runs: Sequence[Callable[[Memory], None]]) -> list[Callable[[Memory], None]]:
    """The runs, each stretch of two or more that give a row (a `row()` method that does not
    return None) as one NativeBatch. As they are where run_batch is not built."""
    if _RUN is None:
        return list(runs)
    out: list[Callable[[Memory], None]] = []
    stretch: list[tuple[Callable, list[int]]] = []

    def close() -> None:
        if len(stretch) > 1:
            out.append(NativeBatch([r for _, r in stretch], [run for run, _ in stretch]))
        else:
            out.extend(run for run, _ in stretch)
        stretch.clear()

    for run in runs:
        made = getattr(run, "row", None)
        found = made() if made is not None else None
        if found is None:
            close()
            out.append(run)
        else:
            stretch.append((run, found))
    close()
    return out
