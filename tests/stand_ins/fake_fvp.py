"""A stand-in for Arm's Corstone FVPs running ExecuTorch's semihosting executor runner. TESTS ONLY.

Its cycle figures are invented constants (NPU_CYCLES, CPU_CYCLES, PMU_EVENT_COUNTS): they say
nothing about any model or NPU and must never be reported as measurements. It lives under
tests/stand_ins/ and is exposed only by `install(bin_dir)`, which writes wrappers named like the
real FVP binaries into a folder a test puts on PATH or ETK_FVP_PATH.

It accepts exactly the flags the toolkit's FVP runner passes (-f FILE, -C key=value, -a ELF,
--timelimit S) and rejects anything else: unknown options, parameters of another FVP's
components, any `extra_args` (the runner must never pass `--fast`: cycles are reported), a
num_macs the NPU does not offer or (ETK_FAKE_FVP_NUM_MACS) other than the test expects, a
semihosting command line over 255 characters. It reads the semihosting command line
(`executor_runner -m program.pte -o out -i i0.bin ...`) relative to semihosting-cwd, writes
out-N.bin and prints UART text in the executor runner's format.

Environment:
  ETK_FAKE_FVP_AS         the FVP binary name to act as (set by the wrappers)
  ETK_FAKE_FVP_REFERENCE  folder with out-N.npy (written as out-N.bin) and optionally in-N.npy
                          (iN.bin must hold exactly these bytes, little-endian)
  ETK_FAKE_FVP_NUM_MACS   the num_macs the test expects
  ETK_FAKE_FVP_FAST       1: accept ETHOSU.extra_args=--fast (etk deploy --fvp-fast)
  ETK_FAKE_FVP_MODE       ok (default) | hard-fault (then stops at --timelimit) | hang (ignores
                          --timelimit, with a child process) | garbage (non-text bytes) |
                          crash (the FVP dies by SIGSEGV) | fatal (runner E/F lines, exit 1)

Start-up cost and server mode (ExecuTorch main's `--server_mode true`, #21913): the fake honours
the flag only when the application (-a) holds the string `--server_mode`, as a runner built with
it does; an older runner ignores unknown arguments and runs once. In server mode each line on
stdin reloads the -i files, runs one inference, writes out-N.bin and prints
`SERVER_INFERENCE_DONE n`; the end of stdin ends the program.
  ETK_FAKE_FVP_STARTUP_S   seconds charged per launch before the runner prints anything
  ETK_FAKE_FVP_INFERENCE_S seconds charged per inference
  ETK_FAKE_FVP_LAUNCHES    a file: one line appended per launch (tests count launches)
  ETK_FAKE_FVP_SAMPLES     a folder of in-K-N.npy / out-K-N.npy: the inputs name the sample K,
                           whose outputs are written; its NPU cycles are NPU_CYCLES + 10 * K
  ETK_FAKE_FVP_SAMPLE_FAULTS  "K:hang,K:fatal,K:hard-fault": what sample K does
  ETK_FAKE_FVP_DELEGATES   N: print the per-delegate PMU report (#22511) for N delegates, which
                           split the run's cycles and counters evenly
"""

from __future__ import annotations

import os
import random
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

NPU_CYCLES = 123456  # invented
CPU_CYCLES = 654321  # invented
PMU_EVENT_COUNTS = (1111, 2222, 3333, 4444, 5555, 6666, 7777)  # invented
HANG_CHILD_PID_FILE = "hang-child.pid"


@dataclass(frozen=True)
class FvpModel:
    board: str
    cpu: str
    macs_param: str
    macs: tuple[int, ...]
    components: tuple[str, ...]  # parameter prefixes this FVP has
    required: dict[str, str]
    events: tuple[str, ...]


_U55_EVENTS = (
    "ETHOSU_PMU_AXI0_RD_DATA_BEAT_RECEIVED",
    "ETHOSU_PMU_AXI1_RD_DATA_BEAT_RECEIVED",
    "ETHOSU_PMU_AXI0_WR_DATA_BEAT_WRITTEN",
    "ETHOSU_PMU_NPU_IDLE",
)
_U85_EVENTS = (
    "ETHOSU_PMU_SRAM_RD_DATA_BEAT_RECEIVED",
    "ETHOSU_PMU_SRAM_WR_DATA_BEAT_WRITTEN",
    "ETHOSU_PMU_EXT_RD_DATA_BEAT_RECEIVED",
    "ETHOSU_PMU_EXT_WR_DATA_BEAT_WRITTEN",
    "ETHOSU_PMU_NPU_IDLE",
    "ETHOSU_PMU_MAC_ACTIVE",
    "ETHOSU_PMU_WD_ACTIVE",
)


def _board_required(board: str) -> dict[str, str]:
    return {
        f"{board}.visualisation.disable-visualisation": "1",
        f"{board}.telnetterminal0.start_telnet": "0",
        f"{board}.uart0.out_file": "-",
        f"{board}.uart0.shutdown_on_eot": "1",
    }


def _cpu_required(cpu: str) -> dict[str, str]:
    return {
        f"{cpu}.semihosting-enable": "1",
        f"{cpu}.semihosting-stack_base": "0",
        f"{cpu}.semihosting-heap_limit": "0",
    }


_CS300 = dict(
    board="mps3_board",
    cpu="cpu0",
    macs_param="ethosu.num_macs",
    components=("mps3_board.", "cpu0.", "ethosu."),
    required={**_board_required("mps3_board"), **_cpu_required("cpu0")},
    events=_U55_EVENTS,
)
MODELS = {
    "FVP_Corstone_SSE-300_Ethos-U55": FvpModel(macs=(32, 64, 128, 256), **_CS300),
    "FVP_Corstone_SSE-300_Ethos-U65": FvpModel(macs=(256, 512), **_CS300),
    "FVP_Corstone_SSE-320": FvpModel(
        board="mps4_board",
        cpu="mps4_board.subsystem.cpu0",
        macs_param="mps4_board.subsystem.ethosu.num_macs",
        macs=(128, 256, 512, 1024, 2048),
        components=("mps4_board.", "vis_hdlcd."),
        required={
            **_board_required("mps4_board"),
            **_cpu_required("mps4_board.subsystem.cpu0"),
            "vis_hdlcd.disable_visualisation": "1",
            "mps4_board.uart0.unbuffered_output": "1",
        },
        events=_U85_EVENTS,
    ),
}


def install(bin_dir: Path) -> Path:
    """Write wrappers named like the real FVP binaries into bin_dir; returns bin_dir."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name in MODELS:
        wrapper = bin_dir / name
        wrapper.write_text(
            f"#!/bin/sh\nETK_FAKE_FVP_AS={name} exec {shlex.quote(sys.executable)} "
            f'{shlex.quote(str(Path(__file__).resolve()))} "$@"\n'
        )
        wrapper.chmod(0o755)
    return bin_dir


class Rejected(Exception):
    pass


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def parse_args(argv: list[str]) -> tuple[dict[str, str], Path, int]:
    """-f/-C parameters, the application, the time limit; Rejected for anything else."""
    params: dict[str, str] = {}
    app: Path | None = None
    time_limit: int | None = None
    args = iter(argv)
    for arg in args:
        value = next(args, None)
        if value is None:
            raise Rejected(f"option {arg} needs a value")
        if arg == "-f":
            for line in Path(value).read_text().splitlines():
                if line.strip() and not line.lstrip().startswith("#"):
                    key, _, val = line.partition("=")
                    params[key.strip()] = _unquote(val)
        elif arg == "-C":
            key, sep, val = value.partition("=")
            if not sep:
                raise Rejected(f"-C {value}: expected key=value")
            params[key] = _unquote(val)
        elif arg == "-a":
            app = Path(value)
        elif arg == "--timelimit":
            time_limit = int(value)
        else:
            raise Rejected(f"unknown option {arg}")
    if app is None or not app.is_file():
        raise Rejected(f"application {app} not found (-a)")
    if time_limit is None:
        raise Rejected("no --timelimit: the toolkit always passes one")
    return params, app, time_limit


def check_params(model: FvpModel, params: dict[str, str]) -> tuple[Path, list[str]]:
    """The semihosting cwd and runner argv, after checking every parameter."""
    for key, value in params.items():
        if "extra_args" in key and (
            key != f"{model.macs_param.rsplit('.', 1)[0]}.extra_args"
            or value != "--fast"
            or os.environ.get("ETK_FAKE_FVP_FAST") != "1"
        ):
            raise Rejected(
                f"{key}={value}: extra_args only as --fvp-fast passes it (ETK_FAKE_FVP_FAST=1)"
            )
        if not key.startswith(model.components):
            raise Rejected(f"parameter '{key}' not found in this model")
    for key, value in model.required.items():
        if params.get(key) != value:
            raise Rejected(f"expected {key}={value}, got {params.get(key)!r}")
    macs = params.get(model.macs_param)
    if macs is None or int(macs) not in model.macs:
        raise Rejected(f"{model.macs_param}={macs}: this NPU offers {model.macs}")
    expected = os.environ.get("ETK_FAKE_FVP_NUM_MACS")
    if expected and int(macs) != int(expected):
        raise Rejected(f"{model.macs_param}={macs} but the test expects {expected}")
    cwd = Path(params.get(f"{model.cpu}.semihosting-cwd", ""))
    if not cwd.is_absolute() or not cwd.is_dir():
        raise Rejected(f"semihosting-cwd {cwd} is not an existing absolute folder")
    cmd_line = params.get(f"{model.cpu}.semihosting-cmd_line", "")
    if len(cmd_line) > 255:
        raise Rejected(
            f"semihosting-cmd_line is {len(cmd_line)} characters (the FVP truncates beyond 255)"
        )
    return cwd, shlex.split(cmd_line)


def _log(level: str, file: str, line: int, func: str, message: str) -> None:
    print(f"{level} [executorch:{file}:{line} {func}()] {message}", flush=True)


def _runner(message: str, line: int = 100, level: str = "I") -> None:
    _log(level, "arm_executor_runner.cpp", line, "main", message)


def _perf(message: str, line: int = 150) -> None:
    _log("I", "arm_perf_monitor.cpp", line, "StopMeasurements", message)


def _option(argv: list[str], flag: str) -> list[str]:
    return [argv[i + 1] for i in range(len(argv) - 1) if argv[i] == flag]


def run_program(model: FvpModel, cwd: Path, argv: list[str], time_limit: int, app: Path) -> int:  # noqa: C901 - a stand-in's CLI branches
    _charge_launch()
    if "--server_mode" in argv and b"--server_mode" in app.read_bytes():
        return serve(model, cwd, argv)
    _runner("Running executor with parameter:")
    _runner(f"   {argv[0]}")
    for i in range(1, len(argv) - 1, 2):
        _runner(f"   {argv[i]} {argv[i + 1]}")
    (pte,) = _option(argv, "-m")
    (out_base,) = _option(argv, "-o")
    inputs = _option(argv, "-i")
    magic = "".join(
        c if c.isprintable() else "." for c in (cwd / pte).read_bytes()[4:8].decode("latin-1")
    ).ljust(4, ".")
    for n, name in enumerate(inputs, 1):
        _runner(f"Reading input tensor {n} from file {name}")
    _runner(f"PTE @ 0x70000000 [----{magic}]", line=640)

    mode = os.environ.get("ETK_FAKE_FVP_MODE", "ok")
    if mode == "hard-fault":
        print("Hard fault. irq=-13, pc=0x1000c2a4, lr=0x10003d01, xpsr=0x61000000", flush=True)
        time.sleep(time_limit)
        print("Info: Simulation is stopping. Reason: CPU time has been exceeded.", flush=True)
        return 0
    if mode == "hang":
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        (cwd / HANG_CHILD_PID_FILE).write_text(str(child.pid))
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        time.sleep(600)
        return 0
    if mode == "garbage":
        rng = random.Random(0)
        sys.stdout.buffer.write(bytes(rng.randrange(128, 256) for _ in range(300)) + b"\n")
        sys.stdout.flush()
        return 0
    if mode == "crash":
        os.kill(os.getpid(), signal.SIGSEGV)
    if mode == "fatal":
        _log(
            "E",
            "method.cpp",
            1375,
            "execute",
            "KernelCall failed at instruction 0:2 in operator aten::add.out: 0x12",
        )
        _runner(
            "In function run_model(), assert failed (status == Error::Ok): Execution of "
            "method forward failed with status 0x12",
            line=520,
            level="F",
        )
        return 1

    if os.environ.get("ETK_FAKE_FVP_SAMPLES"):  # outputs of the sample the inputs name
        return _one_sample(model, cwd, inputs, out_base)
    reference = Path(os.environ["ETK_FAKE_FVP_REFERENCE"])
    for n, name in enumerate(inputs):
        expected = reference / f"in-{n}.npy"
        if expected.is_file():
            want = np.load(expected)
            if (cwd / name).read_bytes() != want.astype(want.dtype.newbyteorder("<")).tobytes():
                _runner(f"input {name} differs from the test's in-{n}.npy", level="E")
                return 1
    events = model.events
    _perf("NPU Inferences : 1")
    _perf("NPU delegations: 1 (1.00 per inference)")
    _perf(f"Inference runtime: {CPU_CYCLES} CPU cycles total ({CPU_CYCLES:.2f} per inference)")
    _perf(
        "NOTE: CPU cycle values and ratio calculations require FPGA and identical CPU/NPU frequency"
    )
    _perf("Ethos-U PMU report:")
    _perf(f"ethosu_pmu_cycle_cntr : {NPU_CYCLES} ({NPU_CYCLES:.2f} per inference)")
    for i in range(len(events)):
        count = PMU_EVENT_COUNTS[i]
        _perf(f"ethosu_pmu_cntr{i} : {count} ({count:.2f} per inference)")
    _perf(f"Ethos-U PMU Events:[{', '.join(events)}]")
    _runner("1 inferences finished")
    n = 0
    while (reference / f"out-{n}.npy").is_file():
        array = np.load(reference / f"out-{n}.npy")
        _runner(f"Writing output to file: {out_base}-{n}.bin")
        (cwd / f"{out_base}-{n}.bin").write_bytes(
            array.astype(array.dtype.newbyteorder("<")).tobytes()
        )
        n += 1
    _runner("Model run: 1")
    _runner("Program complete, exiting.")
    return 0


def main(argv: list[str]) -> int:
    name = os.environ.get("ETK_FAKE_FVP_AS", "")
    if name not in MODELS:
        print(
            f"Error: fake_fvp.py must run as one of {', '.join(MODELS)} (ETK_FAKE_FVP_AS)",
            file=sys.stderr,
        )
        return 2
    model = MODELS[name]
    try:
        params, app, time_limit = parse_args(argv)
        cwd, runner_argv = check_params(model, params)
    except Rejected as exc:
        print(f"Error: {name}: {exc}", file=sys.stderr)
        return 1
    return run_program(model, cwd, runner_argv, time_limit, app)


def _charge_launch() -> None:
    launches = os.environ.get("ETK_FAKE_FVP_LAUNCHES")
    if launches:
        with open(launches, "a") as f:
            f.write(f"{os.getpid()}\n")
    time.sleep(float(os.environ.get("ETK_FAKE_FVP_STARTUP_S", "0")))


_SAMPLES: dict[tuple[bytes, ...], int] = {}


def _sample_of(cwd: Path, inputs: list[str]) -> int:
    """The sample whose in-K-N.npy equal the input files (ETK_FAKE_FVP_SAMPLES); -1 for none."""
    if not _SAMPLES:
        folder = Path(os.environ["ETK_FAKE_FVP_SAMPLES"])
        k = 0
        while (folder / f"in-{k}-0.npy").is_file():
            arrays = [np.load(folder / f"in-{k}-{n}.npy") for n in range(len(inputs))]
            _SAMPLES[tuple(a.astype(a.dtype.newbyteorder("<")).tobytes() for a in arrays)] = k
            k += 1
    return _SAMPLES.get(tuple((cwd / name).read_bytes() for name in inputs), -1)


def _pmu_report(model: FvpModel, npu_cycles: int, delegates: int) -> None:
    """StopMeasurements(1)'s lines, written at once (a stand-in should add little per sample)."""
    events = model.events
    lines = [
        "NPU Inferences : 1",
        f"NPU delegations: {max(delegates, 1)} ({max(delegates, 1):.2f} per inference)",
        f"Inference runtime: {CPU_CYCLES} CPU cycles total ({CPU_CYCLES:.2f} per inference)",
        "Ethos-U PMU report:",
        f"ethosu_pmu_cycle_cntr : {npu_cycles} ({npu_cycles:.2f} per inference)",
    ]
    lines += [
        f"ethosu_pmu_cntr{i} : {c} ({c:.2f} per inference)"
        for i, c in enumerate(PMU_EVENT_COUNTS[: len(events)])
    ]
    if delegates:
        lines.append("Ethos-U per-delegate PMU report:")
        for d in range(delegates):
            lines.append(f"Ethos-U delegate {d}: 1 backend invocations, 1 NPU invocations")
            lines.append(f"Ethos-U delegate {d} PMU cycles: {npu_cycles // delegates}")
            lines += [
                f"Ethos-U delegate {d} PMU counter {i}: {c // delegates}"
                for i, c in enumerate(PMU_EVENT_COUNTS[: len(events)])
            ]
    lines.append(f"Ethos-U PMU Events:[{', '.join(events)}]")
    sys.stdout.write(
        "".join(f"I [executorch:arm_perf_monitor.cpp:150 StopMeasurements()] {x}\n" for x in lines)
    )


def _sample_fault(k: int) -> str:
    for item in os.environ.get("ETK_FAKE_FVP_SAMPLE_FAULTS", "").split(","):
        index, _, fault = item.partition(":")
        if index and int(index) == k:
            return fault
    return ""


def serve(model: FvpModel, cwd: Path, argv: list[str]) -> int:
    """The runner's semihosting server mode: one inference per line on stdin."""
    _runner("Running executor with parameter:")
    (out_base,) = _option(argv, "-o")
    inputs = _option(argv, "-i")
    _runner(f"PTE @ 0x70000000 [----{(cwd / 'program.pte').read_bytes()[4:8].decode('latin-1')}]")
    _runner("Running in semihosting server mode.", line=1365)
    folder = Path(os.environ["ETK_FAKE_FVP_SAMPLES"])
    delegates = int(os.environ.get("ETK_FAKE_FVP_DELEGATES", "0"))
    served = 0
    for _line in sys.stdin:
        k = _inference(model, cwd, inputs, out_base, folder, delegates)
        if k < 0:
            return 1
        _runner(f"SERVER_INFERENCE_DONE {served}", line=1391)
        served += 1
    _runner("Model run: 1")
    _runner("Program complete, exiting.")
    return 0


def _inference(
    model: FvpModel, cwd: Path, inputs: list[str], out_base: str, folder: Path, delegates: int
) -> int:
    """One inference on the sample the input files hold; its index, or -1 when it aborted."""
    k = _sample_of(cwd, inputs)
    fault = _sample_fault(k)
    if fault == "hang":
        time.sleep(600)
    if fault == "hard-fault":
        print("Hard fault. irq=-13, pc=0x1000c2a4, lr=0x10003d01", flush=True)
        time.sleep(600)
    if fault == "fatal" or k < 0:
        _runner("Execution of method forward failed with status 0x12", line=1383, level="F")
        return -1
    time.sleep(float(os.environ.get("ETK_FAKE_FVP_INFERENCE_S", "0")))
    _pmu_report(model, NPU_CYCLES + 10 * k, delegates)
    for n, data in enumerate(_outputs_of(folder, k)):
        _runner(f"Writing output to file: {out_base}-{n}.bin")
        (cwd / f"{out_base}-{n}.bin").write_bytes(data)
    return k


_OUTPUTS: dict[int, list[bytes]] = {}


def _outputs_of(folder: Path, k: int) -> list[bytes]:
    if k not in _OUTPUTS:
        arrays = []
        while (folder / f"out-{k}-{len(arrays)}.npy").is_file():
            arrays.append(np.load(folder / f"out-{k}-{len(arrays)}.npy"))
        _OUTPUTS[k] = [a.astype(a.dtype.newbyteorder("<")).tobytes() for a in arrays]
    return _OUTPUTS[k]


def _one_sample(model: FvpModel, cwd: Path, inputs: list[str], out_base: str) -> int:
    """A runner without server mode: one inference on the sample the inputs name, then exit."""
    folder = Path(os.environ["ETK_FAKE_FVP_SAMPLES"])
    delegates = int(os.environ.get("ETK_FAKE_FVP_DELEGATES", "0"))
    if _inference(model, cwd, inputs, out_base, folder, delegates) < 0:
        return 1
    _runner("Model run: 1")
    _runner("Program complete, exiting.")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
