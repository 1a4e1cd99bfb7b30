"""The Python API (toolkit/api.py): a live nn.Module through the whole chain on the simulator, the
report it returns equal to the report.json it writes, and the CLI's errors raised as exceptions."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

import toolkit
from toolkit.models.loader import live_model


class ConvReluHead(nn.Module):
    """Defined here, not in the zoo: a conv + ReLU block the fusion folds into its RESCALE."""

    def __init__(self, activation: type[nn.Module] = nn.ReLU):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.act = activation()
        self.head = nn.Linear(8 * 8 * 8, 4)

    def forward(self, x):
        return self.head(torch.flatten(self.act(self.conv(x)), 1))


def _net(activation: type[nn.Module] = nn.ReLU) -> nn.Module:
    torch.manual_seed(0)
    return ConvReluHead(activation).train()


EXAMPLE = (torch.randn(1, 3, 8, 8, generator=torch.Generator().manual_seed(1)),)


@pytest.fixture(scope="module")
def deployed(tmp_path_factory):
    net = _net()
    out = tmp_path_factory.mktemp("api")
    result = toolkit.deploy(
        net, example_inputs=EXAMPLE, runner="sim", compare_fusion=True, output=out, eval_samples=2
    )
    return net, out, result


def test_a_live_module_deploys_fused_and_unfused_on_the_simulator(deployed):
    net, out, result = deployed
    assert set(result.variants) == {"fused", "unfused"}
    for variant in result.variants.values():
        assert variant.run is not None and variant.run.outputs_match_reference is True
        assert variant.run.max_diff_lsb == 0.0
    fused, unfused = (result.variants[v].program.tosa_ops for v in ("fused", "unfused"))
    assert "CLAMP" not in fused  # the ReLU is the conv's RESCALE saturation
    assert unfused["CLAMP"] == 1
    assert net.training  # the caller's module keeps its mode: etk runs a copy


def test_the_returned_report_is_the_report_json_written(deployed):
    _, out, result = deployed
    report = json.loads((out / "report.json").read_text())
    assert json.loads(json.dumps(result.to_dict())) == report
    assert report["model"] == "python:ConvReluHead"
    assert "# python:ConvReluHead on corstone-300" in (out / "report.md").read_text()


def test_two_architectures_with_the_same_weights_hash_apart():
    relu, relu6 = live_model(_net(nn.ReLU), EXAMPLE), live_model(_net(nn.ReLU6), EXAMPLE)
    assert relu.content_hash != relu6.content_hash
    assert live_model(_net(nn.ReLU), EXAMPLE).content_hash == relu.content_hash


@pytest.mark.parametrize(
    "call, message",
    [
        (
            lambda: toolkit.compile(_net()),
            "ConvReluHead: pass example_inputs=(tensor, ...) with the model's input shapes",
        ),
        (
            lambda: toolkit.compile("not a model", example_inputs=EXAMPLE),
            "example_inputs is for an nn.Module",
        ),
        (
            lambda: toolkit.compare(_net(), example_inputs=EXAMPLE, calibraton_samples=4),
            "unknown option calibraton_samples: the options are calibration_data, "
            "calibration_samples,",
        ),
        (lambda: toolkit.compile(42), "model is a int, not a torch.nn.Module"),
        (
            lambda: toolkit.deploy(_net(), example_inputs=EXAMPLE, runner="qemu"),
            "runner 'qemu' is not one of auto, fvp, sim, tosa-ref, serial",
        ),
        (lambda: toolkit.compile(_net(), example_inputs=EXAMPLE, fusion="maybe"), "fusion 'maybe'"),
    ],
)
def test_bad_input_raises_the_user_error_the_cli_prints(call, message):
    with pytest.raises(toolkit.UserError) as error:
        call()
    assert str(error.value).startswith(message)


def test_import_toolkit_stays_light():
    import subprocess
    import sys

    code = "import sys, toolkit; toolkit.__version__; print('torch' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"
