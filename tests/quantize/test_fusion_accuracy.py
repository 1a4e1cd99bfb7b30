"""Issue 18: fusion must not cost accuracy. A fused block's output range is its calibrated
[0, max] (max <= the ReLU6's 6), so a ReLU6 layer whose activations stay below 1 keeps the whole
int8 range; the decisions say which bound the RESCALE's saturation at qmax implements.

SQNR is against the float model on the host reference (TOSA reference model), 8 seeded
calibration inputs (seed 0) and 8 evaluation inputs. Pinned values were measured with torch
2.13.0 / ExecuTorch 1.5.1 and hold to PIN_DB; before the fix the fused variant measured 19.7 dB
(SmallReLU6Chain, unfused 32.0) and 34.8 dB (DilatedReLU6Net, unfused 38.6).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from toolkit.artifacts import LoadedModel
from toolkit.job import Job
from toolkit.pipeline import run_job
from toolkit.quantize.calibration import random_calibration
from toolkit.quantize.quantizer import quantize
from toolkit.targets import load_target

FIXTURES = Path(__file__).parents[1] / "fixtures" / "fusion_accuracy_models.py"
PIN_DB = 0.3
# model -> (fused SQNR, unfused SQNR) in dB, and the fused blocks' upper bounds (calibrated)
PINNED = {
    "SmallReLU6Chain": (34.5, 32.0, (2.419, 0.9294, 0.2941)),
    "DilatedReLU6Net": (39.9, 38.6, (2.373, 0.9331)),
}


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    @functools.cache
    def build(name: str):
        out = tmp_path_factory.mktemp(name)
        return run_job(
            Job(model=f"{FIXTURES}:{name}", input_shape="1,3,32,32", out_dir=out, eval_samples=8)
        )

    return build


@pytest.mark.parametrize("name", sorted(PINNED))
def test_fused_is_not_less_accurate_than_unfused(job, name):
    result = job(name)
    fused, unfused = (result.variants[v].reference.accuracy.sqnr_db for v in ("fused", "unfused"))
    pinned_fused, pinned_unfused, _ = PINNED[name]
    assert fused == pytest.approx(pinned_fused, abs=PIN_DB)
    assert unfused == pytest.approx(pinned_unfused, abs=PIN_DB)
    assert fused >= unfused - 1.0


@pytest.mark.parametrize("name", sorted(PINNED))
def test_each_block_reports_its_calibrated_bound(job, name):
    result = job(name)
    decisions = result.variants["fused"].program.decisions
    bounds = PINNED[name][2]
    assert [d.fused for d in decisions] == [True] * len(bounds)
    assert [d.upper_bound_from for d in decisions] == ["calibration"] * len(bounds)
    assert [d.upper_bound for d in decisions] == pytest.approx(bounds, rel=1e-3)
    assert all("below the upper bound 6" in d.reason for d in decisions)
    report = json.loads(result.report_path.read_text())
    fusion = report["variants"]["fused"]["fusion"]
    assert [f["upper_bound"] for f in fusion] == pytest.approx(bounds, rel=1e-3)
    assert {f["upper_bound_from"] for f in fusion} == {"calibration"}


class LoudReLU6(nn.Module):
    """Activations far above 6: calibration saturates, the ReLU6's 6 is the bound."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(3)
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        with torch.no_grad():
            self.conv.weight.mul_(40.0)

    def forward(self, x):
        return F.hardtanh(self.conv(x), 0.0, 6.0)


def test_saturated_relu6_block_is_bounded_by_6():
    x = torch.randn(1, 3, 8, 8)
    model = LoadedModel("test:loud", "loud", LoudReLU6().eval(), (x,), "loud-relu6")
    quantized = quantize(
        model, random_calibration((x,), 4, 0), "fused", load_target("corstone-300").npu()
    )
    (decision,) = quantized.decisions
    assert decision.fused and decision.upper_bound_from == "activation"
    assert decision.upper_bound == pytest.approx(6.0, abs=6.0 / 255 / 2)
    assert "qmax is the upper bound 6" in decision.reason
