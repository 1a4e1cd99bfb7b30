"""A per-token Linear + ReLU (a transformer's MLP over 16 tokens): the batched 1x1 convolution
ExecuTorch lowers it to, followed by the ReLU's CLAMP in the unfused variant. Vela 5.1.0 compiled
it wrongly (the convolution read 4 of 16 tokens and padding); Vela 5.2.0 compiles it right but
runs the CLAMP as an extra POOL. The rewrite batched-1x1-conv-as-image (rewrites/batched_conv.py)
runs the tokens as one 4x4 image: 2 NPU operations instead of 3. etk's compile-time check
(lower/vela_check.py) still names Vela 5.1.0's registers. Judge: the TOSA reference model.
"""

from __future__ import annotations

import dataclasses
import struct
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn
from tosa.TosaGraph import TosaGraph

from toolkit.artifacts import LoadedModel
from toolkit.lower.build_variant import compile_variant
from toolkit.lower.vela_check import program_problems
from toolkit.quantize.calibration import random_calibration
from toolkit.rewrites import DEFAULT_REWRITES
from toolkit.runners.sim import SimulatorRunner
from toolkit.runners.tosa_ref import TosaReferenceRunner
from toolkit.sim.families.ethos_u55 import COMMANDS
from toolkit.sim.payload import load_payload
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


def test_without_the_rewrite_vela_5_2_runs_the_clamp_as_a_pool(unfused):
    _, programs = unfused
    program = programs["none"]
    assert program_problems(program) == ()
    assert program.delegates[0].command_ops == {
        "NPU_OP_CONV": 2,
        "NPU_OP_POOL": 1,
        "NPU_OP_STOP": 1,
    }
    sim, reference = SimulatorRunner(), TosaReferenceRunner()
    for sample in _samples(2):
        wanted = reference.run(program, [sample]).outputs[0]
        assert np.array_equal(sim.run(program, [sample]).outputs[0], wanted)


def _padded_below_from_the_first_conv(program, rows: int):
    """The program with IFM_PAD_BOTTOM set to `rows` where Vela writes it, before the first
    convolution: the register Vela 5.1.0 got wrong for this network (it wrote 12)."""
    delegate = program.delegates[0]
    payload = bytearray(delegate.payload)
    stream = load_payload(delegate.payload).command_stream
    start = payload.find(stream)
    (pad,) = [c for c in COMMANDS.decode(stream) if c.name == "NPU_SET_IFM_PAD_BOTTOM"]
    head = struct.unpack_from("<I", payload, start + pad.offset)[0]
    struct.pack_into("<I", payload, start + pad.offset, (head & 0xFFFF) | rows << 16)
    delegates = (dataclasses.replace(delegate, payload=bytes(payload)),)
    return dataclasses.replace(program, delegates=delegates)


def test_the_check_still_names_a_convolution_padded_past_its_kernel(unfused):
    """Registers persist until written: every operation after the patched register reads 12 rows
    of padding, and the check names each (the convolution first, with the TOSA operation behind
    it)."""
    _, programs = unfused
    problems = program_problems(_padded_below_from_the_first_conv(programs["none"], 12))
    assert [(p.delegate, p.offset, p.operation) for p in problems] == [
        (0, 0x120, "conv"),
        (0, 0x18C, "pool"),
        (0, 0x210, "conv"),
    ]
    first = problems[0]
    assert "with IFM_PAD_BOTTOM 12 for a 1x1 kernel into an OFM of 4x4" in first.reads
    assert first.asks == (
        "the TOSA CONV2D reads 'tosa_reshape_default' (16x1x1x32) with pad [0, 0, 0, 0]"
    )
    assert first.describe().endswith("this program computes wrong results on the NPU")
    assert program_problems(programs["none"]) == ()


def test_the_rewrite_runs_the_tokens_as_one_image_bit_exactly(unfused):
    _, programs = unfused
    program = programs["default"]
    assert program_problems(program) == ()
    shapes = _tensor_shapes(program.delegates[0].tosa_path)
    assert shapes["tosa_conv2d_default"] == (1, 4, 4, 48)
    assert shapes["tosa_conv2d_default_1"] == (1, 4, 4, 6)
    (record,) = [r for r in program.rewrites if r.rewrite == "batched-1x1-conv-as-image"]
    assert record.change.startswith(
        f"1x1 convolution over a batch of {TOKENS} images of 1x1 run as one 4x4 image"
    )
    # the reshapes cost nothing; Vela 5.2's batched form adds a POOL (Vela 5.1.0: 2 and 2); as
    # a 16x1 column instead of 4x4 the estimate was 1,344
    assert (program.npu_ops, programs["none"].npu_ops) == (2, 3)
    estimates = [programs[n].delegates[0].estimate.npu_cycles for n in ("default", "none")]
    assert estimates == [1_088, 3_018]
    sim, reference = SimulatorRunner(), TosaReferenceRunner()
    for sample in _samples():
        ours = sim.run(program, [sample]).outputs[0]
        assert np.array_equal(ours, reference.run(program, [sample]).outputs[0])
        # and the same values the batched TOSA graph asks for
        assert np.array_equal(ours, reference.run(programs["none"], [sample]).outputs[0])


def test_the_fused_variant_stays_batched(tmp_path):
    """No CLAMP after the convolutions (the RESCALE is the ReLU): Vela 5.2.0 runs the batched
    form as the square image itself (1,088 estimated NPU cycles, as the rewritten unfused
    variant), and it is left alone."""
    loaded = _loaded()
    calibration = random_calibration(loaded.example_inputs, 4, 0)
    npu = load_target("corstone-300").npu()
    program = compile_variant(loaded, calibration, "fused", npu, tmp_path / "fused")
    assert not [r for r in program.rewrites if r.rewrite == "batched-1x1-conv-as-image"]
    assert _tensor_shapes(program.delegates[0].tosa_path)["tosa_conv2d_default"][0] == TOKENS
    assert (program.npu_ops, program.delegates[0].estimate.npu_cycles) == (2, 1_088)
    assert program_problems(program) == ()


@pytest.mark.parametrize(
    "batch, height, width, image",
    [
        (16, 1, 1, (4, 4)),
        (64, 1, 1, (8, 8)),
        (12, 1, 1, (4, 3)),
        (13, 1, 1, (13, 1)),
        (2, 4, 4, (8, 4)),
    ],
)
def test_tokens_become_the_most_nearly_square_image(batch, height, width, image):
    from toolkit.rewrites.batched_conv import image_shape

    assert image_shape(batch, height, width) == image
