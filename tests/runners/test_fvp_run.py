"""The FVP runner end to end against the stand-in FVP (tests/stand_ins/fake_fvp.py)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from toolkit.artifacts import Program, TensorSpec
from toolkit.errors import ToolError, UserError
from toolkit.runners.fvp import FvpRunner, fvp_command
from toolkit.targets import load_target

INPUT_SPECS = (TensorSpec((1, 3, 4, 4), "int8"), TensorSpec((1, 5), "float32"))
OUTPUT_SPECS = (TensorSpec((1, 10), "int8"), TensorSpec((2, 3), "float32"))


def _program(tmp_path: Path, target_name: str, accelerator: str) -> Program:
    pte = tmp_path / "model.pte"
    pte.write_bytes(b"\x00\x00\x00\x00ET12 any small file stands in for the program")
    return Program(
        variant="fused",
        model_name="tiny",
        npu=load_target(target_name).npu(accelerator),
        out_dir=tmp_path / "out",
        pte_path=pte,
        delegates=(),
        cpu_ops=(),
        vela_flags=(),
        input_specs=INPUT_SPECS,
        output_specs=OUTPUT_SPECS,
        input_quant=(None, None),
        output_quant=(None, None),
    )


def _inputs() -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [
        rng.integers(-128, 128, (1, 3, 4, 4), dtype=np.int8),
        rng.standard_normal((1, 5)).astype(np.float32),
    ]


@pytest.fixture
def reference(tmp_path, monkeypatch) -> list[np.ndarray]:
    """Reference outputs the stand-in writes back; it also checks the input bytes it receives."""
    folder = tmp_path / "reference"
    folder.mkdir()
    outputs = [
        np.arange(-5, 5, dtype=np.int8).reshape(1, 10),
        np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3),
    ]
    for n, array in enumerate(_inputs()):
        np.save(folder / f"in-{n}.npy", array)
    for n, array in enumerate(outputs):
        np.save(folder / f"out-{n}.npy", array)
    monkeypatch.setenv("ETK_FAKE_FVP_REFERENCE", str(folder))
    return outputs


@pytest.mark.parametrize(
    "target_name, accelerator, events",
    [
        ("corstone-300", "ethos-u55-128", 4),
        ("corstone-320", "ethos-u85-256", 7),
    ],
)
def test_round_trip(
    tmp_path, fvp_env, reference, fake_fvp, monkeypatch, target_name, accelerator, events
):
    target = load_target(target_name)
    program = _program(tmp_path, target_name, accelerator)
    monkeypatch.setenv("ETK_FAKE_FVP_NUM_MACS", str(program.npu.macs))
    result = FvpRunner(time_limit_s=20).run(program, _inputs(), target)

    assert result.runner == "fvp"
    assert [(o.dtype, o.shape) for o in result.outputs] == [
        (np.int8, (1, 10)),
        (np.float32, (2, 3)),
    ]
    for got, want in zip(result.outputs, reference):
        np.testing.assert_array_equal(got, want)
    assert result.cycles.kind == "measured"
    assert result.cycles.source == "FVP PMU ethosu_pmu_cycle_cntr"
    assert (result.cycles.npu_cycles, result.cycles.cpu_cycles) == (
        fake_fvp.NPU_CYCLES,
        fake_fvp.CPU_CYCLES,
    )
    assert "not accurate" in result.cycles.note and "approximate" in result.cycles.note
    model = fake_fvp.MODELS[target.fvp.binary_for(accelerator)]
    assert result.details["pmu_counters"] == dict(zip(model.events, fake_fvp.PMU_EVENT_COUNTS))
    assert len(result.details["pmu_counters"]) == events

    run_dir = tmp_path / "out" / "fvp-fused"
    assert (run_dir / "program.pte").read_bytes() == program.pte_path.read_bytes()
    assert Path(result.details["log"]) == run_dir / "fvp.log"
    assert "Program complete, exiting." in (run_dir / "fvp.log").read_text()
    expected = fvp_command(target, program.npu, run_dir, fvp_env, 2, 20)
    assert result.details["command"] == [
        str(Path(os.environ["ETK_FVP_PATH"]) / expected[0]),
        *expected[1:],
    ]


def test_num_macs_other_than_the_stand_in_expects_is_rejected(
    tmp_path, fvp_env, reference, monkeypatch
):
    monkeypatch.setenv("ETK_FAKE_FVP_NUM_MACS", "256")
    with pytest.raises(ToolError, match="ethosu.num_macs=128 but the test expects 256"):
        FvpRunner(time_limit_s=20).run(
            _program(tmp_path, "corstone-300", "ethos-u55-128"),
            _inputs(),
            load_target("corstone-300"),
        )


def test_inputs_reach_the_runner_byte_for_byte(tmp_path, fvp_env, reference):
    changed = _inputs()
    changed[1] = changed[1] + 1
    with pytest.raises(ToolError, match="input i1.bin differs"):
        FvpRunner(time_limit_s=20).run(
            _program(tmp_path, "corstone-300", "ethos-u55-128"),
            changed,
            load_target("corstone-300"),
        )


def test_wrong_input_dtype_is_a_user_error(tmp_path, fvp_env, reference):
    inputs = _inputs()
    inputs[0] = inputs[0].astype(np.float32)
    with pytest.raises(
        UserError, match=r"input 0 is float32\[1, 3, 4, 4\], the program takes int8"
    ):
        FvpRunner().run(
            _program(tmp_path, "corstone-300", "ethos-u55-128"), inputs, load_target("corstone-300")
        )


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


def test_hang_is_killed_at_the_time_limit_with_its_child_and_the_log_kept(
    tmp_path, fvp_env, reference, fake_fvp, monkeypatch
):
    monkeypatch.setenv("ETK_FAKE_FVP_MODE", "hang")
    start = time.monotonic()
    with pytest.raises(
        ToolError,
        match=r"no result within the 1 s time limit \(\+0.5 s grace\): "
        r"the FVP was killed, its log kept; the program hung "
        r"after I \[executorch:arm_executor_runner.cpp:640 "
        r"main\(\)\] PTE @ 0x70000000 \[----ET12\]",
    ) as error:
        FvpRunner(time_limit_s=1, kill_grace_s=0.5).run(
            _program(tmp_path, "corstone-300", "ethos-u55-128"),
            _inputs(),
            load_target("corstone-300"),
        )
    assert 1.5 <= time.monotonic() - start < 5
    run_dir = tmp_path / "out" / "fvp-fused"
    log = (run_dir / "fvp.log").read_text()
    assert "PTE @ 0x70000000 [----ET12]" in log
    assert "PTE @ 0x70000000 [----ET12]" in str(error.value)  # last lines in the message
    child = int((run_dir / fake_fvp.HANG_CHILD_PID_FILE).read_text())
    deadline = time.monotonic() + 2
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)


def test_hard_fault_gives_the_last_log_lines(tmp_path, fvp_env, reference, monkeypatch):
    monkeypatch.setenv("ETK_FAKE_FVP_MODE", "hard-fault")
    with pytest.raises(ToolError) as error:
        FvpRunner(time_limit_s=1).run(
            _program(tmp_path, "corstone-300", "ethos-u55-128"),
            _inputs(),
            load_target("corstone-300"),
        )
    message = str(error.value)
    assert "failure marker(s); the program failed: Hard fault. irq=-13" in message
    assert "hard-fault (line 10): Hard fault. irq=-13" in message
    assert "the CPU faulted" in message
    assert "last log lines:\n" in message and "Reading input tensor 2 from file i1.bin" in message


def test_runner_fatal_error(tmp_path, fvp_env, reference, monkeypatch):
    monkeypatch.setenv("ETK_FAKE_FVP_MODE", "fatal")
    with pytest.raises(
        ToolError,
        match=r"(?s)error \(line 10\): E \[executorch:method.cpp.*"
        r"fatal \(line 11\): F \[executorch",
    ):
        FvpRunner(time_limit_s=20).run(
            _program(tmp_path, "corstone-300", "ethos-u55-128"),
            _inputs(),
            load_target("corstone-300"),
        )


def test_garbage_is_a_clear_error(tmp_path, fvp_env, reference, monkeypatch):
    monkeypatch.setenv("ETK_FAKE_FVP_MODE", "garbage")
    with pytest.raises(
        ToolError,
        match=r"garbled \(line 10\): \d+ non-text characters in: "
        r"\?+.*\nthe UART output is not text",
    ) as error:
        FvpRunner(time_limit_s=20).run(
            _program(tmp_path, "corstone-300", "ethos-u55-128"),
            _inputs(),
            load_target("corstone-300"),
        )
    assert "\ufffd" not in str(error.value)


def test_fvp_crash_reports_the_exit_code(tmp_path, fvp_env, reference, monkeypatch):
    monkeypatch.setenv("ETK_FAKE_FVP_MODE", "crash")
    with pytest.raises(ToolError, match="the FVP exited with code -11"):
        FvpRunner(time_limit_s=20).run(
            _program(tmp_path, "corstone-300", "ethos-u55-128"),
            _inputs(),
            load_target("corstone-300"),
        )


def test_missing_outputs_are_reported(tmp_path, fvp_env, reference):
    (Path(os.environ["ETK_FAKE_FVP_REFERENCE"]) / "out-1.npy").unlink()
    with pytest.raises(ToolError, match=r"wrote 1 output files \(out-0.bin\).*has 2 outputs"):
        FvpRunner(time_limit_s=20).run(
            _program(tmp_path, "corstone-300", "ethos-u55-128"),
            _inputs(),
            load_target("corstone-300"),
        )


def test_availability_says_what_is_missing_and_how_to_get_it(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("ETK_FVP_PATH", raising=False)
    monkeypatch.delenv("ETK_RUNNER_ELF", raising=False)
    target = load_target("corstone-320")
    available = FvpRunner().availability(target, "ethos-u85-256")
    assert not available.ok
    assert (
        "FVP binary FVP_Corstone_SSE-320 not found on PATH or in ETK_FVP_PATH" in available.reason
    )
    assert "Corstone-320 Ecosystem FVP from https://developer.arm.com/" in available.reason
    assert (
        "backends/arm/scripts/build_executor_runner.sh --pte=semihosting "
        "--target=ethos-u85-256 --system_config=Ethos_U85_SYS_DRAM_Mid "
        "--memory_mode=Dedicated_Sram_384KB"
    ) in available.reason
    with pytest.raises(UserError, match="cannot run on the FVP: FVP binary FVP_Corstone_SSE-320"):
        FvpRunner().run(_program(tmp_path, "corstone-320", "ethos-u85-256"), _inputs(), target)


def test_availability_with_the_stand_in(tmp_path, fvp_env):
    target = load_target("corstone-300")
    assert FvpRunner().availability(target, "ethos-u65-256").ok
    missing_elf = FvpRunner(runner_elf=tmp_path / "nope.elf").availability(target, "ethos-u55-128")
    assert not missing_elf.ok
    assert f"runner ELF {tmp_path / 'nope.elf'} (from --runner-elf) does not exist" in (
        missing_elf.reason
    )


@pytest.mark.parametrize(
    "extra, complaint",
    [
        (["-C", "ethosu.extra_args=--fast"], "extra_args only as --fvp-fast passes it"),
        (["--fast", "1"], "unknown option --fast"),
        (["-C", "mps4_board.subsystem.ethosu.num_macs=256"], "not found in this model"),
    ],
)
def test_stand_in_rejects_flags_the_runner_must_not_pass(tmp_path, fvp_env, extra, complaint):
    target = load_target("corstone-300")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    cmd = fvp_command(target, target.npu("ethos-u55-128"), run_dir, fvp_env, 1)
    binary = Path(os.environ["ETK_FVP_PATH"]) / cmd[0]
    done = subprocess.run(
        [str(binary), *cmd[1:-2], *extra, *cmd[-2:]], capture_output=True, text=True, timeout=20
    )
    assert done.returncode == 1 and complaint in done.stderr


def test_stand_in_rejects_a_long_semihosting_command_line(tmp_path, fvp_env):
    target = load_target("corstone-300")
    cmd = fvp_command(target, target.npu("ethos-u55-128"), tmp_path, fvp_env, 1)
    cmd = [a if "cmd_line" not in a else f"cpu0.semihosting-cmd_line='{'x' * 256}'" for a in cmd]
    done = subprocess.run(
        [str(Path(os.environ["ETK_FVP_PATH"]) / cmd[0]), *cmd[1:]],
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert done.returncode == 1 and "256 characters" in done.stderr


def test_stand_in_is_not_on_the_package_path():
    import toolkit

    package = Path(toolkit.__file__).resolve().parent
    assert not list(package.rglob("fake_fvp*")) and not list(package.rglob("board_emulator*"))
    # no package code knows where the stand-ins live
    assert not [p for p in package.rglob("*.py") if "stand_ins" in p.read_text()]


def test_fvp_fast_checks_outputs_but_reports_no_cycles(tmp_path, fvp_env, reference, monkeypatch):
    target = load_target("corstone-300")
    program = _program(tmp_path, "corstone-300", "ethos-u55-128")
    monkeypatch.setenv("ETK_FAKE_FVP_FAST", "1")
    result = FvpRunner(time_limit_s=20, fast=True).run(program, _inputs(), target)

    assert "ethosu.extra_args=--fast" in result.details["command"]
    for got, want in zip(result.outputs, reference):
        np.testing.assert_array_equal(got, want)
    assert (result.cycles.kind, result.cycles.npu_cycles) == ("none", None)
    assert result.cycles.note.startswith("the FVP's fast Ethos-U model does not model timing")
    monkeypatch.delenv("ETK_FAKE_FVP_FAST")
    with pytest.raises(ToolError, match="extra_args only as --fvp-fast passes it"):
        FvpRunner(time_limit_s=20, fast=True).run(program, _inputs(), target)
