"""The simulator runner never disagrees silently: it refuses up front with one line, falls back to
the TOSA reference under --runner auto, and checks its first run against the TOSA reference."""

from __future__ import annotations

import numpy as np
import pytest

from toolkit.runners.select import select_runner
from toolkit.runners.sim import SimulatorRunner
from toolkit.sim import UnsupportedError, engines, load_payload, plan
from toolkit.sim.diff import operations
from toolkit.sim.records import Step

MODEL = ("MeanOnly", "1,3,16,16")


@pytest.fixture
def program(fixture_model):
    plan.forget_programs()  # patched plans stay in this test
    yield fixture_model(*MODEL).variants["fused"]
    plan.forget_programs()


def _corrupt_convs(monkeypatch):
    original = engines.prepare_conv

    def prepare(op, memory, decoded):
        step = original(op, memory, decoded)
        ofm = op.ofm

        def run(mem):
            step.run(mem)
            values = ofm.read(mem).copy()
            values[..., 0] ^= 0x40  # channel 0 everywhere: the mean sees it
            ofm.write(mem, values)

        return Step(step.record, run)

    monkeypatch.setattr(engines, "prepare_conv", prepare)


def _refuse_pools(monkeypatch):
    def prepare(op, memory, decoded=None):
        raise UnsupportedError(f"a test's pool is not implemented by the simulator ({op.label})")

    monkeypatch.setattr(engines, "prepare_pool", prepare)


def test_self_check_on_the_first_run_only(program):
    runner = SimulatorRunner()
    sample = list(program.reference.inputs[0])
    first, second = runner.run(program.program, sample), runner.run(program.program, sample)
    assert first.details["self_check"] == (
        "every delegate equals the TOSA reference model on the first sample"
    )
    assert "self_check" not in second.details


def test_self_check_names_the_first_differing_operation(program, monkeypatch):
    _corrupt_convs(monkeypatch)
    (delegate,) = program.program.delegates
    conv = next(op for op in operations(load_payload(delegate.payload)) if op.name == "NPU_OP_CONV")
    result = SimulatorRunner().run(program.program, list(program.reference.inputs[0]))
    message = result.details["self_check"]
    assert message.startswith(
        "delegate 0 differs from the TOSA reference model on the first "
        f"sample: first differing NPU operation: conv at command-stream "
        f"offset {conv.offset:#x} (Vela's Conv2D for TOSA tensor '"
    )
    assert message.endswith(f"): {16 * 16} of {16 * 16 * 16} values differ")


def test_refusal_is_one_line_before_anything_runs(program, monkeypatch):
    _refuse_pools(monkeypatch)
    (delegate,) = program.program.delegates
    first_pool = next(
        op for op in operations(load_payload(delegate.payload)) if op.name == "NPU_OP_POOL"
    )
    with pytest.raises(UnsupportedError) as info:
        SimulatorRunner().run(program.program, list(program.reference.inputs[0]))
    message = str(info.value)
    assert "\n" not in message
    assert "delegate 0: a test's pool is not implemented by the simulator (NPU_OP_POOL " in message
    assert (
        f"at command-stream offset {first_pool.offset:#x}) (Vela's Transpose for TOSA " in message
    )
    assert message.endswith("; use --runner tosa-ref")


def test_auto_falls_back_to_the_tosa_reference(program, monkeypatch, tmp_path):
    from toolkit.targets import load_target

    target = load_target("corstone-300")
    runner, _ = select_runner("auto", target, program.program.npu)
    if runner.name != "sim":
        pytest.skip(f"auto picked {runner.name} here")
    assert runner.fallback.name == "tosa-ref"
    _refuse_pools(monkeypatch)
    result = runner.run(program.program, list(program.reference.inputs[0]))
    assert result.runner == "tosa-ref"
    assert result.details["fallback"].startswith(
        "the simulator cannot run it (delegate 0: a test's pool is not implemented"
    )
    assert result.details["fallback"].endswith("; ran tosa-ref instead")
    for got, want in zip(result.outputs, program.reference.outputs[0]):
        assert np.array_equal(got, want)


def test_a_delegates_error_keeps_its_one_line(program):
    """torch.fx appends "While executing ...", a stack trace and a tlparse hint to any error
    raised inside a graph; a delegate's UserError reaches the user as it was raised."""
    from toolkit.errors import UserError
    from toolkit.runners.host_interpreter import execute

    def refuse(delegate, inputs):
        raise UserError("the program store is damaged: delegate0.bin is truncated")

    with pytest.raises(UserError) as caught:
        execute(program.program, list(program.reference.inputs[0]), refuse)
    assert str(caught.value) == "the program store is damaged: delegate0.bin is truncated"


def test_first_difference_reads_a_strided_ofm_in_the_tensors_order(fixture_model):
    """Vela's transpose writes its OFM (2, 3, 256) with strides (256, 512, 1): the TOSA tensor
    is that memory in address order, not the OFM's (H, W, C) order (1015 of 1536 values)."""
    from toolkit.runners.sim_check import first_difference

    vr = fixture_model("HeadsPermute", "1,16,96").variants["fused"]
    (delegate,) = vr.program.delegates
    strided = [
        op
        for op in operations(load_payload(delegate.payload))
        if dict(op.registers).get("OFM_STRIDE_X") == 512
    ]
    assert strided, "Vela no longer writes the transpose with strides"
    quant = vr.program.input_quant[0]
    x = np.asarray(vr.reference.inputs[0][0], dtype=np.float64)
    sample = [np.clip(np.round(x / quant.scale) + quant.zero_point, -128, 127).astype(np.int8)]
    message = first_difference(delegate, vr.program.npu, sample)
    assert message.startswith("no NPU operation's output differs among the ")
