"""Many evaluation samples on one start of a target: the result of a run that fed a firmware
several samples (FVP server mode, a bundle of test sets), and how it went.

A runner that can run several samples per start has `run_samples(program, samples, target)`
returning SampleRuns; evaluate() uses it when present. A sample that fails or hangs is named
(SampleFailure) and the others are kept. `starts` counts FVP launches or board flashes/resets.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from ..artifacts import Program, RunResult
from ..errors import ToolError
from .console_log import verdict
from .uart_log import UartLog, UartLogParser, per_inference

if TYPE_CHECKING:
    from ..targets import Target

Mode = Literal["server", "bundle", "one per start"]
SampleStatus = Literal["failed", "hung", "differ"]

# What ends one sample's part of the console: ExecuTorch's semihosting server mode
# (arm_executor_runner.cpp run_model_server, #21913) and a BundleIO runner's verdict line.
SERVER_DONE = re.compile(r"SERVER_INFERENCE_DONE (?P<n>\d{1,9})")
BUNDLE_DONE = re.compile(r"BundleIO index\[(?P<n>\d{1,9})\] Test_result: (?:PASS|FAIL)")


@dataclass(frozen=True)
class SampleFailure:
    index: int  # the evaluation sample
    status: SampleStatus
    reason: str  # the firmware's line, or what was seen last


@dataclass(frozen=True)
class SampleRuns:
    runs: tuple[RunResult | None, ...]  # per sample; None for one that failed or hung
    failures: tuple[SampleFailure, ...]
    starts: int  # FVP launches, or board starts (flash or reset)
    mode: Mode
    note: str  # one line: how the samples ran; when one start each, why and what to build

    def entry(self) -> dict[str, Any]:
        """report.json run.details.session."""
        return {
            "mode": self.mode,
            "samples": len(self.runs),
            "starts": self.starts,
            "failed": [
                {"sample": f.index, "status": f.status, "reason": f.reason} for f in self.failures
            ],
            "note": self.note,
            "per_sample": [_figures(k, r) for k, r in enumerate(self.runs) if r is not None],
        }


def _figures(index: int, run: RunResult) -> dict[str, Any]:
    return {
        "sample": index,
        "npu_cycles": run.cycles.npu_cycles,
        "cpu_cycles": run.cycles.cpu_cycles,
        "delegations": run.details.get("delegations"),
    }


@dataclass(frozen=True)
class Segment:
    number: int  # the sample number the firmware printed with its end marker
    log: UartLog


class SampleLog:
    """A console read as it arrives, cut into one UartLog per sample at each end marker; the
    lines after the last marker are the sample in flight (`current`)."""

    def __init__(self, marker: re.Pattern[str]):
        self.marker = marker
        self.segments: list[Segment] = []
        self.current = UartLogParser()
        self._pending = b""

    def feed(self, chunk: bytes) -> None:
        *lines, self._pending = (self._pending + chunk).split(b"\n")
        for line in lines:
            self.current.feed(line + b"\n")
            m = self.marker.search(line.decode("utf-8", errors="replace"))
            if m:
                self.segments.append(Segment(int(m["n"]), self.current.finish()))
                self.current = UartLogParser()

    def rest(self) -> UartLog:
        """What came after the last marker (a last line without a newline included)."""
        if self._pending:
            self.current.feed(self._pending)
            self._pending = b""
        return self.current.finish()


def segment_details(log: UartLog) -> dict[str, Any]:
    """One sample's PMU figures for RunResult.details: counters, delegation count, delegates."""
    return {
        "pmu_counters": {c.name: per_inference(c.count) for c in log.pmu_counters},
        "delegations": log.delegations,
        "delegates": [
            {
                "delegate": d.index,
                "npu_cycles": d.npu_cycles,
                "npu_invocations": d.npu_invocations,
                "counters": d.named_counters(log.pmu_events),
            }
            for d in log.delegates
        ],
    }


def failure_of(index: int, log: UartLog, hung: bool) -> SampleFailure:
    """A sample that ended without its marker: the firmware's own error line, or where it hung."""
    said = verdict(log)
    if hung or said.status in ("hung", "nothing", "read", "passed"):
        last = log.last_program_line or "nothing"
        return SampleFailure(index, "hung", f"no result; last line: {last}")
    return SampleFailure(index, "failed", said.reason or said.text)


def per_start_note(what: str, fix: str) -> str:
    return f"{what}: one start per sample; {fix}"


def one_run_per_start(
    runner, program: Program, samples: Sequence, target: Target
) -> tuple[list[RunResult | None], list[SampleFailure]]:
    """Each sample in a start of its own (runner.run): one that fails is named, the rest kept."""
    runs: list[RunResult | None] = []
    failures: list[SampleFailure] = []
    for k, sample in enumerate(samples):
        try:
            runs.append(runner.run(program, list(sample), target))
        except ToolError as exc:
            runs.append(None)
            failures.append(SampleFailure(k, "failed", str(exc).splitlines()[0]))
    return runs, failures


def named_failures(failures: Sequence[SampleFailure]) -> str:
    """The last four failures, a line each, for a message that gives up on a run."""
    return "".join(f"\n  sample {f.index} {f.status}: {f.reason}" for f in failures[-4:])
