"""From a program's second run on, consecutive native operations whose arguments no longer change
run as one native call (toolkit/sim/native/batch.py). They write the same bytes as the first run,
which runs each planned operation on its own, on programs that batch all of their operations,
some of them, or none (test_bitexact checks both runs against the TOSA reference model)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from toolkit.lower.tflite import compile_tflite
from toolkit.sim import forget_programs, load_payload, simulate, simulator
from toolkit.sim.conv import ConvRun
from toolkit.sim.families import accelerator as configuration
from toolkit.sim.native import batch
from toolkit.sim.native.batch import NativeBatch
from toolkit.sim.plan import plan_for
from toolkit.sim.run_frame import RunFrame
from toolkit.targets import load_target

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

pytestmark = pytest.mark.skipif(batch._RUN is None, reason="the native kernels are not built")


@pytest.mark.parametrize(
    "name, accelerator, batch_sizes, convolutions_alone",
    [
        ("ad01_int8", "ethos-u55-128", [10], 0),  # ten fully connected layers, weights in flash
        # the first ten convolutions' weights and scales are DMA'd into scratch before each:
        # their rows check both streams are still the ones they were made with (20 check rows);
        # the DMAs, the softmax's LUT among them, are copy rows: one batch of 50 operations
        # (Vela 5.2.0's softmax has one ELEMENTWISE more than 5.1.0's: 71 rows, 5.1.0's 70)
        ("kws_ref_model", "ethos-u55-128", [71], 0),
    ],
)
def test_batched_runs_write_what_single_operations_do(
    name, accelerator, batch_sizes, convolutions_alone, tmp_path
):
    npu = load_target("corstone-300").npu(accelerator)
    compiled = compile_tflite(FIXTURES / f"{name}.tflite", npu, tmp_path)
    (delegate,) = compiled.delegates
    rng = np.random.default_rng(7)
    shape = compiled.input_specs[0].shape
    inputs = [rng.integers(-128, 128, shape, dtype=np.int8) for _ in range(3)]
    forget_programs()
    program = load_payload(delegate.vela_npz_path)
    plan = plan_for(program, configuration(accelerator))
    assert plan.batched == []  # made by the first run
    one_by_one = []
    for x in inputs:
        forget_programs()  # each a first run
        one_by_one.append(simulate(load_payload(delegate.vela_npz_path), [x], accelerator))
    program = load_payload(delegate.vela_npz_path)
    batched = [simulate(program, [x], accelerator) for x in inputs]
    runs = plan_for(program, configuration(accelerator)).batched
    assert [len(run.table) for run in runs if isinstance(run, NativeBatch)] == batch_sizes
    assert sum(isinstance(run, ConvRun) for run in runs) == convolutions_alone
    for single, joined in zip(one_by_one, batched):
        for a, b in zip(single.outputs, joined.outputs):
            assert np.array_equal(a, b)
        assert single.npu_cycles == joined.npu_cycles
    assert not all(np.array_equal(a.outputs[0], b.outputs[0]) for a, b in zip(batched, batched[1:]))


def test_a_checked_stream_that_changed_runs_the_rest_as_planned(tmp_path, monkeypatch):
    """A batch checks the streams Vela DMAs in before the rows made with them; where one
    differs (here channel 0's bias in the first convolution's scale stream), the operations
    from there on run as planned steps, which decode what they find: the outputs of a fresh
    plan of the changed program."""
    accelerator = "ethos-u55-128"
    npu = load_target("corstone-300").npu(accelerator)
    compiled = compile_tflite(FIXTURES / "kws_ref_model.tflite", npu, tmp_path)
    (delegate,) = compiled.delegates
    x = np.random.default_rng(3).integers(-128, 128, compiled.input_specs[0].shape, np.int8)
    forget_programs()
    program = load_payload(delegate.vela_npz_path)
    records = simulate(program, [x], accelerator).operations
    kept = simulate(program, [x], accelerator).outputs[0]  # the second run makes the batches
    dma, conv = records[0], records[1]
    assert (dma.kind, conv.kind) == ("dma", "conv")  # Vela DMAs the convolution's streams in
    # where the DMA reads the convolution's scale stream from in the program's weights
    source = dma.register("DMA0_SRC") + conv.register("SCALE_BASE") - dma.register("DMA0_DST")
    batched = plan_for(program, configuration(accelerator))
    assert batched.batched
    weights = bytearray(program.weights)
    weights[source + 2] ^= 0x40  # channel 0's bias, by 2^22
    changed = program._replace(weights=bytes(weights))
    expected = simulate(changed, [x], accelerator).outputs[0]  # planned afresh
    monkeypatch.setattr(simulator, "plan_for", lambda *_: batched)  # run its batches
    batched.__dict__["frame"] = RunFrame(  # with the changed weights in memory
        changed, configuration(accelerator), batched.extent, batched.decoded.constant_regions
    )
    got = simulate(changed, [x], accelerator).outputs[0]
    assert np.array_equal(got, expected) and not np.array_equal(got, kept)
    forget_programs()
