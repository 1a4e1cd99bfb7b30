"""Many samples in one FVP launch: ExecuTorch's semihosting server mode.

ExecuTorch's arm_executor_runner (main since pytorch/executorch#21913, after 1.5.1), started with
`--server_mode true`, loads the program once, then for each line it reads on stdin reloads the
`-i` input files, runs one inference, prints that inference's PMU report, writes out-N.bin and
prints `SERVER_INFERENCE_DONE n`. At the end of stdin it ends as usual ("Program complete,
exiting."). Here: write sample k's inputs, send a line, read until the marker, read the outputs.
A sample that fails (the runner's error line, the FVP exits) or hangs (no marker within the
target's time limit) is named; the FVP is started again for the samples after it.

A runner ELF without server mode (ExecuTorch 1.5.1's) is recognised by the absence of the
`--server_mode` argument string the runner parses: one launch per sample then (--one-start auto),
or a UserError (--one-start on).
"""

from __future__ import annotations

import os
import select
import shutil
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from ..artifacts import Program, RunResult
from ..errors import ToolError, UserError
from ..targets import Target
from .fvp import (
    CYCLE_NOTE,
    CYCLE_SOURCE,
    FAST_CYCLES,
    FvpSetup,
    _kill_group,
    fvp_command,
    read_outputs,
    write_inputs,
)
from .samples import (
    SERVER_DONE,
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
from .uart_log import measured_cycles

SERVER_FLAG = b"--server_mode"  # the argument string the server-mode runner parses
NEXT = b"next\n"  # the runner reads one line per inference; its text is not looked at
_HALT_GRACE_S = 1.0  # how long the FVP may keep running after the runner faulted or ended
_EXIT_GRACE_S = 10.0


def has_server_mode(elf: Path) -> bool:
    """Whether the runner ELF parses --server_mode (its argument string is in the image)."""
    return SERVER_FLAG in elf.read_bytes()


def no_server_mode(elf: Path) -> str:
    return (
        f"the runner ELF {elf} has no semihosting server mode (ExecuTorch 1.5.1's "
        "arm_executor_runner runs one inference per launch)"
    )


BUILD_SERVER = (
    "build arm_executor_runner from ExecuTorch main (server mode, pytorch/executorch#21913) "
    "with backends/arm/scripts/build_executor_runner.sh --pte=semihosting for one launch"
)


class FvpServer:
    """One FVP process in server mode, fed a sample at a time."""

    def __init__(self, argv: list[str], run_dir: Path, log_path: Path):
        self.run_dir = run_dir
        self.log_path = log_path
        self.console = SampleLog(SERVER_DONE)
        self._log = open(log_path, "wb")
        try:
            self.proc = subprocess.Popen(
                argv,
                cwd=run_dir,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as exc:
            self._log.close()
            raise ToolError(f"cannot start the FVP {argv[0]}: {exc}") from None
        self._open = True

    def infer(self, program: Program, inputs: Sequence, limit_s: float) -> Segment | None:
        """Sample inputs in, its segment of the console out; None when it failed or hung (the
        FVP is then stopped: `self.failed_log`, `self.hung` say how)."""
        write_inputs(self.run_dir, inputs, program.input_specs)
        for stale in self.run_dir.glob("out-*.bin"):
            stale.unlink()
        self.hung = False
        want = len(self.console.segments) + 1
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(NEXT)
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass  # the FVP is gone: its last words are still in the pipe
        deadline = time.monotonic() + limit_s
        halted_at: float | None = None
        while len(self.console.segments) < want:
            now = time.monotonic()
            if now > deadline or (halted_at is not None and now - halted_at > _HALT_GRACE_S):
                self.hung = now > deadline
                return None
            if not self._pump(min(0.5, deadline - now)):
                return None  # the FVP ended
            if halted_at is None and self.console.current.halted:
                halted_at = time.monotonic()
        return self.console.segments[want - 1]

    def _pump(self, timeout: float) -> bool:
        """Read what the FVP printed within timeout; False at the end of its output."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        ready, _, _ = select.select([fd], [], [], max(timeout, 0.0))
        if not ready:
            return True
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return False
        self._log.write(chunk)
        self.console.feed(chunk)
        return True

    def close(self, wait: bool = True) -> None:
        """End of stdin: the runner ends; the FVP group is killed if it does not (at once when
        not `wait`: after a sample failed or hung)."""
        if not self._open:
            return
        self._open = False
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        except BrokenPipeError:
            pass
        deadline = time.monotonic() + (_EXIT_GRACE_S if wait else 0.0)
        while time.monotonic() < deadline and self._pump(deadline - time.monotonic()):
            if self.console.current.halted:
                break
        if self.proc.poll() is None:
            _kill_group(self.proc)
        else:
            self.proc.wait()
        assert self.proc.stdout is not None
        self.proc.stdout.close()
        self._log.close()


def _sample_result(
    server: FvpServer, segment: Segment, program: Program, argv: list[str], fast: bool
) -> RunResult:
    outputs = read_outputs(server.run_dir, program.output_specs)
    log = segment.log
    cycles = FAST_CYCLES if fast else measured_cycles(log, CYCLE_SOURCE, CYCLE_NOTE)
    details = {
        **segment_details(log),
        "inferences": log.inferences,
        "sample_number": segment.number,
        "log": str(server.log_path),
        "command": argv,
    }
    return RunResult(runner="fvp", outputs=outputs, cycles=cycles, details=details)


def _one_sample(
    server: FvpServer,
    k: int,
    program: Program,
    samples: Sequence,
    argv: list[str],
    limit_s: float,
    fast: bool,
) -> RunResult | SampleFailure:
    segment = server.infer(program, samples[k], limit_s)
    if segment is None:
        return failure_of(k, server.console.rest(), server.hung)
    if segment.log.failures:
        return failure_of(k, segment.log, False)
    try:
        return _sample_result(server, segment, program, argv, fast)
    except ToolError as exc:
        return SampleFailure(k, "failed", str(exc).splitlines()[0])


def _serve(
    runner, setup: FvpSetup, program: Program, samples: Sequence, target: Target
) -> SampleRuns:
    assert target.fvp is not None and setup.binary is not None and setup.runner_elf is not None
    run_dir = ((runner.run_root or program.out_dir) / f"fvp-{program.variant}").resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(program.pte_path, run_dir / "program.pte")
    per_sample = runner.time_limit_s or target.fvp.time_limit_s
    runs: list[RunResult | None] = [None] * len(samples)
    failures: list[SampleFailure] = []
    starts, k, failed_first = 0, 0, 0
    while k < len(samples):
        starts += 1
        cmd = fvp_command(
            target,
            program.npu,
            run_dir,
            setup.runner_elf,
            len(program.input_specs),
            per_sample * (len(samples) - k),
            runner.fast,
            server=True,
        )
        argv = [str(setup.binary), *cmd[1:]]
        server = FvpServer(argv, run_dir, run_dir / f"fvp-{starts}.log")
        first, failed = k, False
        try:
            while k < len(samples):
                outcome = _one_sample(
                    server, k, program, samples, argv, per_sample + runner.kill_grace_s, runner.fast
                )
                k += 1
                if isinstance(outcome, SampleFailure):
                    failures.append(outcome)
                    failed = True
                    break
                runs[k - 1] = outcome
        finally:
            server.close(wait=not failed)
        failed_first = failed_first + 1 if runs[first] is None else 0
        if failed_first >= 2 and k < len(samples):
            raise ToolError(_gave_up(failures, starts, run_dir))
    note = f"{len(samples)} samples in {starts} FVP launch(es) (semihosting server mode)"
    return SampleRuns(tuple(runs), tuple(failures), starts, "server", note)


def _gave_up(failures: list[SampleFailure], starts: int, run_dir: Path) -> str:
    return (
        f"FVP server mode: the first sample of two launches in a row failed, so the rest were "
        f"not run ({starts} launches):{named_failures(failures)}\nlogs: {run_dir}/fvp-*.log"
    )


def _one_per_launch(runner, program: Program, samples: Sequence, target: Target, note: str):
    runs, failures = one_run_per_start(runner, program, samples, target)
    if not any(runs):
        raise ToolError(f"every sample failed on the FVP; sample 0: {failures[0].reason}")
    return SampleRuns(tuple(runs), tuple(failures), len(samples), "one per start", note)


def run_fvp_samples(runner, program: Program, samples: Sequence, target: Target) -> SampleRuns:
    setup = runner.locate(target, program.npu.accelerator)
    if setup.missing or setup.runner_elf is None:
        raise UserError(f"cannot run on the FVP: {'; '.join(setup.missing)}")
    if runner.one_start == "off":
        return _one_per_launch(
            runner, program, samples, target, "--one-start off: one FVP launch per sample"
        )
    if not has_server_mode(setup.runner_elf):
        if runner.one_start == "on":
            raise UserError(f"--one-start on: {no_server_mode(setup.runner_elf)}; {BUILD_SERVER}")
        note = per_start_note(no_server_mode(setup.runner_elf), BUILD_SERVER)
        return _one_per_launch(runner, program, samples, target, note)
    return _serve(runner, setup, program, samples, target)
