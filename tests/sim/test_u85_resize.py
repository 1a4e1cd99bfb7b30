"""Ethos-U85's NPU_OP_RESIZE executed by the simulator (issue 47): one small net of three
upsamplings, compiled once a module at int8 and a16w8 for corstone-320 (ethos-u85-256), run
bit-exact against the TOSA reference model on full-range random inputs, and timed at the
resize unit's rate as Vela 5.2.0's U85 performance model gives it. What stays refused (RESIZE
REPLICATE) is refused up front naming the command and its offset. The collection's
upsample_net, tiny_unet and tiny_unet_batch2 run in scripts/u85_sweep.py (docs/simulator.md)."""

from __future__ import annotations

from math import ceil

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F

import toolkit
from toolkit.sim import UnsupportedError, load_payload, simulate
from toolkit.sim.families import accelerator, commands
from toolkit.sim.families.ethos_u85.decode_resize import MODES
from toolkit.sim.plan import plan_for

from .conftest import tosa_reference

U85 = "ethos-u85-256"
SHAPE = (1, 8, 5, 6)
QUANTS = {"int8": np.int8, "a16w8": np.int16}


class Upsamplings(nn.Module):
    """Nearest 2x and half-pixel bilinear 2x (TOSA scale 4/2, offset -1; bilinear's 1/16
    RESCALE fused into the OFM shift), added, then an align-corners bilinear to 13x15 (scale
    24/8 and 28/10: no power of two, so its RESCALE stays separate: at a16w8 Vela writes the
    INT48 sums whole and a NONE pool rescales them)."""

    def forward(self, x):
        near = F.interpolate(x, scale_factor=2, mode="nearest")
        smooth = F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)
        return F.interpolate(near + smooth, size=(13, 15), mode="bilinear", align_corners=True)


@pytest.fixture(scope="module", params=sorted(QUANTS))
def compiled(request):
    """(quant, delegate, program, run) of Upsamplings compiled for corstone-320, the run the
    toolkit's own simulator run (checked against its reference)."""
    torch.manual_seed(0)
    x = torch.randn(SHAPE, generator=torch.Generator().manual_seed(1))
    result = toolkit.deploy(
        Upsamplings(), example_inputs=(x,), runner="sim", quant=request.param, npu=U85,
        target="corstone-320", eval_samples=1,
    )  # fmt: skip
    vr = result.variants["fused"]
    assert (vr.run.evaluation.runs[0].runner, vr.run.outputs_match_reference) == ("sim", True)
    (delegate,) = vr.program.delegates
    return request.param, delegate, load_payload(delegate.payload), vr.run.evaluation.runs[0]


def _resizes(program):
    """(mode, record) of each RESIZE the plan runs."""
    modes = {c.offset: MODES.get(c.param) for c in commands(U85).decode(program.command_stream)}
    steps = plan_for(program, accelerator(U85)).steps
    return [(modes[s.record.offset], s.record) for s in steps if s.record.kind == "resize"]


def test_nearest_and_bilinear_resizes_run_bit_exact(compiled):
    quant, delegate, program, _ = compiled
    found = [(mode, r.ofm_elem_size) for mode, r in _resizes(program)]
    # the third's sums leave unscaled: int32 at int8, the INT48 sums as 64 bits at a16w8
    wide = {"int8": 4, "a16w8": 8}[quant]
    narrow = wide // 4
    assert found == [("bilinear", narrow), ("nearest", narrow), ("bilinear", wide)]
    rng = np.random.default_rng(17)
    info = np.iinfo(QUANTS[quant])
    for _ in range(3):
        x = rng.integers(info.min, info.max + 1, size=SHAPE).astype(QUANTS[quant])
        got = simulate(program, [x], U85).outputs[0]
        want = tosa_reference(delegate.tosa_path, [x])[0]
        assert np.array_equal(got.reshape(-1), want.reshape(-1)), quant


def test_resize_cycles_are_the_resize_unit_s_rate_as_vela_estimates_them(compiled):
    """Each RESIZE takes the resize unit's cycles per OFM element (Vela 5.2.0's U85 figures for
    -256: 0.25 at an 8-bit IFM, 0.5 at 16 bits), over the OFM in NHCWB16 bricks (8 channels
    stored as 16): equal to Vela's own estimate of each."""
    quant, _, _, run = compiled
    rows = [r for r in run.details["layers"] if r["operator"] == "Resize"]
    rate = {"int8": 0.25, "a16w8": 0.5}[quant]
    ours = [ceil(rate * h * w * 16) for h, w in ((10, 12), (10, 12), (13, 15))]
    assert [r["sim_cycles"] for r in rows] == ours
    assert [r["vela_estimate_cycles"] for r in rows] == ours


def _with_resize_mode(payload: bytes, program, offset: int, mode: int) -> bytes:
    """The payload with the NPU_OP_RESIZE at `offset` of its command stream given `mode`."""
    at = payload.find(program.command_stream) + offset
    return payload[: at + 2] + mode.to_bytes(2, "little") + payload[at + 4 :]


def test_resize_replicate_is_refused_up_front_naming_command_and_offset(compiled):
    _, delegate, program, _ = compiled
    offset = _resizes(program)[0][1].offset
    replicate = load_payload(_with_resize_mode(delegate.payload, program, offset, 1))
    with pytest.raises(UnsupportedError) as refused:
        plan_for(replicate, accelerator(U85))
    assert str(refused.value) == (
        "RESIZE mode REPLICATE is not implemented by the simulator (in NPU_OP_RESIZE (value "
        f"0x1) at command-stream offset {offset:#x})"
    )
