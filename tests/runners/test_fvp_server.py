"""One FVP launch for many samples (ExecuTorch's semihosting server mode) against the stand-in
FVP, which counts launches; per-sample and per-delegate PMU figures; a failing or hanging sample
named without losing the others; a runner ELF without server mode."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from test_fvp_run import _program  # tests/runners is on sys.path (rootdir import mode)

from toolkit.errors import UserError
from toolkit.evaluation.evaluate import evaluate
from toolkit.runners.fvp import FvpRunner, semihosting_cmd_line
from toolkit.runners.fvp_server import has_server_mode
from toolkit.targets import load_target

SERVER_ELF = b"\x7fELF stand-in runner\x00--server_mode\x00SERVER_INFERENCE_DONE %d\x00"
N = 6


def _samples(n: int = N) -> list[tuple[np.ndarray, ...]]:
    rng = np.random.default_rng(1)
    return [
        (
            rng.integers(-128, 128, (1, 3, 4, 4), dtype=np.int8),
            rng.standard_normal((1, 5)).astype(np.float32),
        )
        for _ in range(n)
    ]


def _outputs(k: int) -> tuple[np.ndarray, ...]:
    return (
        (np.arange(-5, 5, dtype=np.int8) + k).reshape(1, 10),
        np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3) * (k + 1),
    )


@pytest.fixture
def server_env(tmp_path, fvp_env, monkeypatch):
    """The stand-in with a server-mode runner ELF, its samples and a launch counter."""
    fvp_env.write_bytes(SERVER_ELF)
    folder = tmp_path / "samples"
    folder.mkdir()
    for k, sample in enumerate(_samples()):
        for n, array in enumerate(sample):
            np.save(folder / f"in-{k}-{n}.npy", array)
        for n, array in enumerate(_outputs(k)):
            np.save(folder / f"out-{k}-{n}.npy", array)
    launches = tmp_path / "launches.txt"
    monkeypatch.setenv("ETK_FAKE_FVP_SAMPLES", str(folder))
    monkeypatch.setenv("ETK_FAKE_FVP_LAUNCHES", str(launches))
    return launches


def _launches(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_server_mode_runs_every_sample_in_one_launch(tmp_path, server_env, fake_fvp, monkeypatch):
    monkeypatch.setenv("ETK_FAKE_FVP_DELEGATES", "2")
    target = load_target("corstone-300")
    program = _program(tmp_path, "corstone-300", "ethos-u55-128")
    batch = FvpRunner(time_limit_s=20).run_samples(program, _samples(), target)

    assert _launches(server_env) == 1 and batch.starts == 1 and batch.mode == "server"
    assert batch.failures == ()
    for k, run in enumerate(batch.runs):
        for got, want in zip(run.outputs, _outputs(k)):
            np.testing.assert_array_equal(got, want)
        assert run.cycles.npu_cycles == fake_fvp.NPU_CYCLES + 10 * k  # this sample's PMU report
        assert run.details["sample_number"] == k
        assert run.details["delegations"] == 2
        (d0, d1) = run.details["delegates"]
        assert (d0["delegate"], d1["delegate"]) == (0, 1)
        assert d0["npu_cycles"] == (fake_fvp.NPU_CYCLES + 10 * k) // 2
        assert d0["counters"]["ETHOSU_PMU_AXI0_RD_DATA_BEAT_RECEIVED"] == 1111 // 2
    cmd_line = semihosting_cmd_line(2, server=True)
    assert cmd_line.endswith("-i i0.bin -i i1.bin --server_mode true")
    assert batch.entry()["per_sample"][3]["npu_cycles"] == fake_fvp.NPU_CYCLES + 30


@pytest.mark.parametrize("fault, status", [("fatal", "failed"), ("hang", "hung")])
def test_a_failing_sample_is_named_and_the_rest_run(
    tmp_path, server_env, fake_fvp, monkeypatch, fault, status
):
    monkeypatch.setenv("ETK_FAKE_FVP_SAMPLE_FAULTS", f"2:{fault}")
    target = load_target("corstone-300")
    program = _program(tmp_path, "corstone-300", "ethos-u55-128")
    batch = FvpRunner(time_limit_s=1, kill_grace_s=0.5).run_samples(program, _samples(), target)

    (failure,) = batch.failures
    assert (failure.index, failure.status) == (2, status)
    if fault == "fatal":
        assert "Execution of method forward failed with status 0x12" in failure.reason
    else:
        assert failure.reason.startswith("no result; last line: ")
    assert [run is None for run in batch.runs] == [False, False, True, False, False, False]
    assert batch.starts == 2 == _launches(server_env)  # started again after sample 2
    assert batch.runs[4].cycles.npu_cycles == fake_fvp.NPU_CYCLES + 40
    np.testing.assert_array_equal(batch.runs[5].outputs[0], _outputs(5)[0])


def test_evaluate_keeps_the_samples_that_ran(tmp_path, server_env, monkeypatch):
    monkeypatch.setenv("ETK_FAKE_FVP_SAMPLE_FAULTS", "1:fatal")
    target = load_target("corstone-300")
    program = _program(tmp_path, "corstone-300", "ethos-u55-128")
    floats = [_outputs(k) for k in range(N)]
    ev = evaluate(program, FvpRunner(time_limit_s=20), _samples(), floats, target)

    assert ev.kept == (0, 2, 3, 4, 5)
    session = ev.runs[0].details["session"]
    assert (session["starts"], session["samples"], session["mode"]) == (2, N, "server")
    assert session["failed"][0]["sample"] == 1


def test_runner_without_server_mode(tmp_path, fvp_env, server_env, monkeypatch):
    fvp_env.write_bytes(b"\x7fELF ExecuTorch 1.5.1 runner")
    assert not has_server_mode(fvp_env)
    target = load_target("corstone-300")
    program = _program(tmp_path, "corstone-300", "ethos-u55-128")
    with pytest.raises(UserError) as info:
        FvpRunner(time_limit_s=20, one_start="on").run_samples(program, _samples(2), target)
    assert str(info.value).startswith(f"--one-start on: the runner ELF {fvp_env} has no ")
    assert "pytorch/executorch#21913" in str(info.value) and "\n" not in str(info.value)

    batch = FvpRunner(time_limit_s=20).run_samples(program, _samples(2), target)
    assert (batch.starts, batch.mode, _launches(server_env)) == (2, "one per start", 2)
    assert batch.note.startswith(f"the runner ELF {fvp_env} has no semihosting server mode")
    assert "one start per sample" in batch.note
    for k, run in enumerate(batch.runs):
        np.testing.assert_array_equal(run.outputs[1], _outputs(k)[1])


def test_deploy_reports_starts_per_sample_and_per_delegate_figures(
    tmp_path, server_env, fake_fvp, monkeypatch, capsys
):
    from toolkit.cli import main

    host = tmp_path / "host"
    assert main(["compile", "zoo:conv2d_relu", "--eval-samples", "3", "-o", str(host)]) == 0
    folder = Path(str(server_env.parent / "samples"))
    for old in folder.iterdir():
        old.unlink()
    for k in range(3):
        ref = host / "fused" / "reference"
        np.save(folder / f"in-{k}-0.npy", np.load(ref / f"input_{k}_0.npy"))
        np.save(folder / f"out-{k}-0.npy", np.load(ref / f"output_{k}_0.npy"))
    monkeypatch.setenv("ETK_FAKE_FVP_DELEGATES", "1")
    monkeypatch.setenv("ETK_FAKE_FVP_SAMPLE_FAULTS", "1:fatal")
    out = tmp_path / "deploy"
    argv = ["deploy", "zoo:conv2d_relu", "--runner", "fvp", "--eval-samples", "3", "-o", str(out)]
    assert main(argv) == 1
    text = capsys.readouterr().out
    assert "etk: fused sample 1 failed: " in text and "status 0x12" in text
    assert "starts (FVP launches, board starts)" in text and "2 for 3 samples" in text
    assert "delegate 0 NPU cycles (first sample)" in text
    run = json.loads((out / "report.json").read_text())["variants"]["fused"]["run"]
    session = run["details"]["session"]
    assert (session["starts"], session["samples"], session["mode"]) == (2, 3, "server")
    assert [p["sample"] for p in session["per_sample"]] == [0, 2]
    assert [p["npu_cycles"] for p in session["per_sample"]] == [
        fake_fvp.NPU_CYCLES,
        fake_fvp.NPU_CYCLES + 20,
    ]
    assert run["details"]["delegates"][0]["npu_cycles"] == fake_fvp.NPU_CYCLES
    assert run["outputs_match_reference"] is True  # the samples that ran are bit-exact
    assert _launches(server_env) == 2


def test_the_next_samples_inputs_overwrite_the_last_in_place(tmp_path):
    """Server mode rewrites i0.bin per sample: in place when its size is unchanged (truncating
    freed and reallocated its blocks: most of the per-sample time on a loaded machine)."""
    from toolkit.artifacts import TensorSpec
    from toolkit.runners.fvp import write_inputs

    spec = TensorSpec((1, 4), "int8")
    path = tmp_path / "i0.bin"
    write_inputs(tmp_path, [np.array([[1, 2, 3, 4]], np.int8)], [spec])
    write_inputs(tmp_path, [np.array([[-1, -2, -3, -4]], np.int8)], [spec])
    assert path.read_bytes() == bytes([255, 254, 253, 252])
    path.write_bytes(b"longer than the tensor")  # another size: written whole
    write_inputs(tmp_path, [np.array([[5, 6, 7, 8]], np.int8)], [spec])
    assert path.read_bytes() == bytes([5, 6, 7, 8])
