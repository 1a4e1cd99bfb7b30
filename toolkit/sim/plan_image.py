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
from dataclasses import dataclass

import numpy as np

from .memory import Memory
from .native.batch import (
    ROW_ARRAYS,
    ROW_WORDS,
    Buffer,
    NativeBatch,
    Row,
    expanded,
    image_slots,
    row_of,
)
from .native.batch import available as native_batches

_ALIGN = 16  # each array's offset in the blob (the blob itself is so aligned: image_slots)


@dataclass(eq=False)
class PlanImage:
    # run_batch's rows (int64 words), their address words offsets into blob (one no kernel
    # reads: 0); as read from the file, views of its bytes
    table: Buffer
    blob: Buffer  # every array the rows read
    steps: tuple[int, ...]  # for each row of the table, the number of the planned step it runs
    slots: tuple[int, ...]  # the memory slots the rows use
    extent: dict[int, int]  # plan.Plan.extent
    constant_regions: frozenset[int]
    operation_count: int  # planned steps, merged ones included

    def batch(self, run_from: Callable[[Memory, int], None]) -> NativeBatch:
        """The image's rows as one batch; run_from(memory, step): run the steps from this one
        on another way (a stream a row checks has changed)."""
        steps = self.steps
        return NativeBatch(
            self.table, self, lambda mem, row: run_from(mem, steps[row]), self.slots, self.blob
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
        tuple(sorted({s for r in table for s in r.slots if s >= 0})),
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


def to_parts(image: PlanImage) -> tuple[dict, dict[str, np.ndarray]]:
    """The image as derived_store keeps it: its numbers (for the file's JSON header: reading
    them there cost less than reading an array of them) and its arrays."""
    numbers = {
        "operations": image.operation_count,
        "extent": sorted(image.extent.items()),
        "constant": sorted(image.constant_regions),
        "steps": list(image.steps),
    }
    table = np.frombuffer(image.table, np.int64).reshape(-1, ROW_WORDS)
    return numbers, {"image:table": table, "image:blob": np.frombuffer(image.blob, np.uint8)}


def from_parts(numbers: dict | None, table: Buffer, blob: Buffer) -> PlanImage | None:
    """The image to_parts gave (table and blob: the bytes of its arrays), or None when the file
    holds none or the native kernels that would run it are not built. Raises ValueError where
    its tables do not fit together (an address outside the blob, a step that does not exist)."""
    if numbers is None or not native_batches():
        return None
    count, steps = numbers["operations"], numbers["steps"]
    slots = image_slots(table, blob, len(steps))
    if slots is None or (steps and not 0 <= min(steps) <= max(steps) < count):
        raise ValueError("a plan image whose tables do not fit together")
    return PlanImage(
        table,
        blob,
        tuple(steps),
        slots,
        dict(numbers["extent"]),
        frozenset(numbers["constant"]),
        count,
    )
