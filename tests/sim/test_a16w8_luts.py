"""a16w8 lookup tables: Vela's interpolating 16-bit LUTs (sigmoid, tanh, softmax's exp and
reciprocal) run bit-exactly against the TOSA reference model on Ethos-U55 and U65 (one core and two)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import toolkit
from toolkit.sim.activation import InterpolatedLut


class SigmoidTanh(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)

    def forward(self, x):
        y = self.conv(x)
        return torch.sigmoid(y) + torch.tanh(y)


class Softmax(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        return torch.softmax(self.fc(x), dim=-1)


# U65's configurations (a compile each, 15-20 s on a busy machine) in the slow run
@pytest.mark.parametrize(
    "npu",
    [
        "ethos-u55-128",
        pytest.param("ethos-u65-256", marks=pytest.mark.slow),
        pytest.param("ethos-u65-512", marks=pytest.mark.slow),
    ],
)
@pytest.mark.parametrize("net,shape", [(SigmoidTanh, (1, 3, 8, 8)), (Softmax, (1, 16))])
def test_int16_luts_run_bit_exact(net, shape, npu):
    torch.manual_seed(0)  # the net's initial weights
    inputs = (torch.randn(shape, generator=torch.Generator().manual_seed(1)),)
    result = toolkit.deploy(
        net(), example_inputs=inputs, runner="sim", quant="a16w8", npu=npu, eval_samples=4
    )
    vr = result.variants["fused"]
    assert vr.program.delegates[0].tosa_ops["TABLE"] >= 1
    assert (vr.run.outputs_match_reference, vr.run.max_diff_lsb) == (True, 0.0)
    assert vr.run.evaluation.runs[0].details["self_check"].startswith("every delegate equals")


def test_the_interpolation_rounds_half_up_between_entries():
    """base + ((slope * fraction + 64) >> 7): with rounding down instead, the SigmoidTanh net
    above differs from the TOSA reference model by 2 LSB."""

    class Memory:  # every entry: base 100, slope -3
        internal = np.full(512, (0xFFFD << 16) | 100, dtype="<u4").view(np.uint8)

    lut = InterpolatedLut(0, np.dtype(np.int16))
    values = np.array([-32768, -32768 + 64, -32768 + 127, 0, 32767])
    # slope -3: fractions 0, 64 and 127 give 0, (-192 + 64) >> 7 = -1, (-381 + 64) >> 7 = -3
    assert lut.lookup(values, Memory()).tolist() == [100, 99, 97, 100, 97]
