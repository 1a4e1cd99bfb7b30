"""Baselines: what each run gave (cycles, output codes), and what regressed against it.

A bench writes DIR/baseline.json for its newest records; keep a copy as BASELINE.json and pass
it with --baseline. Cycles regress when they grow by more than a relative tolerance; outputs
regress when any integer output code moves by more than a number of LSBs.
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from rich.table import Table

from ..errors import UserError
from .record import BenchRecord
from .results import decode_codes

BASELINE_NAME = "baseline.json"
BASELINE_SCHEMA = 1


@dataclass(frozen=True)
class Regression:
    key: str
    label: str
    metric: str  # "npu cycles (simulated)", "outputs", "status"
    baseline: str
    current: str
    change: str  # "+12.5%", "3 LSB", "failed"
    allowed: str


def parse_percent(text: str) -> float:
    """'2%' -> 0.02, '0.02' -> 0.02"""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(%?)\s*", text)
    if not match:
        raise UserError(f"tolerance '{text}' is not a number or percentage, e.g. 2% or 0.02")
    value = float(match.group(1))
    return value / 100 if match.group(2) else value


def baseline_from_records(records: Iterable[BenchRecord]) -> dict[str, Any]:
    runs = {}
    for record in records:
        if not record.ok or record.outputs is None:
            continue
        runs[record.key] = {
            "label": record.label,
            "cycles": record.cycles,
            "outputs": record.outputs["quantized"],
        }
    return {"schema": BASELINE_SCHEMA, "runs": runs}


def load_baseline(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"baseline {path} does not exist") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"baseline {path} is not JSON: {exc}") from None
    except OSError as exc:
        raise UserError(f"baseline {path} cannot be read: {exc.strerror}") from None
    if (
        not isinstance(data, dict)
        or data.get("schema") != BASELINE_SCHEMA
        or not isinstance(data.get("runs"), dict)
    ):
        raise UserError(
            f"baseline {path} is not an etk baseline (schema {BASELINE_SCHEMA} with "
            "'runs'): make one with etk bench, it writes DIR/baseline.json"
        )
    for key, entry in data["runs"].items():
        problem = _entry_problem(entry)
        if problem:
            raise UserError(
                f"baseline {path}: run {key} {problem}: make the baseline again "
                "with etk bench (it writes DIR/baseline.json)"
            )
    return data


def _entry_problem(entry: Any) -> str | None:
    """What is wrong with one baseline run entry, or None."""
    if not isinstance(entry, dict):
        return "is not an object"
    cycles = entry.get("cycles")
    if not isinstance(entry.get("label"), str) or not isinstance(cycles, dict):
        return "has no label or cycles"
    for name in ("run", "estimate"):
        figures = cycles.get(name)
        if not isinstance(figures, dict) or not isinstance(
            figures.get("npu_cycles"), (int, type(None))
        ):
            return f"has no {name} cycles (an object with an integer npu_cycles)"
    outputs = entry.get("outputs")
    if not isinstance(outputs, list):
        return "has no outputs list"
    for output in outputs:
        if not isinstance(output, dict) or not isinstance(output.get("codes"), str):
            return "has an output without its codes (a base64 string)"
        try:
            decode_codes(output["codes"])
        except (ValueError, zlib.error):
            return "has output codes that do not decode"
    return None


def _cycles(
    key: str, label: str, name: str, base: dict, now: dict, tolerance: float
) -> Regression | None:
    before, after = base.get("npu_cycles"), now.get("npu_cycles")
    if not before or after is None or base.get("kind") != now.get("kind"):
        return None
    change = after / before - 1
    if change <= tolerance:
        return None
    return Regression(
        key,
        label,
        f"NPU cycles ({now['kind']}, {name})",
        f"{before:,}",
        f"{after:,}",
        f"{change:+.1%}",
        f"+{tolerance:.1%}",
    )


def _outputs(key: str, label: str, base: list, now: list, tolerance: int) -> Regression | None:
    worst, where = 0, ""
    for b, n in zip(base, now):
        before, after = decode_codes(b["codes"]), decode_codes(n["codes"])
        if before.shape != after.shape:
            return Regression(
                key,
                label,
                f"output {n['index']}",
                f"shape {b['shape']}",
                f"shape {n['shape']}",
                "shape changed",
                f"{tolerance} LSB",
            )
        diff = int(np.max(np.abs(before - after))) if before.size else 0
        if diff > worst:
            worst, where = diff, f"output {n['index']}"
    if worst <= tolerance:
        return None
    return Regression(
        key,
        label,
        f"{where} codes",
        "baseline codes",
        "changed",
        f"{worst} LSB",
        f"{tolerance} LSB",
    )


def compare(
    records: Iterable[BenchRecord],
    baseline: dict[str, Any],
    cycle_tolerance: float,
    lsb_tolerance: int,
) -> list[Regression]:
    regressions: list[Regression] = []
    for record in records:
        base = baseline["runs"].get(record.key)
        if base is None:
            continue
        key, label = record.key, record.label
        if not record.ok or record.cycles is None or record.outputs is None:
            regressions.append(
                Regression(key, label, "run failed", "ok", "failed", str(record.reason)[:120], "ok")
            )
            continue
        for name in ("run", "estimate"):
            found = _cycles(
                key, label, name, base["cycles"][name], record.cycles[name], cycle_tolerance
            )
            if found:
                regressions.append(found)
        found = _outputs(key, label, base["outputs"], record.outputs["quantized"], lsb_tolerance)
        if found:
            regressions.append(found)
    return regressions


def regression_table(regressions: list[Regression]) -> Table:
    table = Table(title=f"{len(regressions)} regression(s) against the baseline")
    for column in ("run", "what", "baseline", "now", "change", "allowed"):
        table.add_column(column, justify="left" if column in ("run", "what") else "right")
    for r in regressions:
        table.add_row(r.label, r.metric, r.baseline, r.current, r.change, r.allowed)
    return table
