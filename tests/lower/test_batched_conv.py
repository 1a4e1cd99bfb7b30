"""A per-token Linear + ReLU (a transformer's MLP over 16 tokens) on Vela 5.1.0: the batched 1x1
convolution ExecuTorch lowers it to is compiled wrongly in the unfused variant; etk names the
wrong operation at compile time (lower/vela_check.py) and avoids it with the rewrite
batched-1x1-conv-as-image (rewrites/batched_conv.py). Judge: the TOSA reference model.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn
from tosa.TosaGraph import TosaGraph

from toolkit.artifacts import LoadedModel
from toolkit.cli import main
from toolkit.lower.build_variant import compile_variant
from toolkit.lower.vela_check import program_problems
from toolkit.quantize.calibration import random_calibration
from toolkit.rewrites import DEFAULT_REWRITES
from toolkit.runners.sim import SimulatorRunner
from toolkit.runners.tosa_ref import TosaReferenceRunner
from toolkit.targets import load_target

TOKENS, FEATURES = 16, 32


class TokenMlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.up, self.act, self.down = nn.Linear(FEATURES, 48), nn.ReLU(), nn.Linear(48, 6)

    def forward(self, x):
        return self.down(self.act(self.up(x)))


def token_mlp() -> nn.Module:
    torch.manual_seed(3)
    return TokenMlp().eval()


def _loaded() -> LoadedModel:
    example = (torch.randn(1, TOKENS, FEATURES, generator=torch.Generator().manual_seed(0)),)
    return LoadedModel("test:token_mlp", "token_mlp", token_mlp(), example, "token_mlp")


@pytest.fixture(scope="module")
def unfused(tmp_path_factory):
    """rewrites -> the unfused program, compiled once each."""
    loaded = _loaded()
    calibration = random_calibration(loaded.example_inputs, 4, 0)
    npu = load_target("corstone-300").npu()
    out = tmp_path_factory.mktemp("batched")
    return loaded, {
        name: compile_variant(loaded, calibration, "unfused", npu, out / name, rewrites=rewrites)
        for name, rewrites in (("default", DEFAULT_REWRITES), ("none", ()))
    }


def _samples(count: int = 3) -> list[np.ndarray]:
    return [
        torch.randn(1, TOKENS, FEATURES, generator=torch.Generator().manual_seed(10 + s)).numpy()
        for s in range(count)
    ]


def _tensor_shapes(tosa: Path) -> dict[str, tuple[int, ...]]:
    block = TosaGraph.GetRootAsTosaGraph(tosa.read_bytes(), 0).Regions(0).Blocks(0)
    tensors = (block.Tensors(t) for t in range(block.TensorsLength()))
    return {t.Name().decode(): tuple(int(d) for d in t.ShapeAsNumpy()) for t in tensors}


def test_without_the_rewrite_vela_reads_4_of_16_tokens_and_etk_says_so(unfused):
    _, programs = unfused
    program = programs["none"]
    (problem,) = program_problems(program)
    assert (problem.delegate, problem.offset, problem.operation) == (0, 0x120, "conv")
    assert "IFM of 4x1 with IFM_PAD_BOTTOM 12 for a 1x1 kernel into an OFM of 16x1" in problem.reads
    assert problem.asks == (
        "the TOSA CONV2D reads 'tosa_reshape_default' (16x1x1x32) with pad [0, 0, 0, 0]"
    )
    assert problem.describe().endswith("this program computes wrong results on the NPU")
    # what the registers say is what runs: the stream's outputs are not the TOSA graph's
    sim, reference = SimulatorRunner(), TosaReferenceRunner()
    sample = _samples(1)
    assert not np.array_equal(
        sim.run(program, sample).outputs[0], reference.run(program, sample).outputs[0]
    )


def test_the_rewrite_runs_the_tokens_as_one_image_bit_exactly(unfused):
    _, programs = unfused
    program = programs["default"]
    assert program_problems(program) == ()
    shapes = _tensor_shapes(program.delegates[0].tosa_path)
    assert shapes["tosa_conv2d_default"] == (1, TOKENS, 1, 48)
    assert shapes["tosa_conv2d_default_1"] == (1, TOKENS, 1, 6)
    (record,) = [r for r in program.rewrites if r.rewrite == "batched-1x1-conv-as-image"]
    assert record.change.startswith(
        f"1x1 convolution over a batch of {TOKENS} images of 1x1 run as one {TOKENS}x1 image"
    )
    assert program.npu_ops == programs["none"].npu_ops == 2  # the reshapes cost nothing
    sim, reference = SimulatorRunner(), TosaReferenceRunner()
    for sample in _samples():
        ours = sim.run(program, [sample]).outputs[0]
        assert np.array_equal(ours, reference.run(program, [sample]).outputs[0])
        # and the same values the batched TOSA graph asks for
        assert np.array_equal(ours, reference.run(programs["none"], [sample]).outputs[0])


def test_etk_compile_exits_1_naming_the_wrong_program(tmp_path, capsys):
    model = tmp_path / "token_mlp.py"
    # the model file holds this module's net, self-contained (an installed etk imports it alone)
    source = inspect.getsource(TokenMlp) + "\n\n" + inspect.getsource(token_mlp)
    header = f"import torch\nfrom torch import nn\n\nFEATURES = {FEATURES}\n\n\n"
    model.write_text(header + source, encoding="utf-8")
    args = ["compile", f"{model}:token_mlp", "--input-shape", f"1,{TOKENS},{FEATURES}"]
    out = tmp_path / "out"
    status = main([*args, "--fusion", "off", "--rewrites", "none", "-o", str(out)])
    printed = " ".join(capsys.readouterr().out.split())
    assert status == 1
    assert "WARNING unfused: delegate 0: conv at command-stream offset 0x120" in printed
    assert printed.endswith(
        "etk: Vela compiled unfused into a program that computes wrong results on the NPU "
        "(WARNING above); the rewrite batched-1x1-conv-as-image (in --rewrites default) avoids "
        "the known case"
    )
    report = json.loads((out / "report.json").read_text())
    (entry,) = report["variants"]["unfused"]["vela_problems"]
    assert (entry["offset"], entry["tensor"]) == (0x120, "tosa_clamp_default")
    assert report["warnings"][0].startswith("unfused: delegate 0: conv at command-stream")
