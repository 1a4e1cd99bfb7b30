"""padding='same' with an even kernel: the asymmetric padding runs on the NPU, folded into the conv.

torch.export keeps `nn.Conv2d(C, K, 4, padding='same')` as aten.conv2d.padding; ExecuTorch 1.5.1
decomposes it after quantization into constant_pad_nd + convolution, which put the PAD in a
delegate of its own and left the conv on the CPU reading the PAD's int8 output as float ("expected
scalar type Char but found Float" at run time). quantize/same_padding.py writes the padding as
numbers before quantization; a delegate output that is not quantized is refused when lowering
(lower/delegate_outputs.py). The padding side is PyTorch's (its float model is the reference):
the extra row and column go after, i.e. [top, bottom, left, right] = [1, 2, 1, 2] for a 4x4 kernel.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn
from tosa.Conv2dAttribute import Conv2dAttribute
from tosa.DepthwiseConv2dAttribute import DepthwiseConv2dAttribute
from tosa.Op import Op
from tosa.TosaGraph import TosaGraph

from toolkit.artifacts import LoadedModel
from toolkit.errors import ToolError
from toolkit.evaluation.metrics import sqnr_db
from toolkit.lower.build_variant import compile_variant
from toolkit.lower.tosa_graph import read_tosa
from toolkit.models.layout import channels_last_io
from toolkit.quantize.calibration import random_calibration
from toolkit.rewrites import DEFAULT_REWRITES
from toolkit.runners.sim import SimulatorRunner
from toolkit.runners.tosa_ref import TosaReferenceRunner
from toolkit.targets import load_target


class SameConv(nn.Module):
    def __init__(self, kernel, dims: int = 2, dilation: int = 1, groups: int = 1):
        super().__init__()
        conv = nn.Conv2d if dims == 2 else nn.Conv1d
        self.conv = conv(8, 8, kernel, padding="same", dilation=dilation, groups=groups)

    def forward(self, x):
        return torch.relu(self.conv(x))


# name: (module, input shape, NHWC interface, TOSA conv op, the conv's [top, bottom, left, right])
CASES = {
    "conv2d-4x4": (lambda: SameConv(4), (1, 8, 12, 12), True, "CONV2D", [1, 2, 1, 2]),
    "depthwise-4x2-dilated": (
        lambda: SameConv((4, 2), dilation=3, groups=8),
        (1, 8, 12, 12),
        True,
        "DEPTHWISE_CONV2D",
        [4, 5, 1, 2],
    ),
    "conv1d-4": (lambda: SameConv(4, dims=1), (1, 8, 20), False, "CONV2D", [0, 0, 1, 2]),
}


def _conv_pads(tosa_path: Path) -> list[list[int]]:
    """The pad attribute [top, bottom, left, right] of each CONV2D / DEPTHWISE_CONV2D."""
    graph = TosaGraph.GetRootAsTosaGraph(Path(tosa_path).read_bytes(), 0)
    attributes = {Op.CONV2D: Conv2dAttribute, Op.DEPTHWISE_CONV2D: DepthwiseConv2dAttribute}
    block = graph.Regions(0).Blocks(0)
    pads = []
    for i in range(block.OperatorsLength()):
        op = block.Operators(i)
        if op.Op() in attributes:
            table, attribute = op.Attribute(), attributes[op.Op()]()
            attribute.Init(table.Bytes, table.Pos)
            pads.append(attribute.PadAsNumpy().tolist())
    return pads


def _loaded(name: str, seed: int = 0) -> LoadedModel:
    make, shape, nhwc = CASES[name][:3]
    torch.manual_seed(seed)
    loaded = LoadedModel(
        f"test:{name}", name, make().eval(), (torch.randn(shape),), f"{name}-{seed}"
    )
    return channels_last_io(loaded) if nhwc else loaded


def _compile(loaded: LoadedModel, out: Path, rewrites=DEFAULT_REWRITES):
    return compile_variant(
        loaded,
        random_calibration(loaded.example_inputs, 4, 0),
        "fused",
        load_target("corstone-300").npu(),
        out,
        rewrites=rewrites,
    )


@pytest.mark.parametrize("name", CASES)
def test_same_padding_runs_on_the_npu_folded_into_the_conv(tmp_path, name):
    loaded = _loaded(name)
    program = _compile(loaded, tmp_path)
    conv, pads = CASES[name][3:]
    assert (len(program.delegates), program.cpu_ops) == (1, ())
    histogram = read_tosa(program.delegates[0].tosa_path).histogram()
    assert "PAD" not in histogram and histogram[conv] == 1
    assert _conv_pads(program.delegates[0].tosa_path) == [pads]
    shape = tuple(loaded.example_inputs[0].shape)
    for seed in range(3):
        sample = torch.randn(shape, generator=torch.Generator().manual_seed(seed)).numpy()
        reference = TosaReferenceRunner().run(program, [sample]).outputs[0]
        simulated = SimulatorRunner().run(program, [sample]).outputs[0]
        assert np.array_equal(reference, simulated)
        expected = loaded.module(torch.from_numpy(sample)).detach().numpy()
        assert sqnr_db(expected, reference) > 30.0  # PyTorch's side of the extra padding


def test_same_padding_without_rewrites_keeps_a_pad_on_the_npu(tmp_path):
    loaded = _loaded("conv2d-4x4", seed=1)
    program = _compile(loaded, tmp_path, rewrites=())
    assert (len(program.delegates), program.cpu_ops) == (1, ())
    assert read_tosa(program.delegates[0].tosa_path).histogram()["PAD"] == 1
    assert _conv_pads(program.delegates[0].tosa_path) == [[1, 1, 1, 1]]
    sample = torch.randn(loaded.example_inputs[0].shape).numpy()
    expected = loaded.module(torch.from_numpy(sample)).detach().numpy()
    assert sqnr_db(expected, TosaReferenceRunner().run(program, [sample]).outputs[0]) > 30.0


def test_a_delegate_output_left_unquantized_is_refused(
    tmp_path, monkeypatch, no_shared_compile_cache
):
    """Without the padding written out, ExecuTorch delegates the PAD alone and leaves the conv
    on the CPU reading its int8 output as float: refused in one line when lowering."""
    import toolkit.quantize.quantizer as quantizer

    monkeypatch.setattr(quantizer, "explicit_same_padding", lambda graph: ())
    with pytest.raises(ToolError) as refused:
        _compile(_loaded("conv2d-4x4", seed=2), tmp_path)
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith(
        "ExecuTorch left a delegate output unquantized: delegate 0 returns constant_pad_nd"
    )
    assert "the CPU operator convolution would read its int8 data as float" in message
