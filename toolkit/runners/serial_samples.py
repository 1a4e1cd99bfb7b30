"""Many samples on one board start: a BundleIO program with one test set per sample, flashed
once, on firmware that loops over the bundle's test sets (board.test_sets = "all").

Each test set ends with the runner's own verdict line, `TEST: BundleIO index[k] Test_result:
PASS|FAIL` (arm_executor_runner.cpp verify_result), after its PMU report and Output lines: the
console is cut there into one part per sample. A sample that never ends (the board hangs) is
named, and the board is flashed again with the samples after it. ExecuTorch's own
arm_executor_runner runs test set 0 only (testset_idx = 0): on such firmware each sample is one
flash, and the result's note says so and what to build.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from ..artifacts import Program, RunResult
from ..errors import ToolError
from ..targets import BoardSpec, Target
from .board_commands import run_steps
from .bundle_io import TestCase, write_bundle
from .samples import (
    BUNDLE_DONE,
    SampleFailure,
    SampleLog,
    SampleRuns,
    Segment,
    failure_of,
    named_failures,
    one_run_per_start,
    per_start_note,
    segment_details,
)
from .uart_log import UartLog, measured_cycles
from .uart_outputs import decode_outputs, missing_values

FIRST_TEST_SET = (
    "the board's firmware runs BundleIO test set 0 only (ExecuTorch's arm_executor_runner: "
    "testset_idx = 0)"
)
BUILD_LOOP = (
    "build the runner to loop over every test set of the bundle (verify_result per index) and "
    'set board.test_sets = "all" in the target file for one flash'
)
OWN_FIRMWARE = "--no-flash: your firmware is started by hand"
_STOPS = {"fatal", "hard-fault", "reset"}
# the error records verify_result prints for a test set whose outputs differ: a result, not a fault
_BUNDLE_FAIL_LINES = (
    "don't match expected BundleIO",
    "Test_result: FAIL",
    "Bundle verification failed",
)


def capture_samples(
    link, raw_path: Path, n: int, first_output_s: float, per_sample_s: float
) -> tuple[list[Segment], UartLog, str]:
    """Read the port until n test sets ended, the firmware stopped, or a sample ran past
    per_sample_s; (segments, what came after the last one, how it ended)."""
    import serial

    console = SampleLog(BUNDLE_DONE)
    start = time.monotonic()
    progress: float | None = None
    with open(raw_path, "wb") as raw:
        while len(console.segments) < n:
            try:
                chunk = link.read(4096)
            except serial.SerialException:
                return console.segments, console.rest(), "disconnected"
            raw.write(chunk)
            seen = len(console.segments)
            console.feed(chunk)
            now = time.monotonic()
            if chunk and (progress is None or len(console.segments) > seen):
                progress = now
            stopped = {f.kind for f in console.current.failures} & _STOPS
            if (stopped or console.current.halted) and not chunk:
                return console.segments, console.rest(), "halted"
            if progress is None and now - start > first_output_s:
                return console.segments, console.rest(), "silent"
            if progress is not None and now - progress > per_sample_s:
                return console.segments, console.rest(), "time-limit"
    return console.segments, console.rest(), "end"


def _sample_result(
    segment: Segment, program: Program, board: BoardSpec, runner_name: str
) -> RunResult | str:
    """The sample's run, or why its part of the console holds none."""
    log = segment.log
    unexplained = [f for f in log.failures if not any(m in f.text for m in _BUNDLE_FAIL_LINES)]
    if unexplained:
        return unexplained[0].text.strip()
    missing = missing_values(log.outputs, program.output_specs)
    if missing is not None:
        return f"lines missing from the capture: {missing}"
    decoded = decode_outputs(log.outputs, program.output_specs, program.output_quant)
    cycles = measured_cycles(
        log, f"{board.name} Ethos-U PMU ethosu_pmu_cycle_cntr", "measured on the board"
    )
    details = {
        **segment_details(log),
        "bundleio": ["PASS" if ok else "FAIL" for ok in log.test_results],
        "test_set": segment.number,
        "outputs": decoded.note,
    }
    return RunResult(runner=runner_name, outputs=decoded.arrays, cycles=cycles, details=details)


def _flash_bundle(
    runner, board: BoardSpec, cases: list[TestCase], program: Program, values: dict, run_dir: Path
) -> None:
    start = values["start"]
    values["bpte"] = str(
        write_bundle(
            program.pte_path,
            cases,
            program.input_specs,
            program.output_specs,
            run_dir / f"program-{start}.bpte",
        )
    )
    runner._start(board, 1, values, run_dir)  # attempt 1: flash, then reset when asked to


def _bundle(runner, board, port, baud, program, samples, target, expected) -> SampleRuns:
    run_dir = ((runner.run_root or program.out_dir) / f"serial-{program.variant}").resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    if expected is None:
        expected = [runner.reference.run(program, list(s), target).outputs for s in samples]
    cases = [TestCase(tuple(s), tuple(e)) for s, e in zip(samples, expected)]
    values = {"pte": str(program.pte_path.resolve()), "port": port, "start": 0}
    values["elf"] = str(runner._image(board, target, run_dir))
    runs: list[RunResult | None] = [None] * len(samples)
    failures: list[SampleFailure] = []
    k, empty = 0, 0
    link = runner._open_link(port, baud)
    try:
        if board.build_command and runner.build:
            values["bpte"] = ""
            log = run_dir / "build.log"
            run_steps("build", board.build_command, values, board.build_time_limit_s, log, run_dir)
        while k < len(samples):
            values["start"] += 1
            link.reset_input_buffer()
            _flash_bundle(runner, board, cases[k:], program, values, run_dir)
            segments, rest, ending = capture_samples(
                link,
                run_dir / f"uart-{values['start']}.log",
                len(samples) - k,
                board.banner_time_limit_s,
                board.run_time_limit_s,
            )
            for segment in segments:
                outcome = _sample_result(segment, program, board, runner.name)
                index = k + segment.number
                if isinstance(outcome, str):
                    failures.append(SampleFailure(index, "failed", outcome))
                else:
                    runs[index] = outcome
            k += len(segments)
            if k < len(samples):
                failures.append(failure_of(k, rest, ending != "halted"))
                k += 1
            empty = empty + 1 if not segments else 0
            if empty >= 2 and k < len(samples):
                raise ToolError(_gave_up(board, failures, run_dir))
    finally:
        link.close()
    note = f"{len(samples)} samples in {values['start']} board start(s) (a bundle of test sets)"
    return SampleRuns(tuple(runs), tuple(failures), values["start"], "bundle", note)


def _gave_up(board: BoardSpec, failures: list[SampleFailure], run_dir: Path) -> str:
    return (
        f"{board.name}: two starts in a row ended before their first test set, so the rest "
        f"were not run:{named_failures(failures)}\nUART captures: {run_dir}/uart-*.log"
    )


def _one_per_start(runner, program: Program, samples: Sequence, target: Target, note: str):
    runs, failures = one_run_per_start(runner, program, samples, target)
    starts = sum(run.details.get("attempts", 1) if run is not None else 1 for run in runs)
    return SampleRuns(tuple(runs), tuple(failures), starts, "one per start", note)


def run_board_samples(
    runner, program: Program, samples: Sequence, target: Target, expected=None
) -> SampleRuns:
    board, port, baud = runner._board(target)
    if runner.flash and board.test_sets == "all" and runner.fixed_inputs(target) is None:
        return _bundle(runner, board, port, baud, program, samples, target, expected)
    if len(samples) == 1:
        return _one_per_start(runner, program, samples, target, "one sample, one start")
    if not runner.flash:
        note = per_start_note(OWN_FIRMWARE, "or pass --eval-samples 1")
    else:
        note = per_start_note(FIRST_TEST_SET, BUILD_LOOP)
    return _one_per_start(runner, program, samples, target, note)
