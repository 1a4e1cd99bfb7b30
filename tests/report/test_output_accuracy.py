"""Issue 33 item 4: accuracy figures per model output, of the runner that ran, and a warning line
for an output below 20 dB.

TwoHeads classifies from input channels 0-1 and regresses a map from channel 2. It calibrates on
2 samples of a folder of 8 (calibration_subset) whose channel 2 is at a fifth of its spread, and
is evaluated on 4 others, standard normal: the regression output's calibrated range is too narrow
for them, and its values clip at qmin/qmax. fused only,
4 evaluation samples, our simulator. Pinned SQNRs were measured with torch 2.13.0 / ExecuTorch
1.5.1 and hold to PIN_DB.
"""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
import torch
from rich.console import Console
from torch import nn

from toolkit.evaluation.evaluate import evaluate
from toolkit.evaluation.metrics import sqnr_db
from toolkit.job import Job
from toolkit.pipeline import run_job
from toolkit.report.job_report import report_dict
from toolkit.report.tables import print_result, rows, write_markdown
from toolkit.results import RunnerRun, VariantResult
from toolkit.runners.sim import SimulatorRunner
from toolkit.runners.tosa_ref import TosaReferenceRunner

PIN_DB = 0.3
SAMPLES = 4
# the calibration subset of 2 of the folder's 8 samples (seed 0), and the evaluation's 4 of them
# (seed 1000): calibration_subset, evaluate.evaluation_inputs
CALIBRATED, EVALUATED = [5, 7], [1, 2, 3, 4]
LOGITS_DB, REGRESSION_DB = 25.9, 3.8


class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(33)
        self.features = nn.Conv2d(2, 8, 3, padding=1)
        self.classify = nn.Linear(8 * 8 * 8, 10)
        self.regress = nn.Conv2d(1, 1, 3, padding=1)

    def forward(self, x):
        f = torch.relu(self.features(x[:, :2]))
        return self.classify(f.flatten(1)), self.regress(x[:, 2:])


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    calibration = tmp_path_factory.mktemp("calibration")
    x = np.random.default_rng(0).standard_normal((8, 3, 8, 8)).astype(np.float32)
    x[CALIBRATED, 2] *= 0.2
    np.save(calibration / "x.npy", x)
    job = Job(
        model=f"{__file__}:TwoHeads",
        input_shape="1,3,8,8",
        variants=("fused",),
        calibration_dir=calibration,
        calibration_subset=len(CALIBRATED),
        eval_samples=SAMPLES,
        out_dir=tmp_path_factory.mktemp("two_heads"),
    )
    return run_job(job, runner=SimulatorRunner())


def _warning(output: dict, inputs: dict) -> str:
    values = SAMPLES * int(np.prod(output["shape"]))
    return (
        f"fused: output 1 SQNR {output['sqnr_db']:.1f} dB vs float (below 20 dB): "
        f"{output['clipped']:,} of {values:,} values clipped at qmin/qmax, "
        f"{output['clipped_error_share']:.0%} of the error: the calibrated range is too narrow "
        f"({inputs['clipped']} of {inputs['values']} input values lie outside the calibrated "
        "input range and were clipped at the input's quantize); calibrate on more or "
        "representative data (--calibration-data, --calibration-samples)"
    )


def test_each_output_scored_and_the_worst_is_the_headline(result):
    report = json.loads(result.report_path.read_text())
    acc = report["variants"]["fused"]["accuracy"]
    logits, regression = acc["outputs"]
    assert [o["index"] for o in acc["outputs"]] == [0, 1]
    assert [o["shape"] for o in acc["outputs"]] == [[1, 10], [1, 1, 8, 8]]
    assert logits["sqnr_db"] == pytest.approx(LOGITS_DB, abs=PIN_DB)
    assert regression["sqnr_db"] == pytest.approx(REGRESSION_DB, abs=PIN_DB)
    assert regression["clipped"] == pytest.approx(174, abs=5)  # of 256 values
    # the evaluation's 4 samples of the folder; channel 2 of the 3 (256 values each) standard
    # normal, where calibration saw a fifth of that: a few lie past the input's range
    calibration = result.calibration_source.split(" (subset")[0]
    assert report["evaluation_inputs"] == f"4 of the 8 samples of {calibration}"
    x = np.random.default_rng(0).standard_normal((8, 3, 8, 8)).astype(np.float32)
    fed = np.stack([sample[0][0] for sample in result.variants["fused"].reference.inputs])
    assert np.array_equal(fed, x[EVALUATED])
    assert acc["inputs_clipped"]["values"] == 3 * 256 and 0 < acc["inputs_clipped"]["clipped"] < 10
    assert regression["clipped_error_share"] > 0.99
    assert acc["worst_output"] == 1
    assert {k: acc[k] for k in ("sqnr_db", "cosine", "max_abs_err_lsb")} == {
        k: regression[k] for k in ("sqnr_db", "cosine", "max_abs_err_lsb")
    }
    # top-1 is a classifier's: the logits have it, the regression map has none
    assert logits["top1_agreement"] == 1.0
    assert "top1_agreement" not in regression and acc["top1_agreement"] is None
    assert (acc["runner"], acc["outputs_of"], acc["samples"]) == ("sim", "run", SAMPLES)
    assert report["warnings"] == [_warning(regression, acc["inputs_clipped"])]


def test_the_warning_and_the_worst_output_in_the_tables(result, tmp_path):
    report = json.loads(result.report_path.read_text())
    acc = report["variants"]["fused"]["accuracy"]
    regression = acc["outputs"][1]
    warning = _warning(regression, acc["inputs_clipped"])
    _, table = rows(result)
    assert ["SQNR vs float (dB, sim)", f"{regression['sqnr_db']:.2f} (output 1)"] in table
    write_markdown(result, tmp_path / "report.md")
    assert f"- WARNING {warning}" in (tmp_path / "report.md").read_text().splitlines()
    console = Console(record=True, width=400)
    print_result(result, console)
    assert f"WARNING {warning}" in console.export_text().splitlines()


class ShiftedRunner:
    """A runner that is wrong: the host reference's outputs with output 0 shifted by 0.5."""

    name = "shifted"

    def run(self, program, inputs, target):
        host = TosaReferenceRunner().run(program, inputs)
        logits, regression = host.outputs
        return replace(host, runner=self.name, outputs=(logits + 0.5, regression))


def test_the_figures_are_the_runners_outputs_not_the_host_reference(result):
    vr = result.variants["fused"]
    reference = vr.reference
    ev = evaluate(
        vr.program, ShiftedRunner(), reference.inputs, reference.float_outputs, result.target
    )
    run = RunnerRun(ev, False, None, None)
    report = report_dict(
        replace(result, variants={"fused": VariantResult(vr.program, reference, run)})
    )
    acc = report["variants"]["fused"]["accuracy"]
    floats = np.stack([f[0] for f in reference.float_outputs])
    host = np.stack([o[0] for o in reference.outputs])
    assert acc["outputs"][0]["sqnr_db"] == pytest.approx(sqnr_db(floats, host + 0.5), abs=1e-4)
    assert acc["outputs"][0]["sqnr_db"] < reference.accuracy.outputs[0].sqnr_db - 20
    assert acc["outputs"][1]["sqnr_db"] == pytest.approx(
        reference.accuracy.outputs[1].sqnr_db, abs=1e-4
    )
    assert (acc["runner"], acc["outputs_of"], acc["worst_output"]) == ("shifted", "run", 0)
    assert report["warnings"][0] == (
        f"fused: output 0 SQNR {acc['outputs'][0]['sqnr_db']:.1f} dB vs float (below 20 dB): "
        f"the host reference has {reference.accuracy.outputs[0].sqnr_db:.1f} dB: the runner's "
        "outputs differ from it"
    )


def test_without_a_runner_the_figures_are_the_host_references(result):
    vr = result.variants["fused"]
    report = report_dict(replace(result, variants={"fused": replace(vr, run=None)}))
    acc = report["variants"]["fused"]["accuracy"]
    assert (acc["runner"], acc["outputs_of"], acc["worst_output"]) == (
        "tosa-ref",
        "host reference",
        1,
    )
