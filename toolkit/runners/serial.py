"""The serial-board runner: flash a board, listen to its UART, read what the executor runner says.

Per run: the program and its inputs go into a BundleIO program (.bpte) with the host reference's
outputs as expected values, so the board checks itself (Test_result: PASS/FAIL). The board's
[board] table says how to build and flash the image and how the program starts (the flash itself,
a reset command, or the reset button). The port is opened before flashing, so the start of the
output is never missed, and the UART is parsed with the FVP runner's parser, every line from the
first byte on. With --no-flash (the user's own firmware) nothing is built, flashed or reset: the
runner listens while the user starts the firmware, and BundleIO lines are used when present.
An image that runs the model on all-ones inputs (board.inputs = "ones": ExecuTorch's Zephyr
hello-executorch sample) has no BundleIO: the job evaluates it on all-ones inputs (fixed_inputs).

Faults: a silent board or one that never finishes is an error at the time limit; garbled bytes,
dropped lines and a reset mid-run (a second banner) are re-run up to board.retries times; a
disconnect is survived once by reopening the port. Every fault seen is listed in the result's
details. Outputs come only from a run whose capture is whole.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from ..artifacts import Program, RunResult
from ..errors import ToolError, UserError
from ..targets import BoardInputs, BoardSpec, Target
from .base import Availability
from .board_commands import run_steps
from .bundle_io import TestCase, write_bundle
from .console_log import verdict
from .serial_port import open_port, reopen_port
from .tosa_ref import TosaReferenceRunner
from .uart_log import UartLog, UartLogParser, axi_beats, measured_cycles, per_inference
from .uart_outputs import decode_outputs, missing_values

CYCLE_NOTE = "measured on the board: the executor runner's Ethos-U PMU report"
FIXED_ONES_NOTE = (
    "the firmware runs fixed all-ones inputs; outputs are compared on those (one sample)"
)
OWN_FIRMWARE_START_S = 120  # --no-flash: time for the user to start their firmware

Ending = Literal["end", "halted", "reset", "silent", "time-limit", "disconnected"]
FaultKind = Literal["garbled", "dropped", "reset", "disconnected"]


@dataclass(frozen=True)
class Capture:
    ending: Ending
    log: UartLog  # everything received
    raw_bytes: int
    raw_path: Path
    detail: str = ""


@dataclass(frozen=True)
class Fault:
    kind: FaultKind
    text: str


def _stop_reason(parser: UartLogParser) -> Ending | None:
    kinds = {f.kind for f in parser.failures}
    if "reset" in kinds:
        return "reset"
    if parser.halted:
        return "end"
    if kinds & {"fatal", "hard-fault"}:  # ET_CHECK failed: the runner aborts after this line
        return "halted"
    return None


def capture(link, raw_path: Path, first_output_limit_s: float, run_time_limit_s: float) -> Capture:
    """Read the port until the runner ends, stops, restarts or times out; raw bytes to raw_path.

    Every line is parsed from the first byte on: the run counts as started at the first line a
    runner is known to print (a log record, a banner, a PMU figure, an output, a failure).
    """
    import serial

    parser = UartLogParser()
    started_at: float | None = None
    stopping: Ending | None = None
    received = 0
    start = time.monotonic()
    with open(raw_path, "wb") as raw:
        while True:
            try:
                chunk = link.read(4096)
            except serial.SerialException as exc:
                return Capture("disconnected", parser.finish(), received, raw_path, str(exc))
            now = time.monotonic()
            raw.write(chunk)
            received += len(chunk)
            parser.feed(chunk)
            if started_at is None and parser.recognised:
                started_at = now
            if stopping is not None and not chunk:
                return Capture(stopping, parser.finish(), received, raw_path)
            if started_at is not None:
                stopping = stopping or _stop_reason(parser)
                if stopping == "reset":
                    return Capture("reset", parser.finish(), received, raw_path)
                if stopping is None and now - started_at > run_time_limit_s:
                    return Capture("time-limit", parser.finish(), received, raw_path)
            elif now - start > first_output_limit_s:
                return Capture("silent", parser.finish(), received, raw_path)


def _bundle_fail_line(log: UartLog) -> int | None:
    """The first line of the runner's BundleIO FAIL report, or None when it passed."""
    if not log.bundle_failed or log.first_bundle_failure is None:
        return None
    return log.first_bundle_failure[0]


def _transport_fault(cap: Capture) -> Fault | None:
    """The port went away, the board restarted, or bytes came garbled: worth a re-run."""
    log = cap.log
    if cap.ending == "disconnected":
        return Fault("disconnected", f"the port went away mid-run ({cap.detail})")
    if cap.ending == "reset":
        line = next(f.line_no for f in log.failures if f.kind == "reset")
        return Fault(
            "reset",
            f"the board restarted mid-run (a second runner banner at line {line} of the capture)",
        )
    if log.garbled_bytes:
        first = next(f for f in log.failures if f.kind == "garbled")
        return Fault(
            "garbled",
            f"{log.garbled_bytes} garbled byte(s), first at line {first.line_no}: {first.text}",
        )
    return None


def _missing_lines(log, program: Program, bundleio: bool, fail_line: int | None) -> str | None:
    """What the capture lacks of a whole run, or None."""
    missing = missing_values(log.outputs, program.output_specs)
    if missing is None and bundleio and len(log.test_results) != 1:
        missing = f"{len(log.test_results)} Test_result lines, expected 1"
    if missing is None and fail_line is None and not (log.complete or log.eot):
        missing = "no end marker ('Program complete, exiting.')"
    return missing


def check_capture(cap: Capture, program: Program, bundleio: bool = True) -> Fault | None:
    """None for a whole run; a Fault worth a re-run; ToolError for what a re-run cannot fix.

    bundleio: the image is our BundleIO runner, which must print one Test_result line; the user's
    own firmware (--no-flash) need not.
    """
    log = cap.log
    fault = _transport_fault(cap)
    if fault is not None:
        return fault
    fail_line = _bundle_fail_line(log)
    # After a BundleIO FAIL the runner logs the mismatch and aborts on purpose.
    unexplained = [f for f in log.failures if fail_line is None or f.line_no < fail_line]
    if unexplained:
        raise ToolError(
            f"the board {verdict(log).text}; failures:"
            + "".join(f"\n  {f}" for f in unexplained[:8])
            + f"\nUART capture: {cap.raw_path}\nlast lines:\n{log.tail()}"
        )
    if cap.ending in ("silent", "time-limit"):
        return None  # the caller turns these into errors with the board's hints
    if not log.outputs and not bundleio:
        raise ToolError(
            "the firmware printed no outputs (`Output[i][j]: ...` or `output[i]: "
            "tensor ...` lines): build it with output printing (ExecuTorch's "
            f"ET_LOG_DUMP_OUTPUT); UART capture: {cap.raw_path}"
        )
    missing = _missing_lines(log, program, bundleio, fail_line)
    return Fault("dropped", f"lines missing from the capture: {missing}") if missing else None


def _silent_error(
    cap: Capture, board: BoardSpec, port: str, baud: int, waited_s: float, flashed: bool
) -> ToolError:
    if cap.ending == "time-limit":
        return ToolError(
            f"the board on {port} started but did not finish within "
            f"{board.run_time_limit_s:g} s (board.run_time_limit_s): "
            f"{verdict(cap.log).text}; UART capture: {cap.raw_path}\nlast lines:\n{cap.log.tail()}"
        )
    heard = (
        f"{cap.raw_bytes} bytes but no line a runner prints (log record, banner, PMU "
        f"report, output or error): a wrong baud rate (board.baud is {baud}) or another "
        f"program on the board"
        if cap.raw_bytes
        else "nothing at all"
    )
    start = {
        "flash": "the flash command should have started it",
        "command": "the reset command should have started it",
        "manual": "press the board's reset button after flashing",
    }[board.reset]
    if not flashed:
        start = "--no-flash: start your firmware while etk listens"
    return ToolError(
        f"the board on {port} is silent: {heard} within "
        f"{waited_s:g} s of starting ({start}); check the port "
        f"(`etk ports`) and that the image is the ExecuTorch executor runner; "
        f"UART capture: {cap.raw_path}"
    )


class SerialRunner:
    """Runs a Program on a real board over a serial port; cycles are the board's PMU counts."""

    name = "serial"

    def __init__(
        self,
        port: str | None = None,
        baud: int | None = None,
        runner_elf: Path | None = None,
        reference=None,
        run_root: Path | None = None,
        build: bool = True,
        flash: bool = True,
        notify=None,
    ):
        self.port = port
        self.baud = baud
        self.runner_elf = runner_elf
        self.reference = reference or TosaReferenceRunner()  # the BundleIO expected outputs
        self.run_root = run_root
        # --no-build: flash the prebuilt image; --no-flash: the user's own firmware, which the
        # user starts: capture and parse only (no build, flash or reset, no BundleIO needed).
        self.build = build and flash
        self.flash = flash
        self.notify = notify or (lambda message: print(message, file=sys.stderr, flush=True))

    def fixed_inputs(self, target: Target) -> BoardInputs | None:
        """ "ones" when the image etk builds and flashes runs the model on all-ones inputs whatever
        it is given (the job then evaluates on those); None when it runs the inputs given."""
        board = target.board_spec
        return "ones" if self.flash and board is not None and board.inputs == "ones" else None

    def _board(self, target: Target) -> tuple[BoardSpec, str, int]:
        board = target.board_spec
        if board is None:
            raise UserError(
                f"target '{target.name}' has no [board] table in {target.source}: "
                f"use a board target (see `etk targets`) for --runner serial"
            )
        port = self.port or board.port
        if not port:
            raise UserError(
                f"no serial port for {board.name}: pass --port (see `etk ports`) or "
                f"set board.port in {target.source}"
            )
        return board, port, self.baud or board.baud

    def availability(self, target: Target, program_npu: str) -> Availability:
        try:
            board, port, baud = self._board(target)
            import serial  # noqa: F401
        except UserError as exc:
            return Availability(False, str(exc))
        except ImportError:
            return Availability(False, "pyserial is not installed: pip install pyserial")
        if program_npu not in target.supported_npus:
            return Availability(
                False, f"{board.name} has {', '.join(target.supported_npus)}, not {program_npu}"
            )
        if not os.path.exists(port):
            return Availability(
                False,
                f"serial port {port} not found: connect the board, see `etk ports`, or pass --port",
            )
        return Availability(
            True,
            f"{board.name} on {port} at {baud} baud (cycles measured by the board's Ethos-U PMU)",
        )

    def _image(self, board: BoardSpec, target: Target, run_dir: Path) -> Path:
        if self.runner_elf is not None:
            return Path(self.runner_elf).resolve()
        if board.image:
            path = Path(os.path.expandvars(board.image)).expanduser()
            return path if path.is_absolute() else (target.source.parent / path).resolve()
        if not board.build_command and any(
            "{elf}" in s for s in board.flash_command + board.reset_command
        ):
            raise UserError(
                f"{board.name}: the flash command needs a runner image ({{elf}}): "
                f"pass --runner-elf, set board.image or board.build in "
                f"{target.source}"
            )
        return run_dir / "runner.elf"  # where board.build writes it

    def run_samples(self, program: Program, samples: Sequence, target: Target, expected=None):
        """Every sample, on one board start where the firmware allows it (serial_samples.py);
        expected: the host reference's outputs per sample (else the reference runner's)."""
        from .serial_samples import run_board_samples

        return run_board_samples(self, program, samples, target, expected)

    def run(self, program: Program, inputs: Sequence[np.ndarray], target: Target) -> RunResult:
        board, port, baud = self._board(target)
        if self.fixed_inputs(target) == "ones" and not all(
            np.all(np.asarray(x) == 1) for x in inputs
        ):
            raise UserError(
                f"{board.name}: the image {target.source} builds runs the model on all-ones "
                f'inputs (board.inputs = "ones"), not on these inputs, so its outputs cannot '
                f"be checked on them; `etk deploy` evaluates such a board on all-ones inputs, or "
                f"flash your own BundleIO build of ExecuTorch's arm_executor_runner and use "
                f"--no-build --no-flash"
            )
        run_dir = ((self.run_root or program.out_dir) / f"serial-{program.variant}").resolve()
        run_dir.mkdir(parents=True, exist_ok=True)
        expected = self.reference.run(program, list(inputs), target).outputs
        bpte = write_bundle(
            program.pte_path,
            [TestCase(tuple(inputs), tuple(expected))],
            program.input_specs,
            program.output_specs,
            run_dir / "program.bpte",
        )
        values = {
            "pte": str(program.pte_path.resolve()),
            "bpte": str(bpte),
            "port": port,
            "elf": str(self._image(board, target, run_dir)) if self.flash else "",
        }
        link = self._open_link(port, baud)  # before building and flashing: miss nothing
        try:
            if board.build_command and self.build:
                run_steps(
                    "build",
                    board.build_command,
                    values,
                    board.build_time_limit_s,
                    run_dir / "build.log",
                    run_dir,
                )
            cap, faults, link = self._attempts(board, port, baud, values, run_dir, program, link)
        finally:
            link.close()
        return self._result(
            cap, faults, program, board, port, baud, bpte, self.fixed_inputs(target)
        )

    def _open_link(self, port: str, baud: int):
        return open_port(port, baud)

    def _reopen_link(self, port: str, baud: int, time_limit_s: float):
        return reopen_port(port, baud, time_limit_s)

    def _start(self, board: BoardSpec, attempt: int, values: dict, run_dir: Path) -> None:
        if not self.flash:
            self.notify(
                f"etk: listening on {values['port']}: start your firmware now (reset the "
                f"board); this run's program is {values['pte']} (with inputs and "
                f"expected outputs: {values['bpte']})"
            )
            return
        if attempt == 1 or board.reset == "flash":
            run_steps(
                "flash",
                board.flash_command,
                values,
                board.flash_time_limit_s,
                run_dir / f"flash-{attempt}.log",
                run_dir,
            )
        if board.reset == "command":
            run_steps(
                "reset",
                board.reset_command,
                values,
                board.flash_time_limit_s,
                run_dir / f"reset-{attempt}.log",
                run_dir,
            )

    def _attempts(
        self,
        board: BoardSpec,
        port: str,
        baud: int,
        values: dict,
        run_dir: Path,
        program: Program,
        link,
    ):
        faults: list[Fault] = []
        retries, reconnects = board.retries, 1
        attempt = 0
        while True:
            attempt += 1
            link.reset_input_buffer()  # whatever the board said before this start
            self._start(board, attempt, values, run_dir)
            first_output_s = (
                board.banner_time_limit_s
                if self.flash
                else max(board.banner_time_limit_s, OWN_FIRMWARE_START_S)
            )
            cap = capture(
                link, run_dir / f"uart-{attempt}.log", first_output_s, board.run_time_limit_s
            )
            fault = check_capture(cap, program, bundleio=self.flash and board.inputs == "bundled")
            if fault is None and cap.ending in ("silent", "time-limit"):
                raise _silent_error(cap, board, port, baud, first_output_s, self.flash)
            if fault is None:
                return cap, faults, link
            faults.append(fault)
            if fault.kind == "disconnected" and reconnects:
                reconnects -= 1
                link.close()
                link = self._reopen_link(port, baud, board.reconnect_time_limit_s)
                continue
            if fault.kind != "disconnected" and retries:
                retries -= 1
                continue
            raise ToolError(
                f"no whole run from {board.name} on {port} after {attempt} "
                f"attempt(s):"
                + "".join(f"\n  attempt {n}: {f.kind}: {f.text}" for n, f in enumerate(faults, 1))
                + f"\nUART captures: {run_dir}/uart-*.log"
            )

    def _result(
        self,
        cap: Capture,
        faults: list[Fault],
        program: Program,
        board: BoardSpec,
        port: str,
        baud: int,
        bpte: Path,
        fixed: BoardInputs | None,
    ) -> RunResult:
        log = cap.log
        decoded = decode_outputs(log.outputs, program.output_specs, program.output_quant)
        source = f"{board.name} Ethos-U PMU ethosu_pmu_cycle_cntr"
        cycles = measured_cycles(log, source, CYCLE_NOTE)
        details = {
            "board": board.name,
            "port": port,
            "baud": baud,
            "bundleio": ["PASS" if ok else "FAIL" for ok in log.test_results],
            "pmu_counters": {c.name: per_inference(c.count) for c in log.pmu_counters},
            "beats": axi_beats(log.pmu_counters),
            "inferences": log.inferences,
            "firmware": "etk's build and flash" if self.flash else "the user's own (--no-flash)",
            "attempts": len(faults) + 1,
            "faults": [f"{f.kind}: {f.text}" for f in faults],
            "outputs": decoded.note,
            "log": str(cap.raw_path),
            "bpte": str(bpte),
        }
        if fixed == "ones":
            details["inputs"] = FIXED_ONES_NOTE
        return RunResult(runner=self.name, outputs=decoded.arrays, cycles=cycles, details=details)
