"""The collection of real architectures (tests/collection/) on the simulator, bit for bit.

Each net is compiled once per session (fused and unfused, through run_job: the host reference is
the TOSA reference model on each delegate's TOSA graph) and the simulator must reproduce the
reference outputs exactly on every evaluation sample, or refuse the net with a one-line reason
that names what it cannot run. Nets that fail today because of a known bug another change fixes
are xfail(strict=False) naming the bug: the sweep stays green and reports XPASS once it is fixed.
"""

from __future__ import annotations

import functools
import tomllib
from pathlib import Path

import numpy as np
import pytest

from toolkit.errors import UserError
from toolkit.job import Job
from toolkit.pipeline import run_job
from toolkit.runners.sim import SimulatorRunner
from toolkit.sim.errors import SimError

COLLECTION = Path(__file__).parents[1] / "collection"
SAMPLES = 2
# name -> [MODEL spec inside tests/collection, input shape], shared with scripts/bench_sim.py
NETS = tomllib.loads((COLLECTION / "nets.toml").read_text())
U65_NETS = (
    "mobilenet_v2_035",
    "shufflenet_v2_x0_5",
    "leaky_conv_net",
    "mean_head_net",
    "token_mlp_kws",
    "keyword_transformer_block",
    "mha_keyword",
)
# (net, variant or None for both) -> a known bug the net trips, marked xfail(strict=False) until
# fixed (the STRIDE_C mean, ConvTranspose2d quantization and IFM_UPSCALE bugs this listed are;
# so is Vela's batched MATMUL on a slice, the keyword transformer block's: copy-sliced-matmul-input).
KNOWN_BUGS: dict[tuple[str, str | None], str] = {}
# net -> what the one-line refusal must name, for nets the simulator refuses up front
REFUSALS: dict[str, str] = {}

# --quant a16w8 (int16 activations, int8 weights), on ethos-u55-128, fused and unfused: one net
# of each kind and two the compile refuses (all 26 were run once: 19 bit-exact, the 7 in
# A16W8_REFUSALS refused; this subset keeps CI's slow run in its time).
A16W8_NETS = (
    "shufflenet_v2_x0_5",
    "leaky_conv_net",
    "mean_head_net",
    "kws_conv1d",
    "upsample_net",
    "squeeze_excite",
    "tiny_unet",
    "pixel_shuffle_net",
    "keyword_transformer_block",
    "mha_keyword",
    "gru_keyword",
    "two_in_two_out",
    "token_mlp_kws",
    "kws_conv1d_batch2",
    "mobilenet_v2_035",
    "conv_transpose_decoder",
)
# Known a16w8 bugs, as KNOWN_BUGS (none today: at a16w8 the keyword transformer block lowers to
# four delegates and int8's MATMUL bug does not occur).
A16W8_KNOWN_BUGS: dict[tuple[str, str | None], str] = {}
# Vela 5.1 cannot place a 16x8 Conv2D of these nets and has no CPU fallback for it: the compile is
# refused in one line (toolkit/lower/vela_runs.py). All but conv_transpose_decoder have inverted
# residuals (a conv output feeding both an ADD and the next conv).
VELA_16X8_UNPLACED = "--quant a16w8: Vela could not place a 16x8 Conv2D of this model on the NPU"
A16W8_REFUSALS: dict[str, str] = {
    net: VELA_16X8_UNPLACED
    for net in (
        "mobilenet_v2_035",
        "mobilenet_v3_small",
        "mobilenet_v3_small_batch2",
        "mnasnet0_5",
        "efficientnet_b0",
        "tf_mobilenetv3_small_minimal_100",
        "conv_transpose_decoder",
    )
}


def _cases():
    for net in NETS:
        for npu in ("ethos-u55-128", "ethos-u65-256"):
            if npu == "ethos-u65-256" and net not in U65_NETS:
                continue
            for variant in ("fused", "unfused"):
                reason = KNOWN_BUGS.get((net, variant)) or KNOWN_BUGS.get((net, None))
                marks = [pytest.mark.xfail(strict=False, reason=reason)] if reason else []
                yield pytest.param(
                    net, npu, variant, "int8", marks=marks, id=f"{net}-{npu}-{variant}"
                )
    for net in A16W8_NETS:
        for variant in ("fused", "unfused"):
            reason = A16W8_KNOWN_BUGS.get((net, variant)) or A16W8_KNOWN_BUGS.get((net, None))
            marks = [pytest.mark.xfail(strict=False, reason=reason)] if reason else []
            npu = "ethos-u55-128"
            yield pytest.param(
                net, npu, variant, "a16w8", marks=marks, id=f"{net}-{npu}-{variant}-a16w8"
            )


@pytest.fixture(scope="session")
def collection(tmp_path_factory):
    """collection(net, npu, quant) -> JobResult, or the UserError the compile refused the net
    with."""

    @functools.cache
    def build(net: str, npu: str, quant: str = "int8"):
        spec, shape = NETS[net]
        out = tmp_path_factory.mktemp(f"{net}-{npu}-{quant}")
        try:
            return run_job(
                Job(
                    model=f"{COLLECTION / spec}",
                    input_shape=shape,
                    npu=npu,
                    calibration_samples=4,
                    eval_samples=SAMPLES,
                    out_dir=out,
                    parallel_variants=True,
                    quant=quant,
                )
            )
        except UserError as exc:
            return exc

    return build


def _assert_clear_refusal(net: str, exc: Exception, quant: str = "int8") -> None:
    message = str(exc)
    refusals = A16W8_REFUSALS if quant == "a16w8" else REFUSALS
    assert net in refusals, f"{net} {quant} refused: {message}"
    assert "\n" not in message and refusals[net] in message, message


@pytest.mark.slow
@pytest.mark.parametrize("net, npu, variant, quant", _cases())
def test_collection_simulator_matches_tosa_reference(collection, net, npu, variant, quant):
    result = collection(net, npu, quant)
    if isinstance(result, UserError):
        _assert_clear_refusal(net, result, quant)
        return
    assert net not in (A16W8_REFUSALS if quant == "a16w8" else REFUSALS), f"{net} compiled"
    vr = result.variants[variant]
    # a program Vela compiled wrongly is named at compile time (lower/vela_check.py)
    assert vr.vela_problems == (), [p.describe() for p in vr.vela_problems]
    assert len(vr.reference.inputs) == SAMPLES
    for i, (sample, expected) in enumerate(zip(vr.reference.inputs, vr.reference.outputs)):
        try:
            got = SimulatorRunner().run(vr.program, list(sample)).outputs
        except SimError as exc:
            _assert_clear_refusal(net, exc, quant)
            return
        assert len(got) == len(expected)
        for g, w in zip(got, expected):
            assert g.dtype == w.dtype and g.shape == w.shape
            differ = np.count_nonzero(g != w)
            assert differ == 0, (
                f"{net} {npu} {variant} {quant} sample {i}: {differ}/{w.size} outputs differ, up to "
                f"{np.max(np.abs(g.astype(np.int64) - w.astype(np.int64)))} LSB"
            )
