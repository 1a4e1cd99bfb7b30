"""The serial-board runner end to end, through the board emulator behind a real pty."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from toolkit.errors import ToolError, UserError
from toolkit.runners.bundle_io import read_bundle
from toolkit.runners.serial import SerialRunner
from toolkit.targets import load_target

STAND_INS = Path(__file__).resolve().parents[1] / "stand_ins"
sys.path.insert(0, str(STAND_INS))
from board_emulator import (  # noqa: E402
    CORRUPTION,
    CPU_CYCLES,
    MLEK_COUNTS,
    NPU_CYCLES,
    PMU_EVENT_COUNTS,
    PMU_EVENTS,
    WRONG_OUTPUT_LSB,
    BoardEmulator,
    Fault,
)
from board_flash import IMAGE, request_reset  # noqa: E402

FLASH = shlex.join([sys.executable, str(STAND_INS / "board_flash.py")])
BOARD_NAME = "emulated board"


@pytest.fixture(scope="module")
def job(compiled):
    return compiled("zoo:conv2d_relu")


def write_target(folder: Path, flash_dir: Path, port: Path, **board) -> Path:
    settings = {
        "name": BOARD_NAME,
        "port": str(port),
        "baud": 115200,
        "flash": f"{FLASH} flash {shlex.quote(str(flash_dir))} {{bpte}} {{port}}",
        "reset": "command",
        "reset_command": f"{FLASH} reset {shlex.quote(str(flash_dir))}",
        "flash_time_limit_s": 20,
        "banner_time_limit_s": 3,
        "run_time_limit_s": 20,
        "reconnect_time_limit_s": 3,
        "retries": 2,
        **board,
    }
    lines = [
        'name = "emulated"',
        "[npu]",
        'default = "ethos-u55-128"',
        'supported = ["ethos-u55-128"]',
        "[board]",
    ]
    lines += [f"{key} = {json.dumps(value)}" for key, value in settings.items()]
    path = folder / "emulated.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def run_on_board(tmp_path, job, variant="fused", faults=(), engine="sim", **board):
    """(RunResult, emulator) for one evaluation sample of the variant."""
    program = job.variants[variant].program
    inputs = list(job.variants[variant].reference.inputs[0])
    with BoardEmulator(tmp_path / "board", [program], engine=engine, faults=faults) as emulator:
        target = load_target(
            str(write_target(tmp_path, emulator.flash_dir, emulator.port, **board))
        )
        result = SerialRunner(run_root=tmp_path / "run").run(program, inputs, target)
    return result, emulator


def expected_outputs(job, variant):
    return job.variants[variant].reference.outputs[0]


@pytest.mark.parametrize(
    "variant, engine", [("fused", "sim"), ("unfused", "sim"), ("fused", "tosa-ref")]
)
def test_round_trip_is_bit_exact_with_pmu_figures(tmp_path, job, variant, engine):
    result, emulator = run_on_board(tmp_path, job, variant, engine=engine)

    assert result.runner == "serial"
    (want,) = expected_outputs(job, variant)
    (got,) = result.outputs
    assert (got.dtype, got.shape) == (want.dtype, want.shape)
    assert got.tobytes() == want.tobytes()
    assert result.cycles.kind == "measured"
    assert result.cycles.source == f"{BOARD_NAME} Ethos-U PMU ethosu_pmu_cycle_cntr"
    assert (result.cycles.npu_cycles, result.cycles.cpu_cycles) == (NPU_CYCLES, CPU_CYCLES)
    assert result.details["pmu_counters"] == dict(zip(PMU_EVENTS, PMU_EVENT_COUNTS))
    assert result.details["bundleio"] == ["PASS"]
    assert (result.details["attempts"], result.details["faults"]) == (1, [])
    assert result.details["outputs"] == "outputs rebuilt exactly from the printed values"
    # what the board was flashed with: the .pte byte for byte, the inputs, the host reference
    bundle = read_bundle(Path(result.details["bpte"]))
    assert bundle.program == job.variants[variant].program.pte_path.read_bytes()
    (case,) = bundle.cases
    assert case.inputs[0].tobytes() == job.variants[variant].reference.inputs[0][0].tobytes()
    assert case.expected_outputs[0].tobytes() == want.tobytes()
    # the capture is exactly what the board sent
    assert Path(result.details["log"]).read_bytes() == emulator.sent[0]
    assert emulator.sent[0].startswith(
        b"I [executorch:arm_executor_runner.cpp:1010 main()] PTE @ 0x80008000 [----BP08]\r\n"
    )
    assert emulator.boots == 1


def test_bundleio_fail_reports_the_boards_outputs(tmp_path, job):
    result, _ = run_on_board(tmp_path, job, faults=[Fault("wrong-output", (1, 2, 3))])

    assert result.details["bundleio"] == ["FAIL"]
    assert result.details["faults"] == []  # a FAIL is a whole run, not a fault
    (want,) = expected_outputs(job, "fused")
    (got,) = result.outputs
    diff = np.flatnonzero(got.reshape(-1) != want.reshape(-1))
    assert diff.tolist() == [0]
    scale = job.variants["fused"].program.output_quant[0].scale
    assert round(abs(float(got.reshape(-1)[0] - want.reshape(-1)[0])) / scale) == WRONG_OUTPUT_LSB


def test_garbled_bytes_are_detected_and_the_run_retried(tmp_path, job):
    result, emulator = run_on_board(tmp_path, job, faults=[Fault("corrupt", (1,))])

    assert emulator.boots == 2 and result.details["attempts"] == 2
    (fault,) = result.details["faults"]
    assert fault.startswith(f"garbled: {len(CORRUPTION)} garbled byte(s), first at line ")
    assert CORRUPTION in Path(result.details["log"]).with_name("uart-1.log").read_bytes()
    assert result.outputs[0].tobytes() == expected_outputs(job, "fused")[0].tobytes()


def test_dropped_line_is_detected_and_the_run_retried(tmp_path, job):
    result, emulator = run_on_board(tmp_path, job, faults=[Fault("drop", (1,))])

    n = expected_outputs(job, "fused")[0].size
    assert result.details["faults"] == [
        f"dropped: lines missing from the capture: output 0: {n - 1} of {n} values printed"
    ]
    assert emulator.boots == 2
    assert result.outputs[0].tobytes() == expected_outputs(job, "fused")[0].tobytes()


def test_retries_are_bounded_and_nothing_is_reported(tmp_path, job):
    with pytest.raises(ToolError) as err:
        run_on_board(
            tmp_path, job, faults=[Fault("corrupt", (1, 2)), Fault("drop", (3,))], retries=2
        )
    message = str(err.value)
    assert message.startswith(f"no whole run from {BOARD_NAME} on ")
    assert "after 3 attempt(s):\n  attempt 1: garbled: " in message
    assert "\n  attempt 2: garbled: " in message
    assert "\n  attempt 3: dropped: lines missing from the capture: output 0: " in message


def test_silent_board_stops_at_the_time_limit(tmp_path, job):
    start = time.monotonic()
    with pytest.raises(
        ToolError,
        match=r"is silent: nothing at all within 1 s of starting "
        r"\(the reset command should have started it\)",
    ):
        run_on_board(tmp_path, job, faults=[Fault("silence", (1, 2, 3))], banner_time_limit_s=1)
    assert time.monotonic() - start < 8  # no retries of a silent board


def test_disconnect_mid_run_reopens_the_port_and_retries_once(tmp_path, job):
    result, emulator = run_on_board(tmp_path, job, faults=[Fault("disconnect", (1,))])

    (fault,) = result.details["faults"]
    assert fault.startswith("disconnected: the port went away mid-run (")
    assert emulator.boots == 2 and result.details["attempts"] == 2
    assert result.outputs[0].tobytes() == expected_outputs(job, "fused")[0].tobytes()


def test_second_disconnect_is_an_error(tmp_path, job):
    with pytest.raises(
        ToolError,
        match=r"after 2 attempt\(s\):\n  attempt 1: disconnected: .*\n"
        r"  attempt 2: disconnected: ",
    ):
        run_on_board(tmp_path, job, faults=[Fault("disconnect", (1, 2))])


def test_reset_mid_run_is_detected_by_the_second_banner(tmp_path, job):
    result, emulator = run_on_board(tmp_path, job, faults=[Fault("reset", (1,))])

    (fault,) = result.details["faults"]
    assert fault.startswith("reset: the board restarted mid-run (a second runner banner at line ")
    first = Path(result.details["log"]).with_name("uart-1.log").read_bytes()
    assert first.count(b"PTE @ 0x80008000") == 2
    assert emulator.boots == 2
    assert result.outputs[0].tobytes() == expected_outputs(job, "fused")[0].tobytes()


def test_missing_port_is_named(tmp_path, job):
    missing = tmp_path / "ttyNOPE0"
    program = job.variants["fused"].program
    target = load_target(str(write_target(tmp_path, tmp_path, missing)))
    with pytest.raises(
        UserError, match=f"serial port {missing} not found: connect the board, see `etk ports`"
    ):
        SerialRunner(run_root=tmp_path).run(
            program, list(job.variants["fused"].reference.inputs[0]), target
        )


def test_busy_port_names_who_holds_it(tmp_path, job):
    program = job.variants["fused"].program
    with BoardEmulator(tmp_path / "board", [program]) as emulator:
        holder = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import sys, time; f = open(sys.argv[1], 'rb'); "
                "print('open', flush=True); time.sleep(30)",
                str(emulator.port),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert holder.stdout.readline() == "open\n"
            target = load_target(str(write_target(tmp_path, emulator.flash_dir, emulator.port)))
            with pytest.raises(UserError) as err:
                SerialRunner(run_root=tmp_path).run(
                    program, list(job.variants["fused"].reference.inputs[0]), target
                )
        finally:
            holder.kill()
            holder.wait()
    assert str(err.value).startswith(
        f"serial port {emulator.port} is busy: held by pid "
        f"{holder.pid} ({sys.executable} -c import sys"
    )
    assert emulator.boots == 0  # nothing flashed


@pytest.mark.parametrize(
    "flash, message",
    [
        (
            f"{FLASH} fail",
            r"flash failed with exit code 1: .*board_flash.py fail\nlog: .*flash-1.log\n"
            r"Connecting to target... ERROR: target not responding",
        ),
        (
            "etk-no-such-flasher {bpte}",
            r"flash command not found: etk-no-such-flasher \(from the "
            r"step 'etk-no-such-flasher \{bpte\}'\)",
        ),
        (f"{FLASH} hang", r"flash did not finish within 1 s and was killed: .*board_flash.py hang"),
    ],
)
def test_flash_failures_are_clear(tmp_path, job, flash, message):
    with pytest.raises(ToolError, match=message):
        run_on_board(tmp_path, job, flash=flash, flash_time_limit_s=1)


@pytest.mark.parametrize(
    "fmt, faults", [("zephyr", ()), ("ml-kit", ()), ("zephyr", (Fault("drop", (1,)),))]
)
def test_own_firmware_in_zephyr_and_ml_kit_formats(tmp_path, job, fmt, faults):
    """--no-build --no-flash: etk only listens; the user flashes and starts the firmware."""
    program = job.variants["fused"].program
    run_root = tmp_path / "run"
    starts = []
    with BoardEmulator(tmp_path / "board", [program], fmt=fmt, faults=faults) as emulator:

        def user_starts_firmware(message):
            starts.append(message)
            shutil.copyfile(run_root / "serial-fused" / "program.bpte", emulator.flash_dir / IMAGE)
            request_reset(emulator.flash_dir)

        target = load_target(
            str(
                write_target(
                    tmp_path, emulator.flash_dir, emulator.port, flash="false", reset="manual"
                )
            )
        )
        result = SerialRunner(
            run_root=run_root, build=False, flash=False, notify=user_starts_firmware
        ).run(program, list(job.variants["fused"].reference.inputs[0]), target)

    assert starts[0].startswith(f"etk: listening on {emulator.port}: start your firmware now")
    assert result.outputs[0].tobytes() == expected_outputs(job, "fused")[0].tobytes()
    assert result.details["firmware"] == "the user's own (--no-flash)"
    assert result.details["bundleio"] == []
    assert len(starts) == result.details["attempts"] == (2 if faults else 1)
    if fmt == "zephyr":  # hello-executorch prints no PMU report
        assert result.cycles.kind == "none"
    else:
        assert (result.cycles.kind, result.cycles.npu_cycles) == ("measured", MLEK_COUNTS["TOTAL"])
        assert result.details["beats"] == {"axi0_read": 1201, "axi0_write": 3403, "axi1_read": 2302}
        assert result.details["pmu_counters"] == {f"NPU {k}": v for k, v in MLEK_COUNTS.items()}


def test_deploy_to_a_board_that_runs_all_ones_inputs(tmp_path, capsys):
    """hello-executorch (board.inputs = "ones") ignores etk's inputs: deploy evaluates on one
    all-ones sample, and the board's printed outputs are checked against the host reference's."""
    from toolkit.cli import main
    from toolkit.job import Job
    from toolkit.pipeline import run_job
    from toolkit.runners.serial import FIXED_ONES_NOTE

    root, out = tmp_path / "board", tmp_path / "out"
    target = write_target(tmp_path, root / "flash", root / "ttyEMU0", inputs="ones")
    # the program the emulated board will recognise by its .pte (deploy recompiles it identically)
    (program,) = [
        v.program
        for v in run_job(
            Job("zoo:conv2d_relu", str(target), ("fused",), eval_samples=1, out_dir=out)
        ).variants.values()
    ]
    deploy = [
        "deploy",
        "zoo:conv2d_relu",
        "--target",
        str(target),
        "--runner",
        "serial",
        "--eval-samples",
        "4",
        "-o",
        str(out),
    ]
    with BoardEmulator(
        root, [program], fmt="zephyr", inputs="ones", faults=[Fault("wrong-output", (2,))]
    ) as emulator:
        capsys.readouterr()
        passed = main(deploy)
        passed_out = " ".join(capsys.readouterr().out.split())
        passed_report = json.loads((out / "report.json").read_text())
        reference = out / "fused" / "reference"
        inputs = [np.load(p) for p in sorted(reference.glob("input_*.npy"))]
        printed = np.load(out / "fused" / "run_serial" / "output_0_0.npy")
        differ = main(deploy)
        differ_out = " ".join(capsys.readouterr().out.split())
        differ_report = json.loads((out / "report.json").read_text())

    assert emulator.boots == 2  # one sample per deploy
    assert passed == 0
    assert f"Inputs: {FIXED_ONES_NOTE}" in passed_out
    assert passed_report["evaluation_samples"] == 1
    run = passed_report["variants"]["fused"]["run"]
    assert (run["outputs_match_reference"], run["max_diff_lsb"]) == (True, 0.0)
    assert run["details"]["inputs"] == FIXED_ONES_NOTE
    assert run["details"]["bundleio"] == []
    (ones,) = inputs
    assert (ones.dtype, ones.shape) == (np.float32, program.input_specs[0].shape)
    assert np.all(ones == 1.0)
    assert printed.tobytes() == np.load(reference / "output_0_0.npy").tobytes()

    assert differ == 1
    assert "etk: ran, outputs differ from the host reference for: fused" in differ_out
    run = differ_report["variants"]["fused"]["run"]
    assert run["outputs_match_reference"] is False
    assert run["max_diff_lsb"] == pytest.approx(WRONG_OUTPUT_LSB, abs=1e-4)  # float32 LSB steps
