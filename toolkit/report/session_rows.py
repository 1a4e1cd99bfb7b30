"""Table rows for runs on a target that ran several samples (runners/samples.py): starts, the
samples that failed or hung, NPU cycles per sample, and per-delegate NPU cycles."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..artifacts import RunResult


def session_rows(runs: Sequence[RunResult], add: Callable) -> None:
    """add(label, values) for each row, one value per variant."""
    found = [run.details.get("session") for run in runs]
    sessions = [s for s in found if s is not None]
    if len(sessions) != len(runs):
        return
    add(
        "starts (FVP launches, board starts)",
        [f"{s['starts']} for {s['samples']} samples" for s in sessions],
    )
    add("samples failed or hung", [len(s["failed"]) for s in sessions])
    cycles = [_npu_cycles(s) for s in sessions]
    if all(cycles):
        add("NPU cycles per sample (min..max)", [f"{min(c):,}..{max(c):,}" for c in cycles])
    _delegate_rows(runs, add)


def _npu_cycles(session: dict) -> list[int]:
    return [p["npu_cycles"] for p in session["per_sample"] if p["npu_cycles"] is not None]


def _delegate_rows(runs: Sequence[RunResult], add: Callable) -> None:
    delegates = [run.details.get("delegates") or [] for run in runs]
    for k in range(max(len(d) for d in delegates)):
        add(
            f"  delegate {k} NPU cycles (first sample)",
            [d[k]["npu_cycles"] if k < len(d) else None for d in delegates],
        )
