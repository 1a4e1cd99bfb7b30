"""Inputs a model can take: random calibration and evaluation inputs follow example_inputs()'s
range, evaluation uses the user's calibration data when given, and the report says what was fed.

The one-op models are upstream's (ExecuTorch backends/arm/test/ops/test_log.py, test_rsqrt.py):
`torch.log(x)` on `torch.rand(...) + 0.001` and `x.rsqrt()` on `torch.rand(...)`; standard
normal inputs give NaN there, which crashed calibration in torch.histc.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from toolkit.cli import main
from toolkit.evaluation.eval_data import sample_shape
from toolkit.evaluation.metrics import (
    Accuracy,
    low_sqnr_warnings,
    output_accuracy,
)
from toolkit.models.input_draws import describe_draws, input_draw
from toolkit.quantize.calibration import random_calibration

ONE_OPS = """
import torch

class Log(torch.nn.Module):
    def forward(self, x):
        return torch.log(x)

class Rsqrt(torch.nn.Module):
    def forward(self, x):
        return x.rsqrt()

class Head(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(10, 3)

    def forward(self, x):
        return self.fc(x)

def example_inputs():
    return ({example},)
"""
RAND = "torch.rand(1, 10, 10, generator=torch.Generator().manual_seed(0)) + 0.001"


def _model(tmp_path: Path, example: str = RAND) -> Path:
    path = tmp_path / "one_ops.py"
    path.write_text(ONE_OPS.format(example=example))
    return path


@pytest.fixture(autouse=True)
def _wide_console(monkeypatch):
    monkeypatch.setenv("COLUMNS", "1000")  # rich wraps the table's notes at the terminal width


def _cli(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err.strip()


def test_a_standard_normal_like_example_draws_as_before():
    example = (torch.randn(1, 3, 8, 8, generator=torch.Generator().manual_seed(5)),)
    calibration = random_calibration(example, 2, 7)
    generator = torch.Generator().manual_seed(7)
    expected = [torch.randn(1, 3, 8, 8, generator=generator) for _ in range(2)]
    assert all(torch.equal(s[0], e) for s, e in zip(calibration.samples, expected))
    assert calibration.source == (
        "random(seed=7, samples=2): standard normal (the example spans both signs)"
    )
    assert input_draw(torch.zeros(1, 4)).why == "the example is constant: a shape only"


def test_an_example_of_one_sign_gives_its_range():
    example = (torch.rand(1, 10, 10, generator=torch.Generator().manual_seed(0)) + 0.001,)
    low, high = float(example[0].min()), float(example[0].max())
    calibration = random_calibration(example, 8, 0)
    values = torch.stack([s[0] for s in calibration.samples])
    assert low <= float(values.min()) and float(values.max()) <= high
    assert float(values.max()) - float(values.min()) > 0.9 * (high - low)
    assert describe_draws(example) == (
        f"uniform in [{low:.4g}, {high:.4g}] (the range of example_inputs())"
    )
    mixed = (example[0], torch.randn(1, 4))
    assert describe_draws(mixed).startswith("input 0 uniform in [")
    assert "; input 1 standard normal (the example spans both signs)" in describe_draws(mixed)


@pytest.mark.parametrize("name", ["Log", "Rsqrt"])
def test_upstream_one_op_tests_calibrate_in_their_domain(capsys, tmp_path, name):
    """Crashed in calibration on main (torch.histc: range of [-nan, -nan] is not finite)."""
    example = (
        RAND
        if name == "Log"
        else "torch.rand(1, 10, 10, 10, generator=torch.Generator().manual_seed(1))"
    )
    out = tmp_path / "out"
    code, stdout, err = _cli(capsys, "compile", f"{_model(tmp_path, example)}:{name}", "-o", out)
    assert code == 0, err
    report = json.loads((out / "report.json").read_text())
    assert report["evaluation_inputs"].startswith("random(seed=1000, samples=8): uniform in [")
    assert report["calibration"].startswith("random(seed=0, samples=8): uniform in [")
    sqnr = report["variants"]["fused"]["accuracy"]["sqnr_db"]
    assert np.isfinite(sqnr) and sqnr > 25.0
    assert "Inputs: calibrated on random(seed=0, samples=8): uniform in [" in stdout
    assert "evaluated on random(seed=1000, samples=8): uniform in [" in stdout


def test_an_example_without_a_range_fails_calibration_in_one_line(capsys, tmp_path):
    """upstream's "ones_rank4": a constant example gives a shape only; standard normal inputs
    give log NaN, said in one line naming the operator."""
    model = _model(tmp_path, "torch.ones(1, 10, 10, 10)")
    code, _, err = _cli(capsys, "compile", f"{model}:Log", "-o", tmp_path / "out")
    assert code == 2
    assert err.count("\n") == 0 and "Traceback" not in err
    assert err.startswith(
        "etk: error: calibration sample 0 (random(seed=0, samples=8): standard normal (the "
        "example is constant: a shape only)) gives "
    )
    assert "NaN or infinite values at log (<root> (Log) at one_ops.py:6)" in err
    assert "--calibration-data DIR" in err


def test_evaluation_uses_the_calibration_data(capsys, tmp_path):
    """On main evaluation stayed standard normal: SQNR "nan" without a word."""
    model = _model(tmp_path, "torch.ones(1, 10, 10, 10)")
    data = tmp_path / "calibration"
    data.mkdir()
    rng = np.random.default_rng(0)
    np.save(data / "x.npy", rng.uniform(0.05, 4.0, (12, 10, 10, 10)).astype(np.float32))
    out = tmp_path / "out"
    code, stdout, err = _cli(
        capsys, "compile", f"{model}:Log", "-o", out, "--calibration-data", data
    )
    assert code == 0, err
    report = json.loads((out / "report.json").read_text())
    assert report["evaluation_inputs"] == f"8 of the 12 samples of {data}"
    assert report["evaluation_samples"] == 8
    sqnr = report["variants"]["fused"]["accuracy"]["sqnr_db"]
    assert np.isfinite(sqnr) and sqnr > 25.0
    assert f"evaluated on 8 of the 12 samples of {data}" in stdout


def test_eval_data_for_a_model_without_a_batch_axis(capsys, tmp_path):
    """An input of shape (10,): x.npy holds (N, 10). Crashed in a reshape on main."""
    model = _model(tmp_path, "torch.randn(10, generator=torch.Generator().manual_seed(0))")
    data = tmp_path / "eval"
    data.mkdir()
    rng = np.random.default_rng(0)
    np.save(data / "x.npy", rng.standard_normal((20, 10)).astype(np.float32))
    np.save(data / "y.npy", rng.integers(0, 3, 20))
    out = tmp_path / "out"
    code, _, err = _cli(capsys, "compile", f"{model}:Head", "-o", out, "--eval-data", data)
    assert code == 0, err
    accuracy = json.loads((out / "report.json").read_text())["variants"]["fused"]["accuracy"]
    assert accuracy["eval_samples"] == 20 and 0.0 <= accuracy["top1"] <= 1.0
    assert accuracy["float_top1"] == pytest.approx(accuracy["top1"], abs=0.1)
    assert sample_shape((10,)) == (10,) and sample_shape((1, 3, 8, 8)) == (3, 8, 8)


def _quant(scale: float):
    from toolkit.artifacts import TensorQuant

    return TensorQuant(scale, 0, -128, 127, "int8")


def test_a_nan_figure_is_a_warning_with_its_cause():
    floats = [np.array([1.0, np.nan, 2.0]), np.array([np.inf, 1.0, 0.5])]
    quantized = [np.array([1.0, 0.0, 2.0]), np.array([1.0, 1.0, 0.5])]
    out = output_accuracy(0, floats, quantized, _quant(0.02), False)
    assert np.isnan(out.sqnr_db) and out.nonfinite_float == 2
    (line,) = low_sqnr_warnings(Accuracy(2, (out,)))
    assert line == (
        "output 0 SQNR nan vs float: the float model gives 2 of 6 values NaN or infinite on "
        "the evaluation inputs (inputs outside its domain); evaluate on data it takes "
        "(--calibration-data DIR, or example_inputs() of the inputs' range)"
    )


def test_the_diagnosis_counts_clipping_at_the_input():
    """At 7.6 dB main said "0 clipped, rounding" where the evaluation inputs lay outside the
    calibrated input range."""
    rng = np.random.default_rng(0)
    ref = rng.standard_normal(1000)
    test = ref + rng.standard_normal(1000) * 0.4
    out = output_accuracy(0, [ref], [test], _quant(0.05), False)
    inputs = [np.linspace(-4.0, 4.0, 1000)]
    acc = Accuracy(1, (out,), input_clipping(inputs))
    (line,) = low_sqnr_warnings(acc)
    # the input's range at scale 0.025: [-128.5, 127.5] * 0.025; 99 + 102 of the 1000 lie beyond
    assert line.endswith(
        "(below 20 dB): 0 of 1,000 values clipped at qmin/qmax, 0% of the error; "
        "201 of 1,000 input values lie outside the calibrated input range and were clipped "
        "at the input's quantize: calibrate on data like the evaluation inputs "
        "(--calibration-data DIR, --calibration-samples)"
    )


def input_clipping(inputs):
    from toolkit.evaluation.metrics import InputClipping, input_clipping

    clipping = input_clipping([[x] for x in inputs], (_quant(0.025),))
    assert isinstance(clipping, InputClipping)
    return clipping


def test_a_run_without_a_delegate_claims_no_check(capsys, tmp_path):
    """On main: "every delegate equals the TOSA reference model" with no delegate at all."""
    model = tmp_path / "flip.py"
    model.write_text(
        "import torch\n\n"
        "class Flip(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        return torch.flip(x, [1])\n\n"
        "def example_inputs():\n"
        "    return (torch.randn(1, 8),)\n"
    )
    out = tmp_path / "out"
    code, stdout, err = _cli(capsys, "deploy", f"{model}:Flip", "--runner", "sim", "-o", out)
    assert code == 0, err
    report = json.loads((out / "report.json").read_text())
    fused = report["variants"]["fused"]
    assert fused["delegates"] == 0
    assert fused["run"]["details"]["self_check"] == (
        "not checked: no delegate, nothing ran on the NPU"
    )
    assert report["warnings"] == [
        "fused: no delegate: nothing runs on the NPU, every operator on the CPU (see its CPU "
        "operators); the NPU's results and cycles were not checked."
    ]
    assert "every delegate equals" not in stdout + err
    assert "WARNING fused: no delegate: nothing runs on the NPU" in stdout
