"""A board running ExecuTorch firmware behind a real pty. TESTS ONLY.

The emulator owns the master side of a pseudo-terminal; its port is a symlink to the slave side
(like /dev/serial/by-id/...), so the runner opens it with pyserial exactly as a board's UART.
It is "flashed" by board_flash.py, which copies the .bpte into the emulator's flash folder, and
started by a reset request (board_flash.py reset). Each start ("boot") prints what the executor
runner prints over its UART: the banner, the PMU report, `Output[i][j]` lines and the BundleIO
verdict, with outputs computed from the bundled inputs by the etk simulator (engine "sim") or the
TOSA reference model ("tosa-ref"), or the bundle's own expected outputs ("expected": a board that
needs no compiled Program, for farm tests), checked against the bundled expected outputs the way the
runner does (atol 0.01, rtol 0.01). Lines go out at a baud-like pace (10 bits per byte).

Formats (what real firmware prints; see tests/fixtures/real_logs/):
  et-bundleio  examples/arm/executor_runner built with BundleIO and ET_LOG_DUMP_OUTPUT:
               `I [executorch:file.cpp:N func()] ...` records, `PTE @ ...` banner, the PMU report
               (`ethosu_pmu_cycle_cntr : N (X per inference)`, one space), typed Output lines,
               `Test_result: PASS|FAIL`
  zephyr       ExecuTorch's Zephyr hello-executorch sample: records without line numbers,
               `PTE at 0x... Size: N bytes`, `output[i]: tensor ...` / `[k] = v`,
               `SUCCESS: Program complete, exiting.`; no PMU report, no BundleIO

Inputs: "bundled" runs the .bpte's test case inputs; "ones" ignores them and runs all-ones
inputs of the program's input types, as the hello-executorch sample does (1.0 for float, 1 for
int32 and int8 inputs).
  ml-kit       an ExecuTorch app in Arm's/Alif's ML Embedded Evaluation Kit: `INFO - ` records, the
               kit's PMU block (`INFO - NPU ACTIVE: N cycles`, AXI beats, IDLE, TOTAL), the
               runner's Output lines; no BundleIO

ITS CYCLE FIGURES ARE INVENTED: NPU_CYCLES, CPU_CYCLES and PMU_EVENT_COUNTS are constants that say
nothing about any model or NPU. They exist so tests can check parsing; they must never be reported
as measurements outside tests.

Faults, each for the boots listed (1-based): drop (one Output line never arrives), corrupt (bytes
in an Output line turn to garbage), silence (nothing at all), disconnect (the port goes away
halfway and comes back after reconnect_delay_s), reset (the board restarts halfway: a second
banner, then a whole run), wrong-output (the board computes a different value: BundleIO FAIL),
hang (test_sets "all": the board stops printing at one test set).

Test sets: "first" runs test set 0 of the bundle, as ExecuTorch's arm_executor_runner does;
"all" loops over every test set, each ending with `TEST: BundleIO index[k] Test_result: ...`.
Start-up cost: boot_s is charged before a boot's first line, inference_s per test set; `boots`
counts the starts.
"""

from __future__ import annotations

import hashlib
import os
import select
import threading
import time
import tty
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
from board_flash import IMAGE, RESET

from toolkit.artifacts import Program
from toolkit.runners.bundle_io import read_bundle

NPU_CYCLES = 48213  # invented
CPU_CYCLES = 91377  # invented
PMU_EVENT_COUNTS = (1201, 2302, 3403, 4504)  # invented
PMU_EVENTS = (
    "ETHOSU_PMU_AXI0_RD_DATA_BEAT_RECEIVED",
    "ETHOSU_PMU_AXI1_RD_DATA_BEAT_RECEIVED",
    "ETHOSU_PMU_AXI0_WR_DATA_BEAT_WRITTEN",
    "ETHOSU_PMU_NPU_IDLE",
)
PTE_ADDRESS = "0x80008000"
WRONG_OUTPUT_LSB = 10  # how far off the wrong-output fault puts output 0, element 0
CORRUPTION = b"\xff\xfe\x07"

FaultKind = Literal["drop", "corrupt", "silence", "disconnect", "reset", "wrong-output", "hang"]
Engine = Literal["sim", "tosa-ref", "expected"]
Format = Literal["et-bundleio", "zephyr", "ml-kit"]
Inputs = Literal["bundled", "ones"]
MLEK_COUNTS = {
    "ACTIVE": 48001,
    "AXI0_RD_DATA_BEAT_RECEIVED": 1201,  # invented
    "AXI0_WR_DATA_BEAT_WRITTEN": 3403,
    "AXI1_RD_DATA_BEAT_RECEIVED": 2302,
    "IDLE": 212,
    "TOTAL": 48213,
}


@dataclass(frozen=True)
class Fault:
    kind: FaultKind
    boots: tuple[int, ...] = (1,)
    test_set: int = 0  # hang: the test set (of the boot's bundle) the board stops at


def _log(
    level: str, line: int, func: str, message: str, file: str = "arm_executor_runner.cpp"
) -> bytes:
    return f"{level} [executorch:{file}:{line} {func}()] {message}\r\n".encode()


def _perf(message: str) -> bytes:
    return _log("I", 168, "StopMeasurements", message, file="arm_perf_monitor.cpp")


def output_lines(outputs: Sequence[np.ndarray]) -> list[bytes]:
    """printf lines of print_outputs() in a runner built with ET_LOG_DUMP_OUTPUT."""
    lines = []
    for i, array in enumerate(outputs):
        kind = {"f": "float", "b": "bool"}.get(
            array.dtype.kind, "char" if array.itemsize == 1 else "int"
        )
        for j, value in enumerate(array.reshape(-1)):
            text = f"{float(value):f}" if kind == "float" else str(int(value))
            lines.append(f"Output[{i}][{j}]: ({kind}) {text}\r\n".encode())
    return lines


def transcript(program_size: int, outputs: Sequence[np.ndarray], passed: bool) -> list[bytes]:
    """The UART lines of one run of the BundleIO executor runner, in order."""
    lines = [
        _log("I", 1010, "main", f"PTE @ {PTE_ADDRESS} [----BP08]"),
        _log("I", 610, "runner_init", f"PTE Model data loaded. Size: {program_size} bytes."),
        _log("I", 630, "runner_init", "Model buffer loaded, has 1 methods"),
        _log("I", 640, "runner_init", "Running method forward"),
        _log("I", 700, "runner_init", "Method 'forward' loaded."),
        _log("I", 705, "runner_init", "Preparing inputs..."),
        _log("I", 711, "runner_init", "Input testset[0] from bundled bpte"),
        _log("I", 780, "runner_init", "Input prepared."),
        _log("I", 955, "run_model", "Starting running 1 inferences..."),
        _perf("NPU Inferences : 1"),
        _perf(f"Inference runtime: {CPU_CYCLES} CPU cycles total ({CPU_CYCLES:.2f} per inference)"),
        _perf("Ethos-U PMU report:"),
        _perf(f"ethosu_pmu_cycle_cntr : {NPU_CYCLES} ({NPU_CYCLES:.2f} per inference)"),
        *[
            _perf(f"ethosu_pmu_cntr{k} : {c} ({c:.2f} per inference)")
            for k, c in enumerate(PMU_EVENT_COUNTS)
        ],
        _perf(f"Ethos-U PMU Events:[{', '.join(PMU_EVENTS)}]"),
        _log("I", 975, "run_model", "1 inferences finished"),
        _log("I", 880, "print_outputs", f"{len(outputs)} outputs: "),
        *output_lines(outputs),
    ]
    if passed:
        lines += [
            _log("I", 925, "verify_result", "Model output match expected BundleIO bpte ref data."),
            _log("I", 926, "verify_result", "TEST: BundleIO index[0] Test_result: PASS"),
            _log("I", 978, "run_model", "Model run: 1"),
            _log("I", 1016, "main", "Model run: 1"),
            _log("I", 1030, "main", "Program complete, exiting."),
            _log("I", 1034, "main", "\x04"),
        ]
    else:
        lines += [
            _log(
                "E",
                930,
                "verify_result",
                "Model output don't match expected BundleIO bpte ref "
                "data. rtol=0.010000 atol=0.010000",
            ),
            _log("E", 934, "verify_result", "TEST: BundleIO index[0] Test_result: FAIL"),
            _log("E", 935, "verify_result", "Bundle verification failed with status 0x12"),
            _log("I", 978, "run_model", "Model run: 0"),
            _log("I", 1016, "main", "Model run: 0"),
            _log(
                "F",
                1022,
                "main",
                "In function main(), assert failed (model_ok == true): Problem running model",
            ),
        ]  # then the runner aborts: nothing more
    return lines


def test_set_lines(k: int, outputs: Sequence[np.ndarray], passed: bool) -> list[bytes]:
    """One test set of a firmware that loops over the bundle: PMU report (NPU cycles
    NPU_CYCLES + 10 * k), outputs and the runner's verdict line for index k."""
    cycles = NPU_CYCLES + 10 * k
    lines = [
        _log("I", 711, "runner_init", f"Input testset[{k}] from bundled bpte"),
        _perf("NPU Inferences : 1"),
        _perf("NPU delegations: 1 (1.00 per inference)"),
        _perf(f"Inference runtime: {CPU_CYCLES} CPU cycles total ({CPU_CYCLES:.2f} per inference)"),
        _perf("Ethos-U PMU report:"),
        _perf(f"ethosu_pmu_cycle_cntr : {cycles} ({cycles:.2f} per inference)"),
        *[
            _perf(f"ethosu_pmu_cntr{i} : {c} ({c:.2f} per inference)")
            for i, c in enumerate(PMU_EVENT_COUNTS)
        ],
        _perf(f"Ethos-U PMU Events:[{', '.join(PMU_EVENTS)}]"),
        _log("I", 880, "print_outputs", f"{len(outputs)} outputs: "),
        *output_lines(outputs),
    ]
    if passed:
        return lines + [
            _log("I", 925, "verify_result", "Model output match expected BundleIO bpte ref data."),
            _log("I", 926, "verify_result", f"TEST: BundleIO index[{k}] Test_result: PASS"),
        ]
    return lines + [
        _log(
            "E", 930, "verify_result", "Model output don't match expected BundleIO bpte ref data."
        ),
        _log("E", 934, "verify_result", f"TEST: BundleIO index[{k}] Test_result: FAIL"),
        _log("E", 935, "verify_result", "Bundle verification failed with status 0x12"),
    ]


def _zephyr(message: str) -> bytes:
    return f"I [executorch:arm_executor_runner.cpp] {message}\r\n".encode()


def zephyr_transcript(program_size: int, outputs: Sequence[np.ndarray]) -> list[bytes]:
    """The UART lines of ExecuTorch's Zephyr hello-executorch sample (zephyr/samples/)."""
    lines = [
        b"*** Booting Zephyr OS build v4.4.0 ***\r\n",
        _zephyr(f"PTE at {PTE_ADDRESS} Size: {program_size} bytes"),
        _zephyr("Model buffer loaded, has 1 methods"),
        _zephyr("Running method forward"),
        _zephyr("Method 'forward' loaded."),
        _zephyr("Input prepared."),
        _zephyr("Starting the model execution..."),
        _zephyr("Model executed successfully."),
        _zephyr("Model outputs:"),
    ]
    for i, array in enumerate(outputs):
        scalar_type = {"f": "Float"}.get(array.dtype.kind, "Char" if array.itemsize == 1 else "Int")
        lines.append(_zephyr(f"  output[{i}]: tensor scalar_type={scalar_type} numel={array.size}"))
        lines += [
            _zephyr(
                f"    [{j}] = {float(v):f}" if array.dtype.kind == "f" else f"    [{j}] = {int(v)}"
            )
            for j, v in enumerate(array.reshape(-1))
        ]
    return lines + [_zephyr("SUCCESS: Program complete, exiting."), _zephyr("\x04")]


def ml_kit_transcript(outputs: Sequence[np.ndarray]) -> list[bytes]:
    """An ExecuTorch app in the ML Embedded Evaluation Kit: INFO records and the kit's PMU block."""
    return [
        b"INFO - Initialising the NPU\r\n",
        b"INFO - Running inference\r\n",
        *output_lines(outputs),
        b"INFO - Profile for Inference:\r\n",
        *[
            f"INFO - NPU {name}: {count} {'beats' if 'BEAT' in name else 'cycles'}\r\n".encode()
            for name, count in MLEK_COUNTS.items()
        ],
        b"INFO - Program complete, exiting.\r\n",
    ]


def _is_output(line: bytes) -> bool:
    return line.startswith(b"Output[") or b"]     [" in line


class BoardEmulator:
    def __init__(
        self,
        root: Path,
        programs: Sequence[Program],
        engine: Engine = "sim",
        baud: int = 4_000_000,
        faults: Sequence[Fault] = (),
        reconnect_delay_s: float = 0.2,
        fmt: Format = "et-bundleio",
        inputs: Inputs = "bundled",
        test_sets: Literal["first", "all"] = "first",
        boot_s: float = 0.0,
        inference_s: float = 0.0,
    ):
        self.root = root
        self.test_sets = test_sets
        self.boot_s = boot_s
        self.inference_s = inference_s
        self.fmt = fmt
        self.inputs = inputs
        self.flash_dir = root / "flash"
        self.port = root / "ttyEMU0"
        self.engine = engine
        self.baud = baud
        self.faults = tuple(faults)
        self.reconnect_delay_s = reconnect_delay_s
        self.boots = 0
        self.sent: list[bytes] = []  # what each boot actually wrote
        self._programs = {hashlib.sha256(p.pte_path.read_bytes()).hexdigest(): p for p in programs}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._master = self._slave = -1

    def __enter__(self) -> BoardEmulator:
        self.flash_dir.mkdir(parents=True, exist_ok=True)
        self._connect()
        self._thread = threading.Thread(target=self._loop, name="board-emulator", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._disconnect()

    def _connect(self) -> None:
        self._master, self._slave = os.openpty()
        tty.setraw(self._slave)  # a UART passes bytes through untouched
        os.set_blocking(self._master, False)
        link = self.port.with_suffix(".tmp")
        link.symlink_to(os.ttyname(self._slave))
        link.replace(self.port)

    def _disconnect(self) -> None:
        self.port.unlink(missing_ok=True)
        for fd in (self._master, self._slave):
            if fd >= 0:
                os.close(fd)
        self._master = self._slave = -1

    def _loop(self) -> None:
        while not self._stop.is_set():
            if (self.flash_dir / RESET).exists():
                (self.flash_dir / RESET).unlink()
                self._boot()
            time.sleep(0.005)

    def _outputs(self, program: Program | None, inputs: list[np.ndarray], case) -> list[np.ndarray]:
        if self.engine == "expected":
            return list(case.expected_outputs)
        if self.engine == "sim":
            from toolkit.runners.sim import SimulatorRunner

            return list(SimulatorRunner().run(program, inputs).outputs)
        from toolkit.runners.tosa_ref import TosaReferenceRunner

        return list(TosaReferenceRunner().run(program, inputs).outputs)

    def _boot(self) -> None:
        self.boots += 1
        kinds = {f.kind for f in self.faults if self.boots in f.boots}
        self.sent.append(b"")
        if "silence" in kinds:
            return
        bundle = read_bundle(self.flash_dir / IMAGE)
        program = self._programs.get(hashlib.sha256(bundle.program).hexdigest())
        time.sleep(self.boot_s)
        if self.test_sets == "all":
            self._boot_bundle(bundle, program, kinds)
            return
        case = bundle.cases[0]
        inputs = (
            list(case.inputs)
            if self.inputs == "bundled"
            else [np.ones(spec.shape, spec.dtype) for spec in program.input_specs]
        )
        outputs = self._outputs(program, inputs, case)
        if "wrong-output" in kinds:
            outputs[0] = _off_by_lsb(outputs[0], program, WRONG_OUTPUT_LSB)
        passed = all(
            np.allclose(o, e, rtol=0.01, atol=0.01) for o, e in zip(outputs, case.expected_outputs)
        )
        if self.fmt == "zephyr":
            lines = zephyr_transcript(len(bundle.program), outputs)
        elif self.fmt == "ml-kit":
            lines = ml_kit_transcript(outputs)
        else:
            lines = transcript(len(bundle.program), outputs, passed)
        first_output = next(n for n, line in enumerate(lines) if _is_output(line))
        middle = first_output + sum(map(_is_output, lines)) // 2
        if "drop" in kinds:
            del lines[middle]
        if "corrupt" in kinds:
            lines[middle] = lines[middle][:8] + CORRUPTION + lines[middle][8 + len(CORRUPTION) :]
        if "disconnect" in kinds:
            self._write(lines[:middle])
            self._disconnect()
            time.sleep(self.reconnect_delay_s)
            self._connect()
            return
        if "reset" in kinds:
            lines = lines[:middle] + lines
        self._write(lines)

    def _boot_bundle(self, bundle, program: Program, kinds: set[str]) -> None:
        """Firmware that loops over every test set of the bundle."""
        hang = next(
            (f.test_set for f in self.faults if f.kind == "hang" and self.boots in f.boots), None
        )
        lines = transcript(len(bundle.program), [], True)
        self._write(lines[:6])  # the banner to "Preparing inputs..."
        for k, case in enumerate(bundle.cases):
            if k == hang or self._stop.is_set():
                return  # a hung board prints nothing more
            time.sleep(self.inference_s)
            outputs = self._outputs(program, list(case.inputs), case)
            if "wrong-output" in kinds and k == 1:
                outputs[0] = _off_by_lsb(outputs[0], program, WRONG_OUTPUT_LSB)
            passed = all(
                np.allclose(o, e, rtol=0.01, atol=0.01)
                for o, e in zip(outputs, case.expected_outputs)
            )
            self._write(test_set_lines(k, outputs, passed))
        self._write(
            [
                _log("I", 1016, "main", "Model run: 1"),
                _log("I", 1030, "main", "Program complete, exiting."),
                _log("I", 1034, "main", "\x04"),
            ]
        )

    def _write(self, lines: list[bytes]) -> None:
        """Send at the baud-like pace; a reset request cuts the output short, as on a board."""
        for line in lines:
            if self._stop.is_set() or (self.flash_dir / RESET).exists():
                return
            view = memoryview(line)
            while view:
                _, ready, _ = select.select([], [self._master], [], 0.5)
                if not ready:
                    return  # nobody reads the port: a UART's bytes are lost
                written = os.write(self._master, view)
                self.sent[-1] += bytes(view[:written])
                view = view[written:]
            time.sleep(len(line) * 10 / self.baud)


def _off_by_lsb(array: np.ndarray, program: Program, lsb: int) -> np.ndarray:
    """Element 0 moved by lsb quantization steps (away from the clipping edge)."""
    quant = program.output_quant[0]
    out = array.copy()
    flat = out.reshape(-1)
    q = round(float(flat[0]) / quant.scale) + quant.zero_point
    step = lsb if q + lsb <= quant.qmax else -lsb
    flat[0] = np.float32((q + step - quant.zero_point) * np.float32(quant.scale))
    return out
