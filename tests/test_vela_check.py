"""The compile-time check for command streams that cannot compute what their TOSA graph asks
(lower/vela_check.py): windows wholly in padding, and outputs Vela dropped. The batched 1x1
convolution case is in test_batched_conv.py."""

from __future__ import annotations

import sys
from pathlib import Path
from types import MappingProxyType

import numpy as np
import pytest
import torch
from torch import nn

from toolkit.artifacts import LoadedModel
from toolkit.lower.build_variant import compile_variant
from toolkit.lower.vela_check import graph_pads_past_kernel, padded_windows, program_problems
from toolkit.quantize.calibration import random_calibration
from toolkit.rewrites import DEFAULT_REWRITES
from toolkit.runners import sim_check
from toolkit.runners.sim import SimulatorRunner
from toolkit.runners.tosa_ref import TosaReferenceRunner
from toolkit.sim.families import family_of
from toolkit.sim.registers import Registers
from toolkit.targets import load_target

sys.path.insert(0, str(Path(__file__).parent / "collection"))
from held_out_kinds import TinyUNet  # noqa: E402

U55 = family_of("ethos-u55-128")


def _registers(**values: int) -> Registers:
    base = {"KERNEL_STRIDE": 0, "KERNEL_HEIGHT_M1": 0, "KERNEL_WIDTH_M1": 0}
    base.update(values)
    return Registers(MappingProxyType(base))


def test_a_window_wholly_in_padding_is_named_and_ordinary_padding_is_not():
    reads = padded_windows(_registers(IFM_PAD_BOTTOM=12, OFM_HEIGHT_M1=15, OFM_WIDTH_M1=0), U55)
    assert reads is not None and reads.startswith(
        "reads an IFM of 4x1 with IFM_PAD_BOTTOM 12 for a 1x1 kernel into an OFM of 16x1"
    )
    three = {"KERNEL_HEIGHT_M1": 2, "KERNEL_WIDTH_M1": 2, "OFM_HEIGHT_M1": 7, "OFM_WIDTH_M1": 7}
    assert padded_windows(_registers(IFM_PAD_TOP=1, IFM_PAD_LEFT=2, **three), U55) is None
    assert "IFM_PAD_RIGHT 3" in (padded_windows(_registers(IFM_PAD_RIGHT=3, **three), U55) or "")
    # a transposed convolution's upscaled IFM is padded by design
    upscaled = _registers(IFM_PAD_TOP=1, IFM_UPSCALE=2, OFM_HEIGHT_M1=7, OFM_WIDTH_M1=7)
    assert padded_windows(upscaled, U55) is None


def _compile(module: nn.Module, shape, variant: str, out: Path, rewrites=DEFAULT_REWRITES):
    torch.manual_seed(0)
    example = (torch.randn(*shape),)
    loaded = LoadedModel(f"test:{out.name}", out.name, module.eval(), example, out.name)
    program = compile_variant(
        loaded,
        random_calibration(example, 4, 0),
        variant,
        load_target("corstone-300").npu(),
        out,
        rewrites=rewrites,
    )
    return loaded, program


class PaddedPointwise(nn.Module):
    """A 1x1 convolution with padding=1: its border outputs are the bias, as the graph asks."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 8, 1, padding=1)

    def forward(self, x):
        return torch.relu(self.conv(x))


def test_a_graph_that_asks_for_padding_past_its_kernel_is_not_flagged(tmp_path):
    torch.manual_seed(0)
    loaded, program = _compile(PaddedPointwise(), (1, 4, 8, 8), "unfused", tmp_path / "padded")
    assert graph_pads_past_kernel(program.delegates[0].tosa_path)
    assert program_problems(program) == ()
    sample = [loaded.example_inputs[0].numpy()]
    assert np.array_equal(
        SimulatorRunner().run(program, sample).outputs[0],
        TosaReferenceRunner().run(program, sample).outputs[0],
    )


WITHOUT_CANCEL = tuple(r for r in DEFAULT_REWRITES if r != "cancel-inverse-permutes")


@pytest.fixture(scope="module")
def unet_batch2(tmp_path_factory):
    """TinyUNet at batch size 2, fused: with the default rewrites and without
    cancel-inverse-permutes."""
    out = tmp_path_factory.mktemp("unet")
    torch.manual_seed(0)
    net = TinyUNet()
    return {
        name: _compile(net, (2, 3, 16, 16), "fused", out / name, rewrites)[1]
        for name, rewrites in (("default", DEFAULT_REWRITES), ("without", WITHOUT_CANCEL))
    }


def test_an_output_vela_dropped_is_named_and_the_simulator_refuses_it(unet_batch2):
    """The first delegate transposes the skip tensor to NCHW (its output, for the CPU's resize)
    and straight back for the next convolution; Vela 5.1.0 merges the pair and its command
    stream writes one of the TOSA graph's two outputs."""
    program = unet_batch2["without"]
    (problem,) = program_problems(program)
    assert (problem.delegate, problem.offset, problem.operation) == (0, None, "outputs")
    assert problem.describe() == (
        "delegate 0: the command stream writes 1 output(s); the TOSA graph has 2 "
        "(tosa_transpose_default_1, tosa_transpose_default_3): this program computes wrong "
        "results on the NPU"
    )
    assert sim_check.refusal(program.delegates[0], program.npu) == (
        "delegate 0: Vela's command stream writes 1 of the TOSA graph's 2 outputs (a program "
        "Vela compiled wrongly)"
    )


def test_cancel_inverse_permutes_keeps_the_output_and_is_bit_exact(unet_batch2):
    program = unet_batch2["default"]
    assert program_problems(program) == ()
    records = [r for r in program.rewrites if r.rewrite == "cancel-inverse-permutes"]
    assert len(records) >= 1
    sample = [torch.randn(2, 3, 16, 16, generator=torch.Generator().manual_seed(4)).numpy()]
    assert np.array_equal(
        SimulatorRunner().run(program, sample).outputs[0],
        TosaReferenceRunner().run(program, sample).outputs[0],
    )
