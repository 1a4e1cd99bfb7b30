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
from .native.batch import ADDRESS_WORDS, ROW_ARRAYS, NativeBatch, Row, expanded, row_of

_ALIGN = 16  # each array's offset in the blob (the blob itself is so aligned when read)


@dataclass(frozen=True)
class PlanImage:
    # run_batch's rows, their address words offsets into blob (one no kernel reads: 0)
    table: np.ndarray
    blob: np.ndarray  # uint8: every array the rows read
    steps: np.ndarray  # for each row of the table, the number of the planned step it runs
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
        return NativeBatch(table, blob, lambda mem, row: run_from(mem, int(steps[row])))


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
        np.array([runs[k][0] for k in row_numbers], np.int64),
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


def to_arrays(image: PlanImage) -> dict[str, np.ndarray]:
    """The image as named arrays (derived_store's file format)."""
    return {
        "image:table": image.table,
        "image:blob": image.blob,
        "image:steps": image.steps,
        "image:extent": np.array(sorted(image.extent.items()), np.int64).reshape(-1, 2),
        "image:constant": np.array(sorted(image.constant_regions), np.int64),
        "image:operations": np.array([image.operation_count], np.int64),
    }


def from_arrays(a: dict[str, np.ndarray]) -> PlanImage | None:
    """The image to_arrays wrote, or None when the file holds none. Raises ValueError where its
    tables do not fit together (an address outside the blob, a step that does not exist)."""
    if "image:table" not in a:
        return None
    table, blob, steps = a["image:table"], a["image:blob"], a["image:steps"]
    count = int(a["image:operations"][0])
    addresses = table[:, ADDRESS_WORDS] if table.ndim == 2 else table
    if (
        table.ndim != 2
        or len(steps) != len(table)
        or not 0 <= addresses.min(initial=0) <= addresses.max(initial=0) < max(len(blob), 1)
        or not 0 <= steps.min(initial=0) <= steps.max(initial=0) < max(count, 1)
    ):
        raise ValueError("a plan image whose tables do not fit together")
    return PlanImage(
        table,
        blob,
        steps,
        {region: size for region, size in a["image:extent"].tolist()},
        frozenset(a["image:constant"].tolist()),
        count,
    )
