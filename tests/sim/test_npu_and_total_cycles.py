"""The cycle model's two figures, as Vela's: NPU (compute) cycles and total cycles (the longest of
compute and each memory's access cycles). Weight-bound networks show the gap.

Reuses the session's compiled zoo models (tests/conftest.py, eval_samples=2 as in
tests/sim/test_sim_zoo.py, so a session running both compiles each once).
"""

from __future__ import annotations

import pytest

from toolkit.runners.host_interpreter import execute
from toolkit.runners.sim import SimulatorRunner
from toolkit.sim import load_payload, simulate

# (NPU cycles, total cycles) of our model for the fused variant on corstone-300 (ethos-u55-128,
# Ethos_U55_High_End_Embedded, Shared_Sram). Vela's estimate for comparison: ds_cnn 106,587 /
# 107,389; fc_autoencoder 41,404 / 281,504 (random weights read from flash bound it).
PINNED = {"zoo:ds_cnn": (86_325, 82_251), "zoo:fc_autoencoder": (37_316, 281_504)}


def _run(result, variant: str = "fused"):
    """(per-delegate SimResults, the runner's RunResult) for the first evaluation sample."""
    vr = result.variants[variant]
    program, inputs = vr.program, list(vr.reference.inputs[0])
    sims = []

    def run_delegate(delegate, arrays):
        sims.append(
            simulate(
                load_payload(delegate.payload),
                arrays,
                program.npu.accelerator,
                program.npu.system_config,
                program.npu.memory_mode,
            )
        )
        return list(sims[-1].outputs)

    execute(program, inputs, run_delegate)
    return sims, SimulatorRunner().run(program, inputs)


@pytest.mark.parametrize("model", sorted(PINNED))
def test_compute_within_total_and_pinned(compiled, model):
    sims, run = _run(compiled(model, eval_samples=2))
    ops = [op for sim in sims for op in sim.operations]
    bad = [
        (op.kind, op.compute_cycles, op.cycles)
        for op in ops
        if op.kind != "dma" and not 0 < op.compute_cycles <= op.cycles
    ]
    assert ops and not bad, bad
    assert all(op.compute_cycles == 0 < op.cycles for op in ops if op.kind == "dma")
    assert (sum(s.npu_cycles for s in sims), sum(s.total_cycles for s in sims)) == PINNED[model]
    assert (run.cycles.npu_cycles, run.cycles.total_cycles) == PINNED[model]


def test_weight_bound_total_far_above_npu_cycles(compiled):
    """fc_autoencoder streams its weights from flash: the total is memory-bound, not compute."""
    _, run = _run(compiled("zoo:fc_autoencoder", eval_samples=2))
    npu, total = run.cycles.npu_cycles, run.cycles.total_cycles
    assert total > 5 * npu, (npu, total)
    assert "weight reads from flash" in run.cycles.note
