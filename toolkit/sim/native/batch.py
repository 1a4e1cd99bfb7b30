"""Consecutive native operations in one call (module.c's run_batch).

After a program's first run, every native operation is a Row: its description, and for a
convolution the weights and scales of that run, behind check rows that compare the streams'
bytes in memory with them where operations write that memory (Vela DMAs streams into scratch).
A stretch of rows is one call, with the addresses of the run's memory regions (a Python call per
operation takes longer than a small operation's work; an evaluation over a data set runs them
thousands of times). A check that fails stops the call; the
operations from there on run another way (their planned steps, which decode what they find).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple

import numpy as np

from ..errors import RegionError
from ..memory import INTERNAL, Memory
from . import function

ROW_WORDS = 11  # kernel, IFM, IFM2, OFM and LUT memory slots, description, five arrays
ROW_ARRAYS = 5
KERNEL_IDS = {"conv": 0, "elementwise": 1, "pool": 2, "copy": 3}
_CHECK = 4
MEMORY_SLOTS = 9  # regions 0-7, then the SHRAM
_SHRAM_SLOT = 8
_CHECK_WORDS = 2  # offset, length
_RUN = function("run_batch", ROW_WORDS, check=_CHECK_WORDS)


def memory_slot(region: int) -> int:
    """Where run_batch finds a region's address (memory.INTERNAL, the SHRAM, last)."""
    return _SHRAM_SLOT if region == INTERNAL else region


def slot_regions(slots: Iterable[int]) -> tuple[tuple[int, int], ...]:
    """(memory slot, region) of each slot used (slots: any number of each, -1 for none)."""
    return tuple((s, INTERNAL if s == _SHRAM_SLOT else s) for s in sorted(set(slots)) if s >= 0)


class Row(NamedTuple):
    """One operation as run_batch runs it: its kernel (KERNEL_IDS), its description, the memory
    slots of its IFM, IFM2, OFM and LUT (-1: none; a copy's source is its IFM, its destination
    its OFM), and the arrays a convolution reads (weights, bias, scale, shift, right shift) or a
    copy's byte table (None: none)."""

    kernel: int
    desc: np.ndarray
    slots: tuple[int, int, int, int]
    arrays: tuple[np.ndarray | None, ...] = ()
    # (memory slot, byte offset, bytes): streams the row was made with, which a run finds
    # where an earlier operation put them (Vela DMAs weights in); checked before the row runs
    checks: tuple[tuple[int, int, np.ndarray], ...] = ()

    def words(self) -> list[int]:
        arrays = (*self.arrays, *(None,) * (ROW_ARRAYS - len(self.arrays)))
        return [
            self.kernel,
            *self.slots,
            self.desc.ctypes.data,
            *(0 if a is None else a.ctypes.data for a in arrays),
        ]

    def check_rows(self) -> list[Row]:
        """A check row (module.c's KERNEL_CHECK) for each of the row's checks."""
        return [
            Row(
                _CHECK, np.array([offset, len(expected)], np.int64), (slot, -1, -1, -1), (expected,)
            )
            for slot, offset, expected in self.checks
        ]


def row(
    kernel: str,
    desc: np.ndarray,
    ifm: int,
    ifm2: int | None,
    ofm: int,
    reads_lut: bool,
    arrays: Sequence[np.ndarray | None] = (),
) -> Row:
    """One operation's Row (regions, memory.INTERNAL for the SHRAM; ifm2 None: no IFM2)."""
    slots = (
        memory_slot(ifm),
        -1 if ifm2 is None else memory_slot(ifm2),
        memory_slot(ofm),
        _SHRAM_SLOT if reads_lut else -1,
    )
    return Row(KERNEL_IDS[kernel], desc, slots, tuple(arrays))


def expanded(rows: Sequence[Row]) -> tuple[list[Row], list[int]]:
    """The rows run_batch runs for these: each Row's check rows, then the Row; and for each, the
    number of the Row it is for."""
    table: list[Row] = []
    row_of: list[int] = []
    for k, r in enumerate(rows):
        for made in (*r.check_rows(), r):
            table.append(made)
            row_of.append(k)
    return table, row_of


class NativeBatch:
    """Operations run in turn by one native call: `table` holds run_batch's rows, addresses
    into `owners` (kept alive with it). `regions`: (memory slot, region) of each slot the rows
    use (slot_regions). When a check row finds a stream changed, resume(memory, k) runs the
    operations from the one of the table's k-th row on another way (planned steps, which read
    their streams as they run)."""

    def __init__(
        self,
        table: np.ndarray,
        owners: object,
        resume: Callable[[Memory, int], None],
        regions: tuple[tuple[int, int], ...],
    ):
        self.table, self._regions = table, regions
        self._owners = owners
        self._resume = resume

    @classmethod
    def of_rows(cls, rows: Sequence[Row], resume: Callable[[Memory, int], None]) -> NativeBatch:
        """The batch of these rows; resume(memory, k): run the operations from the k-th on."""
        table, row_of = expanded(rows)
        words = np.array([r.words() for r in table], np.int64).reshape(-1, ROW_WORDS)
        regions = slot_regions(s for r in table for s in r.slots)
        return cls(words, table, lambda mem, t: resume(mem, row_of[t]), regions)

    def __call__(self, mem: Memory) -> None:
        memory: list[np.ndarray | None] = [None] * MEMORY_SLOTS
        for slot, region in self._regions:
            memory[slot] = mem.internal if region == INTERNAL else mem.regions[region]
        try:
            stopped = _RUN(self.table, *memory)  # type: ignore[misc]
        except ValueError as exc:  # module.c: a row reaches outside its memory
            raise RegionError(f"the native kernels refused an operation: {exc}") from None
        if stopped is not None:
            self._resume(mem, stopped)


def row_of(run: Callable[[Memory], None]) -> Row | None:
    """The run's Row, when it gives one (a `row()` method that does not return None)."""
    made = getattr(run, "row", None)
    return made() if made is not None else None


def batched(runs: Sequence[Callable[[Memory], None]]) -> list[Callable[[Memory], None]]:
    """The runs, each stretch of two or more that give a Row as one NativeBatch. As they are
    where run_batch is not built."""
    if _RUN is None:
        return list(runs)
    out: list[Callable[[Memory], None]] = []
    stretch: list[tuple[Callable, Row]] = []

    def close() -> None:
        if len(stretch) > 1:
            in_turn = [run for run, _ in stretch]

            def resume(mem: Memory, k: int) -> None:
                for run in in_turn[k:]:
                    run(mem)

            out.append(NativeBatch.of_rows([r for _, r in stretch], resume))
        else:
            out.extend(run for run, _ in stretch)
        stretch.clear()

    for run in runs:
        found = row_of(run)
        if found is None:
            close()
            out.append(run)
        else:
            stretch.append((run, found))
    close()
    return out


def available() -> bool:
    """Whether run_batch is built (and the native kernels turned on)."""
    return _RUN is not None
