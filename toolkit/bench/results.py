"""results.jsonl: one record per finished run, appended atomically; the stable run key.

Each record is written with a single write() on an O_APPEND descriptor and fsynced, so
concurrent writers never interleave and a crash leaves every finished run on disk. A later
record for the same key (a failed run tried again with --resume) supersedes an earlier one.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import zlib
from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import UserError
from .record import BenchRecord
from .suite import RunSpec

RESULTS_NAME = "results.jsonl"
RECORD_SCHEMA = 1


def new_record(spec: RunSpec, status: str, reason: str | None, **fields: Any) -> BenchRecord:
    """The spec's record: its key, label and spec, with status, reason and whatever else ran."""
    return BenchRecord(
        RECORD_SCHEMA, run_key(spec), spec.label, asdict(spec), status, reason, **fields
    )


def lost_run_record(spec: RunSpec, reason: str) -> BenchRecord:
    """A run whose worker never sent a record back (killed, lost with its machine)."""
    return new_record(spec, "failed", reason)


def run_key(spec: RunSpec) -> str:
    """Hash of everything that defines the run; the same spec gives the same key on any host.

    A file model's key covers its contents (spec.model_sha256, read when the suite is expanded),
    so --resume runs an edited model again. A zoo model is keyed by its name only.
    """
    fields = asdict(spec)
    if fields["model_sha256"] is None:  # zoo models (and missing files) keep their old keys
        del fields["model_sha256"]
    if fields["quant"] == "int8":  # as do int8 runs, from before the quant axis
        del fields["quant"]
    text = json.dumps({"schema": RECORD_SCHEMA, **fields}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def append_record(path: Path, record: BenchRecord) -> None:
    data = (json.dumps(record.to_json(), default=str, separators=(",", ":")) + "\n").encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        written = os.write(fd, data)
        if written != len(data):
            raise OSError(f"short write to {path}: {written} of {len(data)} bytes")
        os.fsync(fd)
    finally:
        os.close(fd)


def repair_torn_tail(path: Path) -> int:
    """Move a torn last line (a run killed mid-write) to PATH.torn and cut it from path, so the
    next record starts on a line of its own. Returns the bytes moved (0: nothing was torn)."""
    if not path.is_file():
        return 0
    data = path.read_bytes()
    if not data or data.endswith(b"\n"):
        return 0
    keep = data.rfind(b"\n") + 1
    with open(path.with_name(path.name + ".torn"), "ab") as torn:
        torn.write(data[keep:] + b"\n")
        torn.flush()
        os.fsync(torn.fileno())
    with open(path, "r+b") as handle:
        handle.truncate(keep)
        os.fsync(handle.fileno())
    return len(data) - keep


def read_records(path: Path) -> list[BenchRecord]:
    """Every record in file order; a line that is not JSON (torn by a power loss) is ignored,
    one that is JSON but no record etk bench writes is refused: UserError naming the line."""
    if not path.exists():
        return []
    records = []
    for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        try:
            data = json.loads(line)
        except (json.JSONDecodeError, RecursionError):
            continue
        problem = record_problem(data)
        if problem:
            raise UserError(
                f"{path} line {number} is not a bench record ({problem}): etk bench did not "
                "write it; move the file away or choose another --out"
            )
        records.append(BenchRecord.from_json(data))
    return records


_REQUIRED = {"schema": int, "key": str, "label": str, "spec": dict, "status": str}


def record_problem(data: Any) -> str:
    """Why data is not a line etk bench writes ('' when it is)."""
    if not isinstance(data, dict):
        return f"a JSON {_JSON_NAMES.get(type(data), type(data).__name__)}, not a record"
    for key, kind in _REQUIRED.items():
        if key not in data:
            return f"no {key!r}"
        if not isinstance(data[key], kind) or isinstance(data[key], bool):
            return f"{key!r} is {type(data[key]).__name__}"
    if data["schema"] != RECORD_SCHEMA:
        return f"schema {data['schema']}, this etk writes {RECORD_SCHEMA}"
    if data["status"] not in ("ok", "failed"):
        return f"status {data['status'][:20]!r}"
    return ""


_JSON_NAMES = {
    list: "array",
    str: "string",
    int: "number",
    float: "number",
    bool: "boolean",
    type(None): "null",
}


def latest(records: Iterable[BenchRecord]) -> dict[str, BenchRecord]:
    """key -> the newest record for it, in first-seen order."""
    newest: dict[str, BenchRecord] = {}
    for record in records:
        newest[record.key] = record
    return newest


def finished_keys(records: Iterable[BenchRecord]) -> set[str]:
    """Keys --resume skips: those whose newest record succeeded."""
    return {k for k, r in latest(records).items() if r.ok}


def encode_codes(codes: np.ndarray) -> str:
    """Integer output codes, compact enough for a JSON line: int32, zlib, base64."""
    return base64.b64encode(zlib.compress(np.ascontiguousarray(codes, "<i4").tobytes(), 9)).decode()


def decode_codes(text: str) -> np.ndarray:
    return np.frombuffer(zlib.decompress(base64.b64decode(text)), "<i4")
