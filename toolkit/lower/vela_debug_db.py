"""Vela's debug database (`--enable-debug-db`): what each command-stream operation came from.

Vela 5.1's C++ core writes NAME_debug.xml next to its output: tables of CSV rows in CDATA
sections. The ones read here:
- `queue`: one row per operation Vela queued into the command stream: the byte offset of its
  last NPU_OP command, its optimised operation and its scheduled operation;
- `optimised`: each operation after Vela's graph optimisation, with the source operation it was
  made from (a DEPTHWISE_CONV2D Vela lowers into transposes: each transpose names it);
- `source`: each operation as Vela read it from the TOSA graph; `ext_key` is the operator's
  index in the TOSA graph's operator list;
- `perf`: each scheduled operation's estimate (op and NPU cycles, MACs, access cycles per
  memory: the columns ending `_ac`).
The flag changes no output of Vela's (the command stream and weights are the same bytes).
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path
from typing import NamedTuple

DEBUG_DB_FLAG = "--enable-debug-db"
_TABLE = re.compile(r'<table name="(\w+)">\s*<!\[CDATA\[(.*?)\]\]>\s*</table>', re.S)


class DebugDatabaseError(Exception):
    """The file is not a Vela debug database this reader understands."""


class QueuedOperation(NamedTuple):
    offset: int
    optimised: int
    scheduled: int


class ScheduledPerf(NamedTuple):
    scheduled: int
    operator: str  # Vela's name: "Conv2D", "Transpose"
    name: str  # its output tensor ("#264" for one of Vela's own)
    op_cycles: int
    npu_cycles: int
    macs: int
    access_cycles: dict[str, int]  # memory ("Sram", "OffChipFlash", ...) -> cycles


class DebugDatabase(NamedTuple):
    queue: tuple[QueuedOperation, ...]
    optimised_source: dict[int, int]  # optimised operation -> source operation
    source_operator: dict[int, tuple[str, int]]  # source operation -> (Vela's name, TOSA index)
    perf: dict[int, ScheduledPerf]  # scheduled operation -> its estimate


def debug_db_path(vela_dir: Path, stem: str) -> Path:
    return vela_dir / f"{stem}_debug.xml"


def _tables(text: str) -> dict[str, list[dict[str, str]]]:
    tables = {}
    for match in _TABLE.finditer(text):
        rows = list(csv.reader(io.StringIO(match.group(2).strip())))
        if rows:
            tables[match.group(1)] = [dict(zip(rows[0], row)) for row in rows[1:]]
    return tables


def _int(value: str) -> int:
    try:
        return int(float(value))
    except ValueError:
        return 0


def _perf(row: dict[str, str]) -> ScheduledPerf:
    access = {
        key.removesuffix("_ac"): _int(value)
        for key, value in row.items()
        if key.endswith("_ac") and key != "shram_ac"
    }
    return ScheduledPerf(
        int(row["id"]),
        row["operator"],
        row["name"],
        _int(row["op_cycles"]),
        _int(row["npu_cycles"]),
        _int(row["mac_count"]),
        access,
    )


def read_debug_db(path: Path) -> DebugDatabase:
    """The tables of a Vela debug database; DebugDatabaseError if one is missing or malformed."""
    try:
        tables = _tables(path.read_text(errors="replace"))
        return DebugDatabase(
            tuple(
                QueuedOperation(int(r["offset"]), int(r["optimised_id"]), int(r["scheduled_id"]))
                for r in tables["queue"]
            ),
            {int(r["id"]): int(r["source_id"]) for r in tables["optimised"]},
            {int(r["id"]): (r["operator"], int(r["ext_key"])) for r in tables["source"]},
            {int(r["id"]): _perf(r) for r in tables["perf"]},
        )
    except (OSError, KeyError, ValueError) as exc:
        raise DebugDatabaseError(f"{path.name}: {type(exc).__name__}: {exc}") from None
