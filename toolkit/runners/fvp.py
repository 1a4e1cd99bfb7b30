"""The Corstone FVP runner: ExecuTorch's semihosting executor runner on an Arm Ecosystem FVP.

A run folder holds program.pte, the inputs i0.bin... (raw little-endian), the runner's
out-N.bin outputs and the FVP's log (fvp.log). The FVP reads and writes them through
semihosting with the folder as its working directory, so the command line the runner sees
stays short (the FVP truncates it beyond 255 characters).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..artifacts import CycleFigures, Program, RunResult, TensorSpec
from ..errors import ToolError, UserError
from ..npu import NpuConfig
from ..targets import FvpSpec, Target
from .base import Availability
from .console_log import verdict
from .tensor_checks import check_tensors
from .uart_log import UartLog, UartLogParser, axi_beats, measured_cycles, per_inference

FVP_DOWNLOAD_URL = "https://developer.arm.com/downloads/-/arm-ecosystem-fvps"
SEMIHOSTING_CMD_LINE_MAX = 255  # the FVP truncates longer semihosting command lines
CYCLE_SOURCE = "FVP PMU ethosu_pmu_cycle_cntr"
CYCLE_NOTE = (
    "FVP figures: NPU cycles are approximate and FVP CPU cycles are not accurate; "
    "FPGA or silicon gives exact figures"
)
FAST_CYCLES = CycleFigures(
    kind="none",
    source="FVP with --fvp-fast (ethosu.extra_args=--fast)",
    note="the FVP's fast Ethos-U model does not model timing: its PMU counts are not meaningful "
    "and are not reported; run without --fvp-fast for measured cycles",
)
_POLL_S = 0.05
_HALT_GRACE_S = 1.0  # how long the FVP may keep running after the program ended or faulted


def fvp_search_dirs() -> list[Path]:
    """Folders searched for FVP binaries: ETK_FVP_PATH first, then PATH."""
    dirs = os.environ.get("ETK_FVP_PATH", "").split(os.pathsep)
    dirs += os.environ.get("PATH", "").split(os.pathsep)
    return [Path(d) for d in dirs if d]


def find_fvp(binary: str) -> Path | None:
    for folder in fvp_search_dirs():
        candidate = folder / binary
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def how_to_get_fvp(binary: str) -> str:
    product = "Corstone-320" if "SSE-320" in binary else "Corstone-300"
    return (
        f"download the {product} Ecosystem FVP from {FVP_DOWNLOAD_URL} (or run ExecuTorch's "
        f"examples/arm/setup.sh --i-agree-to-the-contained-eula), then put the folder holding "
        f"{binary} on PATH or in ETK_FVP_PATH"
    )


def how_to_build_runner(target: Target, npu: NpuConfig) -> str:
    return (
        "build it in an ExecuTorch checkout with backends/arm/scripts/build_executor_runner.sh "
        f"--pte=semihosting --target={npu.accelerator} --system_config={npu.system_config} "
        f"--memory_mode={npu.memory_mode} --output=DIR (after examples/arm/setup.sh and "
        f"backends/arm/scripts/build_executorch.sh), then pass --runner-elf "
        f"DIR/arm_executor_runner, set ETK_RUNNER_ELF, or set fvp.runner_elf in "
        f"{target.source}"
    )


@dataclass(frozen=True)
class RunnerElf:
    path: Path | None
    source: str  # where the path came from: "--runner-elf", "ETK_RUNNER_ELF", the target file


def find_runner_elf(target: Target, explicit: Path | None = None) -> RunnerElf:
    if explicit is not None:
        return RunnerElf(Path(explicit), "--runner-elf")
    if os.environ.get("ETK_RUNNER_ELF"):
        return RunnerElf(Path(os.environ["ETK_RUNNER_ELF"]), "ETK_RUNNER_ELF")
    if target.fvp is not None and target.fvp.runner_elf:
        path = Path(target.fvp.runner_elf).expanduser()
        if not path.is_absolute():
            path = target.source.parent / path
        return RunnerElf(path, str(target.source))
    return RunnerElf(None, "")


def semihosting_cmd_line(n_inputs: int, server: bool = False) -> str:
    """The executor runner's argv, relative to the run folder; server: its semihosting server
    mode (one inference per line on stdin, inputs reloaded each time)."""
    if n_inputs < 1:
        raise UserError("the semihosting executor runner needs at least one model input")
    cmd = "executor_runner -m program.pte -o out" + "".join(
        f" -i i{n}.bin" for n in range(n_inputs)
    )
    cmd += " --server_mode true" if server else ""
    if len(cmd) > SEMIHOSTING_CMD_LINE_MAX:
        raise UserError(
            f"a model with {n_inputs} inputs needs a {len(cmd)}-character semihosting command "
            f"line; the FVP truncates it beyond {SEMIHOSTING_CMD_LINE_MAX} characters, so the FVP "
            f"runner cannot run it (use the sim or tosa-ref runner, or fewer inputs)"
        )
    return cmd


def _check_no_fast(fvp: FvpSpec, source: Path) -> None:
    """`ethosu.extra_args=--fast` makes NPU cycle counts meaningless; we always report them."""
    settings = [f"{k}={v}" for k, v in fvp.parameters.items()]
    if fvp.config_file is not None:
        settings += fvp.config_file.read_text().splitlines()
    for setting in settings:
        key, _, value = setting.partition("=")
        if key.strip().endswith("extra_args") and "--fast" in value:
            raise UserError(
                f"{source}: '{setting.strip()}' makes FVP cycle counts meaningless; "
                f"remove it (etk reports the FVP's cycles)"
            )


def _param(value: str | int | bool) -> str:
    return str(int(value)) if isinstance(value, bool) else str(value)


def fvp_command(
    target: Target,
    npu: NpuConfig,
    run_dir: Path,
    runner_elf: Path,
    n_inputs: int,
    time_limit_s: int | None = None,
    fast: bool = False,
    server: bool = False,
) -> list[str]:
    """The FVP command line; the first element is the binary's name, not its path.

    fast: the Ethos-U model without timing, as ExecuTorch's run_fvp.sh --fast passes it
    (`ethosu.extra_args=--fast`): much quicker, but its cycle counts are not meaningful.
    """
    fvp = target.fvp
    if fvp is None:
        raise UserError(f"target '{target.name}' has no [fvp] section in {target.source}")
    _check_no_fast(fvp, target.source)
    cpu = fvp.cpu_prefix
    cmd = [fvp.binary_for(npu.accelerator)]
    if fvp.config_file is not None:
        cmd += ["-f", str(fvp.config_file)]
    cmd += ["-C", f"{fvp.num_macs_param}={npu.macs}"]
    for key, value in fvp.parameters.items():
        cmd += ["-C", f"{key}={_param(value)}"]
    if fast:
        cmd += ["-C", f"{fvp.num_macs_param.rsplit('.', 1)[0]}.extra_args=--fast"]
    cmd += [
        "-C",
        f"{cpu}.semihosting-enable=1",
        "-C",
        f"{cpu}.semihosting-stack_base=0",
        "-C",
        f"{cpu}.semihosting-heap_limit=0",
        "-C",
        f"{cpu}.semihosting-cwd={run_dir}",
        "-C",
        f"{cpu}.semihosting-cmd_line='{semihosting_cmd_line(n_inputs, server)}'",
        "-a",
        str(runner_elf),
        "--timelimit",
        str(time_limit_s if time_limit_s is not None else fvp.time_limit_s),
    ]
    return cmd


def write_inputs(run_dir: Path, inputs: Sequence[np.ndarray], specs: Sequence[TensorSpec]) -> None:
    check_tensors(inputs, specs, "input")
    for n, array in enumerate(inputs):
        array = np.asarray(array)
        data = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<")).tobytes()
        _overwrite(run_dir / f"i{n}.bin", data)


def _overwrite(path: Path, data: bytes) -> None:
    """The next sample's inputs over the last one's, in place: truncating frees the file's
    blocks and allocates them again (0.5-1 ms a file on a quiet ext4 mounted with discard, 45 ms
    on a loaded one: most of what server mode added per sample)."""
    try:
        if path.stat().st_size == len(data):
            with open(path, "r+b") as handle:
                handle.write(data)
            return
    except FileNotFoundError:
        pass
    path.write_bytes(data)


def read_outputs(run_dir: Path, specs: Sequence[TensorSpec]) -> tuple[np.ndarray, ...]:
    found = sorted(p.name for p in run_dir.glob("out-*.bin"))
    if len(found) != len(specs):
        raise ToolError(
            f"the runner wrote {len(found)} output files "
            f"({', '.join(found) or 'none'}) in {run_dir}; the program has "
            f"{len(specs)} outputs"
        )
    outputs = []
    for n, spec in enumerate(specs):
        path = run_dir / f"out-{n}.bin"
        dtype = np.dtype(spec.dtype)
        expected = int(np.prod(spec.shape, dtype=np.int64)) * dtype.itemsize
        data = path.read_bytes() if path.is_file() else b""
        if len(data) != expected:
            raise ToolError(
                f"{path} holds {len(data)} bytes; output {n} "
                f"({spec.dtype}{list(spec.shape)}) needs {expected}"
            )
        raw = np.frombuffer(data, dtype=dtype.newbyteorder("<")).reshape(spec.shape)
        outputs.append(raw.astype(dtype))
    return tuple(outputs)


@dataclass(frozen=True)
class FvpSetup:
    """What the FVP runner found for one NPU, and what is missing with how to get it."""

    binary: Path | None
    runner_elf: Path | None
    missing: tuple[str, ...]


@dataclass(frozen=True)
class _Exit:
    returncode: int | None  # None when we killed it
    timed_out: bool


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def _run_fvp(
    argv: list[str], cwd: Path, log_path: Path, hard_limit_s: float
) -> tuple[_Exit, UartLog]:
    """Run the FVP in its own process group, logging to log_path; kill the group at the limit."""
    parser = UartLogParser()
    with open(log_path, "wb") as log, open(log_path, "rb") as reader:
        try:
            proc = subprocess.Popen(
                argv,
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as exc:
            raise ToolError(f"cannot start the FVP {argv[0]}: {exc}") from None
        start = time.monotonic()
        halted_at: float | None = None
        timed_out = False
        try:
            while proc.poll() is None:
                parser.feed(reader.read())
                now = time.monotonic()
                if parser.halted and halted_at is None:
                    halted_at = now
                if now - start > hard_limit_s:
                    timed_out = True
                    break
                if halted_at is not None and now - halted_at > _HALT_GRACE_S:
                    break
                time.sleep(_POLL_S)
        finally:
            killed = proc.poll() is None
            if killed:
                _kill_group(proc)
        parser.feed(reader.read())
    return _Exit(None if killed else proc.returncode, timed_out), parser.finish()


_HINTS = {
    "hard-fault": "the CPU faulted: a runner ELF built for another NPU or memory mode, or a "
    "model too large for the runner's memory pools, are common causes",
    "time-limit": "the FVP stopped at its --timelimit: raise fvp.time_limit_s in the target file "
    "for large models",
    "garbled": "the UART output is not text: check that the runner ELF was built for this FVP",
}


def _failure_message(what: str, log: UartLog, log_path: Path, argv: list[str]) -> str:
    problems = "".join(f"\n  {f}" for f in log.failures[:8])
    hints = "".join(
        f"\n{_HINTS[k]}" for k in dict.fromkeys(f.kind for f in log.failures) if k in _HINTS
    )
    return (
        f"FVP run failed: {what}; the program {verdict(log).text}{problems}{hints}\n"
        f"log: {log_path}\n"
        f"command: {' '.join(argv)}\nlast log lines:\n{log.tail()}"
    )


class FvpRunner:
    """Runs a Program on the target's Corstone FVP; cycles are the FVP's PMU counts."""

    name = "fvp"

    def __init__(
        self,
        runner_elf: Path | None = None,
        time_limit_s: int | None = None,
        kill_grace_s: float = 10.0,
        run_root: Path | None = None,
        fast: bool = False,
        one_start: str = "auto",
    ):
        self.runner_elf = runner_elf
        self.fast = fast  # --fvp-fast: no meaningful cycles
        # --one-start: auto (one FVP launch for all samples when the runner ELF has server
        # mode), on (required), off (one launch per sample)
        self.one_start = one_start
        self.time_limit_s = time_limit_s
        self.kill_grace_s = kill_grace_s  # on top of the FVP's own --timelimit
        self.run_root = run_root

    def locate(self, target: Target, accelerator: str) -> FvpSetup:
        if target.fvp is None:
            return FvpSetup(
                None, None, (f"target '{target.name}' has no [fvp] section in {target.source}",)
            )
        try:
            npu = target.npu(accelerator)
            binary = target.fvp.binary_for(accelerator)
        except UserError as exc:
            return FvpSetup(None, None, (str(exc),))
        missing = []
        fvp_path = find_fvp(binary)
        if fvp_path is None:
            missing.append(
                f"FVP binary {binary} not found on PATH or in ETK_FVP_PATH: "
                f"{how_to_get_fvp(binary)}"
            )
        elf = find_runner_elf(target, self.runner_elf)
        if elf.path is None:
            missing.append(
                f"no executor runner ELF (--runner-elf, ETK_RUNNER_ELF or "
                f"fvp.runner_elf in the target file): "
                f"{how_to_build_runner(target, npu)}"
            )
        elif not elf.path.is_file():
            missing.append(
                f"runner ELF {elf.path} (from {elf.source}) does not exist: "
                f"{how_to_build_runner(target, npu)}"
            )
        return FvpSetup(fvp_path, elf.path, tuple(missing))

    def availability(self, target: Target, program_npu: str) -> Availability:
        setup = self.locate(target, program_npu)
        if setup.missing:
            return Availability(False, "; ".join(setup.missing))
        return Availability(True, f"{setup.binary} with runner ELF {setup.runner_elf}")

    def run_samples(self, program: Program, samples: Sequence, target: Target, expected=None):
        """Every sample, in one FVP launch where the runner ELF allows it (fvp_server.py)."""
        from .fvp_server import run_fvp_samples

        return run_fvp_samples(self, program, samples, target)

    def run(self, program: Program, inputs: Sequence[np.ndarray], target: Target) -> RunResult:
        setup = self.locate(target, program.npu.accelerator)
        if setup.missing or target.fvp is None or setup.binary is None or setup.runner_elf is None:
            raise UserError(f"cannot run on the FVP: {'; '.join(setup.missing)}")
        run_dir = ((self.run_root or program.out_dir) / f"fvp-{program.variant}").resolve()
        time_limit = self.time_limit_s if self.time_limit_s is not None else target.fvp.time_limit_s
        cmd = fvp_command(
            target,
            program.npu,
            run_dir,
            setup.runner_elf,
            len(program.input_specs),
            time_limit,
            self.fast,
        )
        argv = [str(setup.binary), *cmd[1:]]
        run_dir.mkdir(parents=True, exist_ok=True)
        for stale in [*run_dir.glob("out-*.bin"), *run_dir.glob("i*.bin")]:
            stale.unlink()
        shutil.copyfile(program.pte_path, run_dir / "program.pte")
        write_inputs(run_dir, inputs, program.input_specs)
        log_path = run_dir / "fvp.log"
        exit_, log = _run_fvp(argv, run_dir, log_path, time_limit + self.kill_grace_s)

        if exit_.timed_out:
            raise ToolError(
                _failure_message(
                    f"no result within the {time_limit} s time limit (+{self.kill_grace_s:g} s "
                    f"grace): the FVP was killed, its log kept",
                    log,
                    log_path,
                    argv,
                )
            )
        if log.failures:
            raise ToolError(
                _failure_message(
                    f"the log shows {len(log.failures)} failure marker(s)", log, log_path, argv
                )
            )
        if exit_.returncode not in (0, None):
            raise ToolError(
                _failure_message(
                    f"the FVP exited with code {exit_.returncode}", log, log_path, argv
                )
            )
        if not log.complete:
            raise ToolError(
                _failure_message(
                    "the runner never printed 'Program complete, exiting.'", log, log_path, argv
                )
            )
        outputs = read_outputs(run_dir, program.output_specs)
        cycles = FAST_CYCLES if self.fast else measured_cycles(log, CYCLE_SOURCE, CYCLE_NOTE)
        return RunResult(
            runner="fvp",
            outputs=outputs,
            cycles=cycles,
            details=_details(log, log_path, argv, program, target),
        )


def _details(
    log: UartLog, log_path: Path, argv: list[str], program: Program, target: Target
) -> dict:
    details: dict = {
        "pmu_counters": {c.name: per_inference(c.count) for c in log.pmu_counters},
        "beats": axi_beats(log.pmu_counters),
        "inferences": log.inferences,
        "log": str(log_path),
        "command": argv,
    }
    expected = target.npu(program.npu.accelerator)
    if (expected.system_config, expected.memory_mode) != (
        program.npu.system_config,
        program.npu.memory_mode,
    ):
        details["warning"] = (
            f"the program was compiled for {program.npu.system_config}/{program.npu.memory_mode}"
            f" but {target.source} says the runner is built for "
            f"{expected.system_config}/{expected.memory_mode}: the cycles may not be comparable"
        )
    return details
