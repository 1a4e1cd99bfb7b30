"""A planned program as the native rows that run it, kept in the derived store so that a later
process runs the program without planning it.

After a program's first run, when each of its operations runs as a native row (native.batch.Row:
a description, memory slots and the arrays it reads: decoded weights and scales, a copy's byte
table, the streams it checks are still in place), run_batch's table of those rows is all a run
needs, with the bytes of each region the program uses and the regions no operation writes. The
image keeps the table with the arrays in one blob and, in place of addresses, offsets into it
(a word no kernel reads: 0): a cold run adds the blob's address to them and runs the table as
one NativeBatch. The
operations' records are planned only when asked for (plan.Plan.steps).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from .memory import Memory
from .native.batch import ADDRESS_WORDS, ROW_ARRAYS, ROW_WORDS, NativeBatch, Row, expanded, row_of

_ALIGN = 16  # each array's offset in the blob (the blob itself is so aligned when read)


@dataclass(frozen=True)
class PlanImage:
    # run_batch's rows, their address words offsets into blob (one no kernel reads: 0)
    table: np.ndarray
    blob: np.ndarray  # uint8: every array the rows read
    steps: tuple[int, ...]  # for each row of the table, the number of the planned step it runs
    extent: dict[int, int]  # plan.Plan.extent
    constant_regions: frozenset[int]
    operation_count: int  # planned steps, merged ones included

    def batch(self, run_from: Callable[[Memory, int], None]) -> NativeBatch:
        """The image's rows as one batch; run_from(memory, step): run the steps from this one
        on another way (a stream a row checks has changed)."""
        blob = self.blob
        base = blob.ctypes.data
        if base % _ALIGN:
            blob = np.copy(blob)  # numpy's own allocations are aligned
            base = blob.ctypes.data
        table = self.table.copy()
        table[:, ADDRESS_WORDS] += base
        steps = self.steps
        return NativeBatch(table, blob, lambda mem, row: run_from(mem, steps[row]))


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
        np.array(words, np.int64).reshape(len(words), -1),
        blob,
        tuple(runs[k][0] for k in row_numbers),
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
    return numbers, {"image:table": image.table, "image:blob": image.blob}


def from_parts(numbers: dict | None, arrays: dict[str, np.ndarray]) -> PlanImage | None:
    """The image to_parts gave, or None when the file holds none. Raises ValueError where its
    tables do not fit together (an address outside the blob, a step that does not exist)."""
    if numbers is None:
        return None
    table, blob = arrays["image:table"], arrays["image:blob"]
    count, steps = numbers["operations"], numbers["steps"]
    # one reduction for both bounds of the addresses: a negative one is a huge unsigned one
    if (
        table.ndim != 2
        or table.shape[1] != ROW_WORDS
        or len(steps) != len(table)
        or (len(table) and int(table[:, ADDRESS_WORDS].view(np.uint64).max()) >= max(len(blob), 1))
        or (steps and not 0 <= min(steps) <= max(steps) < count)
    ):
        raise ValueError("a plan image whose tables do not fit together")
    return PlanImage(
        table,
        blob,
        tuple(steps),
        {region: size for region, size in numbers["extent"]},
        frozenset(numbers["constant"]),
        count,
    )
