"""The simulator runs Vela's compiled zoo networks bit-exactly against the host reference.

Every evaluation sample, fused and unfused. Where the two variants' command streams differ only in
values that cannot change an operation's timing, the simulated operation cycles are identical too.
BLOCKDEP may differ as well (Vela chooses it per stream): it sets how far a kernel overlaps the one
before, which moves the PMU total (sim/families/ethos_u55/timeline.py), not any operation's own cycles.
"""

from __future__ import annotations

import numpy as np
import pytest

from toolkit.runners.sim import SimulatorRunner
from toolkit.sim import load_payload
from toolkit.sim.diff import diff_programs

# Register values that change results but not timing.
NON_TIMING = frozenset(
    {
        "IFM_ZERO_POINT",
        "IFM2_ZERO_POINT",
        "OFM_ZERO_POINT",
        "ACTIVATION_MIN",
        "ACTIVATION_MAX",
        "OFM_SCALE",
        "OPA_SCALE",
        "OPB_SCALE",
    }
)
SLOW = [pytest.mark.slow]
# All but resnet8 (residual ADDs) have no elementwise operations. mobilenet's and resnet8's two
# compiles take 20-40 s each, the FC autoencoder's first runs (ten weight streams decoded) ~25 s:
# CI-only cases.
MODELS = [
    "zoo:conv2d_bn_relu6",
    "zoo:depthwise_relu",
    "zoo:conv1d_relu",
    "zoo:linear_bn_relu6",
    "zoo:ds_cnn",
    pytest.param("zoo:fc_autoencoder", marks=SLOW),
    pytest.param("zoo:mobilenet_v1_025", marks=SLOW),
    pytest.param("zoo:resnet8", marks=SLOW),
]
# Which operand an ADD's 32-bit scale applies to (IFM_PRECISION bits 8-9) costs the same.
_OPERAND_SCALE_MODE = 0x300


def _simulate(result, variant: str):
    """(simulator outputs per sample, simulated NPU cycles of the last sample)."""
    vr = result.variants[variant]
    runs = [SimulatorRunner().run(vr.program, list(sample)) for sample in vr.reference.inputs]
    return [run.outputs for run in runs], runs[-1].cycles.npu_cycles


def _changed_registers(result) -> set[str]:
    """Registers whose values differ between the variants' aligned NPU operations."""
    fused, unfused = (result.variants[v].program.delegates for v in ("fused", "unfused"))
    assert len(fused) == len(unfused)
    changed = set()
    for a, b in zip(fused, unfused):
        for row in diff_programs(load_payload(a.payload), load_payload(b.payload)):
            if row.a is None or row.b is None:
                changed.add("an unaligned operation")
            changed |= {
                name.split(".")[0]
                for name, a_value, b_value in row.changed
                if name != "IFM_PRECISION"
                or None in (a_value, b_value)
                or (a_value ^ b_value) & ~_OPERAND_SCALE_MODE
            }
    return changed


@pytest.mark.parametrize("model", MODELS)
def test_zoo_bit_exact_fused_and_unfused(compiled, model):
    result = compiled(model, eval_samples=2)
    cycles = {}
    for variant in ("fused", "unfused"):
        outputs, cycles[variant] = _simulate(result, variant)
        expected = result.variants[variant].reference.outputs
        assert len(outputs) == len(expected) == 2
        for i, (got, want) in enumerate(zip(outputs, expected)):
            assert len(got) == len(want)
            for g, w in zip(got, want):
                assert g.dtype == w.dtype and np.array_equal(g, w), (
                    f"{model} {variant} sample {i}: {np.count_nonzero(g != w)}/{w.size} differ"
                )
    changed = _changed_registers(result) - {"BLOCKDEP"}
    assert changed <= NON_TIMING, f"{model}: the variants differ in {sorted(changed - NON_TIMING)}"
    assert cycles["fused"] == cycles["unfused"] > 0
