"""The four MLPerf Tiny architectures stay whole on the NPU, and their compiled cost is pinned.

Vela's estimates are deterministic for a fixed Vela version, weights and calibration, so a change
that raises them (or adds NPU operations) fails here; update the pins when a change lowers them.
Default options: NCHW interface, default rewrites, ethos-u55-128, Shared_Sram.
"""

from __future__ import annotations

import pytest

# (NPU operations, fused NPU cycles, unfused NPU cycles), Vela 5.2.0 estimate: fused and unfused
# alike. The streams are Vela 5.1.0's byte for byte; 5.1.0 estimated ds_cnn 106,587 / 88,119,
# mobilenet_v1_025 296,882 / 217,730, resnet8 200,050 / 194,217 (fc_autoencoder the same)
PINNED = {
    "zoo:ds_cnn": (12, 88_111, 88_111),
    "zoo:mobilenet_v1_025": (126, 217_714, 217_714),
    "zoo:resnet8": (48, 186_908, 186_908),
    "zoo:fc_autoencoder": (10, 41_404, 41_404),
}


# ds_cnn is compiled for other tests anyway; the other three take ~2 minutes: a CI-only sweep
@pytest.mark.parametrize(
    "model",
    [pytest.param(m, marks=[] if m == "zoo:ds_cnn" else [pytest.mark.slow]) for m in PINNED],
)
def test_whole_model_on_the_npu_with_pinned_cost(compiled, model):
    result = compiled(model, eval_samples=2)
    npu_ops, fused_cycles, unfused_cycles = PINNED[model]
    for variant, cycles in (("fused", fused_cycles), ("unfused", unfused_cycles)):
        program = result.variants[variant].program
        assert len(program.delegates) == 1, program.cpu_ops
        assert program.cpu_ops == ()
        assert program.npu_ops == npu_ops
        assert program.delegates[0].estimate.npu_cycles == cycles
