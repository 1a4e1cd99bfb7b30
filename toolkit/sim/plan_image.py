"""A planned program as the native rows that run it, kept in the derived store so that a later
process runs the program without planning it.

After a program's first run, when each of its operations runs as a native row (native.batch.Row:
a description, memory slots and the arrays it reads: decoded weights and scales, a copy's byte
table, the streams it checks are still in place), run_batch's table of those rows is all a run
needs, with the bytes of each region the program uses and the regions no operation writes. The
image keeps the table with the arrays in one blob and, in place of addresses, offsets into it
(a word no kernel reads: 0): run_batch adds the blob's address to them as it runs the table
(one NativeBatch), so a cold run neither copies nor rewrites the table. The operations' records
are planned only when asked for (plan.Plan.steps).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

from .memory import Memory
from .native import KERNELS
from .native.batch import (
    ROW_ARRAYS,
    ROW_WORDS,
    Buffer,
    NativeBatch,
    Row,
    expanded,
    row_of,
    slot_regions,
)
from .native.batch import available as native_batches

_ALIGN = 16  # each array's offset in the blob, and the table's and blob's in the file
_OPEN_IMAGE = KERNELS.open_image if KERNELS and native_batches() else None  # native/image.c


class PlanImage(NamedTuple):
    """A plan's native rows and what runs them (a tuple, as open_image's fields come)."""

    # run_batch's rows (int64 words), their address words offsets into blob (one no kernel
    # reads: 0); as read from the file, views of its bytes
    table: Buffer
    blob: Buffer  # every array the rows read
    steps: tuple[int, ...]  # for each row of the table, the number of the planned step it runs
    regions: tuple[tuple[int, int], ...]  # (memory slot, region) of each slot the rows use
    extent: dict[int, int]  # plan.Plan.extent
    constant_regions: frozenset[int]
    operation_count: int  # planned steps, merged ones included

    def batch(self, run_from: Callable[[Memory, int], None]) -> NativeBatch:
        """The image's rows as one batch; run_from(memory, step): run the steps from this one
        on another way (a stream a row checks has changed)."""
        steps = self.steps
        return NativeBatch(
            self.table, self, lambda mem, row: run_from(mem, steps[row]), self.regions, self.blob
        )


def image_of(
    runs: Sequence[tuple[int, Callable[[Memory], None]]],
    extent: dict[int, int],
    constant_regions: frozenset[int],
    operation_count: int,
) -> PlanImage | None:
    """The image of a program that has run, from its (step number, run) pairs (merged steps
    left out), or None when some run gives no row."""
    rows = [row_of(run) for _, run in runs]
    if not rows or any(r is None for r in rows):
        return None
    table, row_numbers = expanded(rows)  # type: ignore[arg-type]
    blob, offsets = _blob(table)
    words = [[r.kernel, *r.slots, offsets[id(r.desc)], *_array_offsets(r, offsets)] for r in table]
    return PlanImage(
        np.array(words, np.int64).reshape(len(words), ROW_WORDS),
        blob,
        tuple(runs[k][0] for k in row_numbers),
        slot_regions(s for r in table for s in r.slots),
        dict(extent),
        constant_regions,
        operation_count,
    )


def _blob(table: list[Row]) -> tuple[np.ndarray, dict[int, int]]:
    """Every array the rows point into, once each, aligned, in one buffer; and by id, where."""
    arrays: dict[int, np.ndarray] = {}
    for r in table:
        for a in (r.desc, *r.arrays):
            if a is not None:
                arrays.setdefault(id(a), a)
    offsets, size = {}, 0
    for key, a in arrays.items():
        offsets[key] = size
        size += -(-a.nbytes // _ALIGN) * _ALIGN
    blob = np.zeros(size, np.uint8)
    for key, a in arrays.items():
        at = offsets[key]
        blob[at : at + a.nbytes] = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
    return blob, offsets


def _array_offsets(r: Row, offsets: dict[int, int]) -> list[int]:
    padded = (*r.arrays, *(None,) * (ROW_ARRAYS - len(r.arrays)))
    return [0 if a is None else offsets[id(a)] for a in padded]


MAGIC = b"ETKIMAGE"  # a plan image's file body starts so (derived_store: a JSON one does not)
Timing = dict[int, tuple[list[int], list[int], tuple[int, ...]]]  # derived_store.Derived.timing


def image_body(image: PlanImage, timing: Timing) -> bytes:
    """The file body (after its digest) that native/image.c's open_image reads: the image's
    numbers and the timing as int64 words, then its table and blob, each 16-byte aligned."""
    extent, constant = sorted(image.extent.items()), sorted(image.constant_regions)
    words = [0, 0, image.operation_count, len(image.steps), len(extent)]
    words += [v for pair in extent for v in pair]
    words += [len(constant), *constant, *image.steps, len(timing)]
    for key, (cycles, compute, pmu) in timing.items():
        assert len(cycles) == len(compute)
        words += [key, len(cycles), len(pmu), *cycles, *compute, *pmu]
    words[1] = len(words)
    head = MAGIC + np.array(words[1:], np.int64).tobytes()
    table = bytes(image.table)
    return b"".join((_padded(head), _padded(table), bytes(image.blob)))


def _padded(chunk: bytes) -> bytes:
    return chunk + bytes(-len(chunk) % _ALIGN)


def open_image(raw: bytes) -> tuple[PlanImage, Timing] | None:
    """The image and timing in a store file image_body wrote (raw: the whole file, digest
    first), table and blob as views of raw; None where it does not fit together (an address
    outside the blob, a step that does not exist) or the native kernels that would run it are
    not built."""
    opened = _OPEN_IMAGE(raw) if _OPEN_IMAGE is not None else None
    if opened is None:
        return None
    # (table, blob, steps, regions, extent, constant regions, operations): PlanImage's fields
    return PlanImage._make(opened[:7]), opened[7]
