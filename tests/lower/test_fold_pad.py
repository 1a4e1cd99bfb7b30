"""An explicit zero PAD before a convolution folds into the convolution's padding (rewrites/fold_pad.py).

TF-style "same" padding, written as F.pad(x, (0, 1, 0, 1)) + Conv2d(stride=2, padding=0), lowers
through ExecuTorch 1.5.1 to PAD + CONV2D, and Vela runs the PAD as 3 extra NPU operations.
Figures: ethos-u55-128 (corstone-300 default), Vela 5.2.0 estimate. Vela 5.1.0 compiled the same
streams (conv-nchw unfolded aside) and estimated 2,240 / 7,217, 1,280 / 6,257 and 3,520 / 11,063:
5.2.0 no longer books a table lookup on operations with no fused activation.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from executorch.backends.arm._passes import RewritePadPass, arm_pass_manager
from torch import nn
from tosa.Conv2dAttribute import Conv2dAttribute
from tosa.DepthwiseConv2dAttribute import DepthwiseConv2dAttribute
from tosa.Op import Op
from tosa.TosaGraph import TosaGraph

from toolkit.artifacts import LoadedModel
from toolkit.evaluation.metrics import sqnr_db
from toolkit.lower.build_variant import compile_variant
from toolkit.lower.tosa_graph import read_tosa
from toolkit.models.layout import channels_last_io
from toolkit.quantize.calibration import random_calibration
from toolkit.rewrites import DEFAULT_REWRITES
from toolkit.rewrites.fold_pad import FoldPadIntoConvPass, fold_pads_into_convs
from toolkit.runners.sim import SimulatorRunner
from toolkit.runners.tosa_ref import TosaReferenceRunner
from toolkit.targets import load_target


class PadConv(nn.Module):
    """TF "same" padding for a 3x3 stride-2 conv on an even input: pad bottom and right by 1."""

    def __init__(self, depthwise: bool = False, value: float = 0.0):
        super().__init__()
        self.value = value
        self.conv = nn.Conv2d(
            8, 8 if depthwise else 16, 3, stride=2, padding=0, groups=8 if depthwise else 1
        )

    def forward(self, x):
        return torch.relu(self.conv(F.pad(x, (0, 1, 0, 1), value=self.value)))


class PadConvAndPool(nn.Module):
    """The padded tensor also feeds an average pool, which must see the PAD."""

    def __init__(self):
        super().__init__()
        self.conv, self.pool = nn.Conv2d(8, 8, 3, stride=2), nn.AvgPool2d(3, 2)

    def forward(self, x):
        y = F.pad(x, (0, 1, 0, 1))
        return torch.relu(self.conv(y)) + self.pool(y)


class PadSlicedConv(nn.Module):
    """17x17 padded input, 2x2 stride-2 conv: ExecuTorch's SizeAdjustInputPass slices the input
    to 16x16 (TOSA needs an exact output size), so the PAD does not feed the conv directly."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(8, 16, 2, stride=2)

    def forward(self, x):
        return torch.relu(self.conv(F.pad(x, (0, 1, 0, 1))))


def _loaded(name: str, make, nhwc: bool) -> LoadedModel:
    torch.manual_seed(0)
    module = make().eval()
    loaded = LoadedModel(f"test:{name}", name, module, (torch.randn(1, 8, 16, 16),), name)
    return channels_last_io(loaded) if nhwc else loaded


def _compile(loaded: LoadedModel, out: Path, fold: bool = True, variant: str = "fused"):
    return compile_variant(
        loaded,
        random_calibration(loaded.example_inputs, 4, 0),
        variant,
        load_target("corstone-300").npu(),
        out / f"{variant}-{'fold' if fold else 'nofold'}",
        rewrites=DEFAULT_REWRITES if fold else (),
    )


def _conv_pads(tosa_path: Path) -> list[list[int]]:
    """The pad attribute [top, bottom, left, right] of each CONV2D / DEPTHWISE_CONV2D."""
    graph = TosaGraph.GetRootAsTosaGraph(Path(tosa_path).read_bytes(), 0)
    attributes = {Op.CONV2D: Conv2dAttribute, Op.DEPTHWISE_CONV2D: DepthwiseConv2dAttribute}
    pads = []
    for r in range(graph.RegionsLength()):
        for b in range(graph.Regions(r).BlocksLength()):
            block = graph.Regions(r).Blocks(b)
            for i in range(block.OperatorsLength()):
                op = block.Operators(i)
                if op.Op() in attributes:
                    table, attribute = op.Attribute(), attributes[op.Op()]()
                    attribute.Init(table.Bytes, table.Pos)
                    pads.append(attribute.PadAsNumpy().tolist())
    return pads


def _samples(loaded: LoadedModel) -> list[np.ndarray]:
    shape = loaded.example_inputs[0].shape
    return [
        torch.randn(shape, generator=torch.Generator().manual_seed(seed)).numpy()
        for seed in range(3)
    ]


# name: (module, NHWC interface, conv op, folded (NPU ops, NPU cycles), unfolded (ops, cycles))
FOLDED = {
    "conv": (PadConv, True, "CONV2D", (1, 1_728), (4, 6_094)),
    "depthwise": (
        lambda: PadConv(depthwise=True),
        True,
        "DEPTHWISE_CONV2D",
        (1, 1_024),
        (4, 5_390),
    ),
    # NCHW interface: PAD -> NCHW-to-NHWC permute -> CONV2D; two TRANSPOSEs at the edges remain
    "conv-nchw": (PadConv, False, "CONV2D", (42, 3_008), (46, 9_006)),
}


@pytest.fixture(scope="module")
def folded_pair(tmp_path_factory):
    """name -> (loaded model, folded program, unfolded program), each compiled once."""
    built = {}

    def build(name: str):
        if name not in built:
            make, nhwc = FOLDED[name][:2]
            loaded = _loaded(name, make, nhwc)
            out = tmp_path_factory.mktemp(name)
            built[name] = (loaded, _compile(loaded, out), _compile(loaded, out, fold=False))
        return built[name]

    return build


@pytest.mark.parametrize("name", FOLDED)
def test_zero_pad_folds_into_the_conv(folded_pair, name):
    loaded, folded, unfolded = folded_pair(name)
    _make, _nhwc, conv, (ops, cycles), (ops_before, cycles_before) = FOLDED[name]
    histogram = read_tosa(folded.delegates[0].tosa_path).histogram()
    assert "PAD" not in histogram and histogram[conv] == 1
    assert _conv_pads(folded.delegates[0].tosa_path) == [[0, 1, 0, 1]]
    assert (folded.npu_ops, folded.delegates[0].estimate.npu_cycles) == (ops, cycles)
    (record,) = [r for r in folded.rewrites if r.rewrite == "fold-pad-into-conv"]
    assert record.change.startswith("PAD [0, 1, 0, 1] (top, bottom, left, right) folded into")
    assert not [r for r in unfolded.rewrites if r.rewrite == "fold-pad-into-conv"]
    # without the fold: a PAD, the conv unpadded, and Vela's extra operations for the PAD
    assert read_tosa(unfolded.delegates[0].tosa_path).histogram()["PAD"] == 1
    assert _conv_pads(unfolded.delegates[0].tosa_path) == [[0, 0, 0, 0]]
    assert (unfolded.npu_ops, unfolded.delegates[0].estimate.npu_cycles) == (
        ops_before,
        cycles_before,
    )


@pytest.mark.parametrize("name", FOLDED)
def test_folded_program_gives_the_same_result(folded_pair, name):
    loaded, folded, unfolded = folded_pair(name)
    for runner in (TosaReferenceRunner(), SimulatorRunner()):
        for sample in _samples(loaded):
            out = runner.run(folded, [sample]).outputs[0]
            assert np.array_equal(out, runner.run(unfolded, [sample]).outputs[0]), runner.name
            reference = loaded.module(torch.from_numpy(sample)).detach().numpy()
            assert sqnr_db(reference, out) > 30.0, runner.name


@pytest.mark.parametrize(
    "name, make",
    [
        ("pad-value-1", lambda: PadConv(value=1.0)),  # pads with 1.0, not the conv's zero point
        ("pad-two-users", PadConvAndPool),
        ("pad-then-slice", PadSlicedConv),
    ],
)
def test_pad_that_is_not_the_convs_padding_stays(tmp_path, name, make):
    loaded = _loaded(name, make, nhwc=True)
    program = _compile(loaded, tmp_path)
    assert read_tosa(program.delegates[0].tosa_path).histogram()["PAD"] == 1
    assert _conv_pads(program.delegates[0].tosa_path) == [[0, 0, 0, 0]]
    runner = TosaReferenceRunner()
    for sample in _samples(loaded):
        reference = loaded.module(torch.from_numpy(sample)).detach().numpy()
        assert sqnr_db(reference, runner.run(program, [sample]).outputs[0]) > 30.0


def _registry() -> dict:
    return {
        target: (list(entry.before_passes), list(entry.after_passes))
        for target, entry in arm_pass_manager._registered_pass_insertions.items()
    }


def test_registration_lasts_only_for_the_lowering(tmp_path):
    before = _registry()
    program = _compile(_loaded("conv", PadConv, nhwc=True), tmp_path, variant="unfused")
    assert _registry() == before
    # it was registered during the lowering: the unfused variant folds too
    assert "PAD" not in read_tosa(program.delegates[0].tosa_path).histogram()
    assert (program.npu_ops, program.delegates[0].estimate.npu_cycles) == (1, 1_728)


def test_registration_keeps_other_insertions_and_survives_errors():
    registry = arm_pass_manager._registered_pass_insertions
    had_entry = RewritePadPass in registry
    other = FoldPadIntoConvPass()  # stands for someone else's pass
    arm_pass_manager.register_pass_insertions_after(RewritePadPass, [other])
    try:
        before = _registry()
        with pytest.raises(RuntimeError), fold_pads_into_convs():
            (_other, ours) = registry[RewritePadPass].after_passes[-2:]
            assert _other is other and isinstance(ours, FoldPadIntoConvPass) and ours is not other
            raise RuntimeError("lowering failed")
        assert _registry() == before
    finally:
        registry[RewritePadPass].after_passes.remove(other)
        if not had_entry:
            del registry[RewritePadPass]
