"""A console capture as a run: the verdict a user can act on, and the run entry deploy writes.

Used by `etk log` for runs made outside the toolkit (a user's own flashing flow, a CI job's saved
UART log, a pasted FVP log). Verdicts: "ran and passed", "ran, outputs differ",
"failed: <the firmware's own error line>", "hung after <last line>", "printed nothing".
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ..artifacts import CycleFigures
from ..errors import UserError
from ..evaluation.cycle_check import CycleCheck, cycle_check_entry
from ..evaluation.metrics import exact_match_rate, max_abs_err_lsb
from ..lower.program_store import load_output_interface
from .uart_log import UartLog, axi_beats, measured_cycles, per_inference
from .uart_outputs import decode_outputs, missing_values

# "read": the capture shows a finished inference (figures) but neither an end nor anything to
# check it by (outputs compared, a test result): an MLEK profile block, a cut excerpt
Status = Literal["passed", "differ", "failed", "hung", "nothing", "read"]


@dataclass(frozen=True)
class Verdict:
    status: Status
    text: str
    reason: str  # the firmware's line behind a failure, a mismatch or a hang; "" otherwise

    @property
    def passed(self) -> bool:
        return self.status == "passed"


@dataclass(frozen=True)
class OutputCheck:
    """Printed outputs against a program's host reference."""

    match: bool | None  # None: the printed values cannot be compared
    max_diff_lsb: float | None
    exact_match_rate: float | None
    note: str


def verdict(log: UartLog, check: OutputCheck | None = None) -> Verdict:
    fail_at = log.first_bundle_failure[0] if log.first_bundle_failure else None
    # After a BundleIO FAIL the runner reports the mismatch and aborts on purpose.
    failures = [f for f in log.failures if fail_at is None or f.line_no < fail_at]
    if failures:
        first = next((f for f in failures if f.kind != "garbled"), failures[0])
        return Verdict("failed", f"failed: {first.text}", first.text)
    if log.first_bundle_failure is not None:
        line = log.first_bundle_failure[1]
        return Verdict("differ", f"ran, outputs differ: {line}", line)
    if log.complete or log.eot or log.inference_done:
        return _finished(log, check)
    if log.last_program_line:
        return Verdict("hung", f"hung after {log.last_program_line}", log.last_program_line)
    return Verdict("nothing", "printed nothing", "")


def _finished(log: UartLog, check: OutputCheck | None) -> Verdict:
    """The verdict of a capture that shows an end or a finished inference, and no failure."""
    if check is not None and check.match is False:
        return Verdict("differ", f"ran, outputs differ: {check.note}", check.note)
    checked = (check is not None and check.match) or log.test_results
    if not (log.complete or log.eot or checked):
        read = _what_was_read(log)
        return Verdict(
            "read",
            f"read {read}; nothing checked (no end, no compared outputs, no test result)",
            "",
        )
    return Verdict("passed", "ran and passed", "")


def _what_was_read(log: UartLog) -> str:
    parts = [
        "cycles" if log.npu_cycles or log.cpu_cycles or log.pmu_counters else "",
        "printed outputs" if log.outputs else "",
        "top classes" if log.top_classes else "",
        "an inference time" if log.inference_ms is not None else "",
    ]
    return " and ".join(p for p in parts if p) or "nothing"


def check_outputs(log: UartLog, program_dir: Path, sample: int = 0) -> OutputCheck:
    """Compare the printed outputs with the host reference of program_dir (OUT/fused)."""
    interface = load_output_interface(program_dir)
    if interface is None:
        raise UserError(
            f"{program_dir} holds no compiled program (program.json): pass a "
            f"variant folder of an etk output, e.g. OUT/fused"
        )
    specs, quants = interface
    reference_dir = program_dir / "reference"
    paths = [reference_dir / f"output_{sample}_{i}.npy" for i in range(len(specs))]
    if not all(p.is_file() for p in paths):
        raise UserError(
            f"{reference_dir} has no host reference outputs for sample {sample}: "
            f"run `etk compile`/`deploy` for this program first"
        )
    missing = missing_values(log.outputs, specs)
    if missing is not None:
        return OutputCheck(None, None, None, f"cannot compare with the host reference: {missing}")
    decoded = decode_outputs(log.outputs, specs, quants)
    worst, rates = 0.0, []
    for got, path, quant in zip(decoded.arrays, paths, quants):
        want = _reference_output(path, got.shape)
        worst = max(
            worst,
            max_abs_err_lsb(want, got, quant.scale)
            if quant
            else float(np.max(np.abs(want.astype(np.float64) - got), initial=0.0)),
        )
        rates.append(exact_match_rate(want, got))
    tolerance = 0.0 if decoded.exact else 1e-6  # %f prints 6 decimals
    match = worst <= tolerance
    note = (
        f"{'equal to' if match else 'differ from'} the host reference of {program_dir} "
        f"(sample {sample}, max diff {worst:g}{' LSB' if decoded.exact else ''}); "
        f"{decoded.note}"
    )
    return OutputCheck(match, worst, float(np.mean(rates)), note)


def _reference_output(path: Path, shape: tuple[int, ...]) -> np.ndarray:
    """A host reference output as etk saved it: numbers of the output's shape; UserError else
    (an object array would need unpickling, which a data file never gets)."""
    try:
        want = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        problem = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UserError(
            f"{path} is not a host reference output ({problem}): run `etk compile`/`deploy` "
            "for this program again"
        ) from None
    if want.dtype.kind not in "biuf" or want.size != int(np.prod(shape)):
        raise UserError(
            f"{path} holds {want.dtype} {tuple(want.shape)}, not the output's {tuple(shape)} "
            "numbers: run `etk compile`/`deploy` for this program again"
        )
    return want.reshape(shape)


def console_cycles(log: UartLog, source: Path) -> CycleFigures:
    """The PMU figures the capture printed, per inference (kind "none" without a PMU report)."""
    return measured_cycles(
        log,
        f"console log {source}",
        "as the firmware printed them: the NPU's cycle counter (ethosu_pmu_cycle_cntr, "
        "or the ML kit's NPU TOTAL)",
    )


def run_entry(
    log: UartLog,
    source: Path,
    figures: CycleFigures,
    check: OutputCheck | None = None,
    cycle_check: CycleCheck | None = None,
) -> dict[str, Any]:
    """The run entry `deploy` writes into report.json (runner "log"), plus the verdict;
    figures: console_cycles(log, source)."""
    result = verdict(log, check)
    cycles = {
        "kind": figures.kind,
        "source": figures.source,
        "npu_cycles": figures.npu_cycles,
        "total_cycles": None,
        "cpu_cycles": figures.cpu_cycles,
        "note": figures.note if figures.kind == "measured" else "the log holds no PMU report",
        "beats": axi_beats(log.pmu_counters),
        "counters": {c.name: per_inference(c.count) for c in log.pmu_counters},
    }
    if cycle_check is not None:
        cycles["check"] = cycle_check_entry(cycle_check)
    return {
        "runner": "log",
        "verdict": result.text,
        "status": result.status,
        "passed": result.passed,
        "reason": result.reason,
        "cycles": cycles,
        "outputs_match_reference": check.match if check else None,
        "max_diff_lsb": check.max_diff_lsb if check else None,
        "exact_match_rate": check.exact_match_rate if check else None,
        "details": {
            "log": str(source),
            "printed_outputs": [list(values) for values in log.outputs],
            "output_indices": [list(indices) for indices in log.output_indices],
            "outputs_elided": log.outputs_elided,
            "outputs": check.note if check else "not compared (no --program)",
            "top_classes": [list(pair) for pair in log.top_classes],
            "inference_ms": log.inference_ms,
            "inferences": log.inferences,
            "bundleio": ["PASS" if ok else "FAIL" for ok in log.test_results],
            "complete": log.complete or log.eot,
            "banners": log.banners,
            "failures": [str(f) for f in log.failures],
            "lines": log.line_count,
        },
    }
