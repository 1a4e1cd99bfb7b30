"""Many samples on one board start: a bundle of test sets on firmware that loops over them,
through the board emulator behind a real pty; the emulator counts its starts."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from toolkit.runners.bundle_io import read_bundle
from toolkit.runners.serial import SerialRunner
from toolkit.targets import load_target

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "stand_ins"))
from board_emulator import NPU_CYCLES, WRONG_OUTPUT_LSB, BoardEmulator, Fault  # noqa: E402
from test_serial import write_target  # noqa: E402 - tests/runners is on sys.path


@pytest.fixture(scope="module")
def job(compiled):
    return compiled("zoo:conv2d_relu")


def run_samples(tmp_path, job, test_sets="all", faults=(), **board):
    variant = job.variants["fused"]
    samples = list(variant.reference.inputs)
    with BoardEmulator(
        tmp_path / "board", [variant.program], faults=faults, test_sets=test_sets
    ) as emulator:
        path = write_target(
            tmp_path, emulator.flash_dir, emulator.port, test_sets=test_sets, **board
        )
        batch = SerialRunner(run_root=tmp_path / "run").run_samples(
            variant.program, samples, load_target(str(path))
        )
    return batch, emulator


def test_a_bundle_of_test_sets_runs_every_sample_on_one_start(tmp_path, job):
    batch, emulator = run_samples(tmp_path, job)
    reference = job.variants["fused"].reference.outputs

    assert (emulator.boots, batch.starts, batch.mode, batch.failures) == (1, 1, "bundle", ())
    assert len(batch.runs) == len(reference) == 4
    for k, run in enumerate(batch.runs):
        assert run.outputs[0].tobytes() == reference[k][0].tobytes()  # bit-exact, sample k's
        assert run.cycles.npu_cycles == NPU_CYCLES + 10 * k
        assert (run.details["bundleio"], run.details["test_set"]) == (["PASS"], k)
    bundle = read_bundle(tmp_path / "run" / "serial-fused" / "program-1.bpte")
    assert [c.inputs[0].tobytes() for c in bundle.cases] == [
        s[0].tobytes() for s in job.variants["fused"].reference.inputs
    ]


def test_a_hung_sample_is_named_and_the_board_started_again_for_the_rest(tmp_path, job):
    batch, emulator = run_samples(
        tmp_path, job, faults=[Fault("hang", (1,), test_set=1)], run_time_limit_s=4
    )

    (failure,) = batch.failures
    assert (failure.index, failure.status) == (1, "hung")
    assert failure.reason.startswith("no result; last line: ")
    assert [run is None for run in batch.runs] == [False, True, False, False]
    assert emulator.boots == batch.starts == 2
    # the second start was flashed with the samples after the hung one
    second = read_bundle(tmp_path / "run" / "serial-fused" / "program-2.bpte")
    assert len(second.cases) == 2
    assert batch.runs[3].cycles.npu_cycles == NPU_CYCLES + 10 * 1  # test set 1 of start 2


def test_a_sample_whose_outputs_differ_is_a_result_not_a_fault(tmp_path, job):
    batch, _ = run_samples(tmp_path, job, faults=[Fault("wrong-output", (1,))])

    assert batch.failures == () and batch.starts == 1
    assert batch.runs[1].details["bundleio"] == ["FAIL"]
    assert batch.runs[2].details["bundleio"] == ["PASS"]  # the FAIL's error lines stay with it
    scale = job.variants["fused"].program.output_quant[0].scale
    got = batch.runs[1].outputs[0].reshape(-1)[0]
    want = job.variants["fused"].reference.outputs[1][0].reshape(-1)[0]
    assert round(abs(float(got - want)) / scale) == WRONG_OUTPUT_LSB


def test_firmware_that_runs_test_set_0_only_flashes_once_per_sample(tmp_path, job):
    batch, emulator = run_samples(tmp_path, job, test_sets="first")

    assert (emulator.boots, batch.starts, batch.mode) == (4, 4, "one per start")
    assert batch.note == (
        "the board's firmware runs BundleIO test set 0 only (ExecuTorch's arm_executor_runner: "
        "testset_idx = 0): one start per sample; build the runner to loop over every test set "
        'of the bundle (verify_result per index) and set board.test_sets = "all" in the target '
        "file for one flash"
    )
    reference = job.variants["fused"].reference.outputs
    assert [r.outputs[0].tobytes() for r in batch.runs] == [o[0].tobytes() for o in reference]
