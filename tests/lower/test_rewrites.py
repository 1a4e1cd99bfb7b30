"""Each rewrite and layout option: what it changes on the NPU, and that results stay correct."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from toolkit.artifacts import LoadedModel
from toolkit.errors import UserError
from toolkit.evaluation.metrics import sqnr_db
from toolkit.lower.build_variant import compile_variant
from toolkit.lower.tosa_graph import read_tosa
from toolkit.models.layout import channels_last_io
from toolkit.models.loader import load_model
from toolkit.quantize.calibration import random_calibration
from toolkit.rewrites import resolve_rewrites
from toolkit.runners.tosa_ref import TosaReferenceRunner
from toolkit.targets import load_target


class WideGlobalPool(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 8, 1)
        self.pool = nn.AvgPool2d((8, 4))  # stride (8, 4) > 3: not an NPU pool as written

    def forward(self, x):
        return self.pool(torch.relu(self.conv(x)))


def _compile(model, x, tmp_path, rewrites):
    loaded = LoadedModel("test:pool", "pool", model, (x,), "rewrite-test")
    return compile_variant(
        loaded,
        random_calibration((x,), 4, 0),
        "fused",
        load_target("corstone-300").npu(),
        tmp_path / "-".join(rewrites),
        rewrites=rewrites,
    )


def test_global_pool_stride_keeps_the_model_on_the_npu(tmp_path):
    torch.manual_seed(0)
    model, x = WideGlobalPool().eval(), torch.randn(1, 4, 8, 4)
    before = _compile(model, x, tmp_path, ())
    assert len(before.cpu_ops) == 3  # dequantize, avg_pool2d, quantize between delegates
    assert any("Avgpool2d needs stride <= 3" in op.reason for op in before.cpu_ops)
    after = _compile(model, x, tmp_path, ("global-pool-stride",))
    assert len(after.delegates) == 1 and after.cpu_ops == ()
    (record,) = after.rewrites
    assert record.rewrite == "global-pool-stride"
    assert "stride 8x4 -> 1x1" in record.change
    output = TosaReferenceRunner().run(after, [x.numpy()]).outputs[0]
    assert sqnr_db(model(x).detach().numpy(), output) > 30.0


POOLS_1D = [
    nn.MaxPool1d(2),
    nn.MaxPool1d(3, stride=2, padding=1),
    nn.MaxPool1d(3, stride=1, padding=1, dilation=2),
    nn.MaxPool1d(2, stride=2, ceil_mode=True),
    nn.AvgPool1d(2),
    nn.AvgPool1d(3, stride=2, padding=1),
    nn.AvgPool1d(3, stride=2, padding=1, count_include_pad=False),
    nn.AvgPool1d(4, stride=3, ceil_mode=True),
]


@pytest.mark.parametrize("pool", POOLS_1D, ids=repr)
@pytest.mark.parametrize("shape", [(2, 5, 13), (5, 13)], ids=["batched", "unbatched"])
def test_pool_1d_as_2d_gives_the_same_float_output(pool, shape):
    from toolkit.rewrites import apply_rewrites

    x = torch.randn(*shape, generator=torch.Generator().manual_seed(0))
    graph = torch.export.export(nn.Sequential(pool), (x,)).module()
    (record,) = apply_rewrites(graph, ("pool-1d-as-2d",))
    assert record.rewrite == "pool-1d-as-2d"
    targets = [n.target for n in graph.graph.nodes if n.op == "call_function"]
    assert not any("pool1d" in str(t) for t in targets)
    assert torch.equal(graph(x), pool(x))


TRANSPOSED_1D = [
    dict(),
    dict(stride=2, padding=1),
    dict(stride=2, padding=1, output_padding=1),
    dict(stride=3, dilation=2, bias=False),
    dict(stride=2, groups=2, padding=2),
]


@pytest.mark.parametrize("options", TRANSPOSED_1D, ids=repr)
@pytest.mark.parametrize("shape", [(2, 4, 11), (4, 11)], ids=["batched", "unbatched"])
def test_conv_transpose_1d_as_2d_gives_the_same_float_output(options, shape):
    from toolkit.rewrites import apply_rewrites

    torch.manual_seed(0)
    conv = nn.ConvTranspose1d(4, 6, 3, **options).eval()
    x = torch.randn(*shape)
    graph = torch.export.export(nn.Sequential(conv), (x,)).module()
    (record,) = apply_rewrites(graph, ("conv-transpose-1d-as-2d",))
    assert record.rewrite == "conv-transpose-1d-as-2d"
    targets = [n.target for n in graph.graph.nodes if n.op == "call_function"]
    assert torch.ops.aten.conv_transpose1d.default not in targets
    with torch.no_grad():
        assert torch.allclose(graph(x), conv(x), rtol=0, atol=1e-6)


def test_unknown_rewrite_is_named():
    with pytest.raises(
        UserError, match="unknown rewrite nope: use default, none or a list of global-pool-stride"
    ):
        resolve_rewrites("global-pool-stride,nope")


def test_nhwc_interface_removes_the_transposes(tmp_path):
    nchw = load_model("zoo:conv2d_relu")
    nhwc = channels_last_io(nchw)
    assert tuple(nhwc.example_inputs[0].shape) == (1, 16, 16, 3)
    programs = {}
    for name, model in (("nchw", nchw), ("nhwc", nhwc)):
        programs[name] = compile_variant(
            model,
            random_calibration(model.example_inputs, 4, 0),
            "fused",
            load_target("corstone-300").npu(),
            tmp_path / name,
        )
    assert read_tosa(programs["nchw"].delegates[0].tosa_path).histogram().get("TRANSPOSE") == 2
    assert "TRANSPOSE" not in read_tosa(programs["nhwc"].delegates[0].tosa_path).histogram()
    assert (programs["nchw"].npu_ops, programs["nhwc"].npu_ops) == (42, 1)
    x = nhwc.example_inputs[0]
    output = TosaReferenceRunner().run(programs["nhwc"], [x.numpy()]).outputs[0]
    assert output.shape == (1, 16, 16, 8)
    assert sqnr_db(nhwc.module(x).detach().numpy(), output) > 30.0


class ResidualBlock(nn.Module):
    """conv2(conv1(x)) + shortcut(x), as residual blocks are usually written."""

    def __init__(self):
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(8, 8, 3, padding=1), nn.Conv2d(8, 8, 3, padding=1)
        self.shortcut = nn.Conv2d(8, 8, 1)

    def forward(self, x):
        return torch.relu(self.conv2(torch.relu(self.conv1(x))) + self.shortcut(x))


def _add_operands(program) -> tuple[str, ...]:
    graph = read_tosa(program.delegates[0].tosa_path)
    (add,) = [o for o in graph.operators if o.op == "ADD"]
    producers = {out: o for o in graph.operators for out in o.outputs}

    def branch(name: str) -> str:  # follow RESCALEs back to the convolution
        while producers[name].op == "RESCALE":
            name = producers[name].inputs[0]
        return producers[name].inputs[1]  # the convolution's weights

    return tuple(branch(name) for name in add.inputs)


def test_residual_branch_order_runs_the_long_branch_first_with_the_same_result(tmp_path):
    torch.manual_seed(0)
    model, x = ResidualBlock().eval(), torch.randn(1, 8, 8, 8)
    loaded = LoadedModel("test:residual", "residual", model, (x,), "branch-order-test")
    calibration = random_calibration((x,), 4, 0)
    programs = {
        rewrites: compile_variant(
            loaded,
            calibration,
            "fused",
            load_target("corstone-300").npu(),
            tmp_path / (rewrites[0] if rewrites else "none"),
            rewrites=rewrites,
        )
        for rewrites in ((), ("residual-branch-order",))
    }
    before, after = programs[()], programs[("residual-branch-order",)]
    # Vela schedules an add's last operand first: that must be the conv1 -> conv2 branch
    assert _add_operands(before) == (
        "aten_convolution_default_1_weight_ohwi",
        "aten_convolution_default_2_weight_ohwi",
    )
    assert _add_operands(after) == (
        "aten_convolution_default_2_weight_ohwi",
        "aten_convolution_default_1_weight_ohwi",
    )
    (record,) = after.rewrites
    assert record.rewrite == "residual-branch-order"
    assert record.change == (
        "add operands swapped: the 3-op branch (conv2d_1) now runs before the "
        "1-op one (conv2d_2), whose output is no longer held in SRAM "
        "meanwhile (same result)"
    )
    runner = TosaReferenceRunner()
    for seed in range(3):
        sample = torch.randn(1, 8, 8, 8, generator=torch.Generator().manual_seed(seed)).numpy()
        assert (
            runner.run(before, [sample]).outputs[0] == runner.run(after, [sample]).outputs[0]
        ).all()


def test_the_cli_help_lists_every_rewrite_from_one_place():
    """--rewrites' help is made from the names the rewrites run under (it listed four of the
    five before): every rewrite etk has is on by default and named there."""
    from toolkit.cli import build_parser
    from toolkit.rewrite_names import DEFAULT_REWRITES
    from toolkit.rewrites import available_rewrites

    assert sorted(available_rewrites()) == sorted(DEFAULT_REWRITES)
    compile_parser = build_parser()._subparsers._group_actions[0].choices["compile"]
    (action,) = [a for a in compile_parser._actions if "--rewrites" in a.option_strings]
    assert action.help.endswith("a comma-separated list of " + ", ".join(DEFAULT_REWRITES))


def test_one_registry_names_the_rewrites_that_run_and_the_docs_describe():
    """rewrite_names.REWRITES is the one list: the registries that run the rewrites hold exactly
    its names, at the stage it says, and docs/usage.md describes each, in its order."""
    import re
    from pathlib import Path

    from toolkit.rewrite_names import REWRITES
    from toolkit.rewrites import _lowering_registry, _registry

    assert set(_registry()) == {r.name for r in REWRITES if r.stage == "exported"}
    assert set(_lowering_registry()) == {r.name for r in REWRITES if r.stage == "lowering"}
    usage = (Path(__file__).resolve().parents[2] / "docs" / "usage.md").read_text()
    section = usage.split("### `--rewrites default|none|NAME,...`")[1].split("\n## ")[0]
    assert re.findall(r"^- `([a-z0-9-]+)` \(", section, flags=re.M) == [r.name for r in REWRITES]
    words = "no one two three four five six seven eight nine ten eleven twelve".split()
    assert f"All {words[sum(r.default for r in REWRITES)]} rewrites" in section
