"""Compiled programs are reused from OUT by later processes, and only when nothing changed."""

from __future__ import annotations

import numpy as np

import toolkit.lower.compile as compile_module
from toolkit.lower.compile import compile_variant
from toolkit.models.loader import load_model
from toolkit.quantize.calibration import random_calibration
from toolkit.runners.tosa_ref import TosaReferenceRunner
from toolkit.targets import load_target


def test_program_is_reloaded_from_disk_and_runs_identically(tmp_path, monkeypatch):
    model = load_model("zoo:conv2d_bn_relu")
    calibration = random_calibration(model.example_inputs, 4, 0)
    npu = load_target("corstone-300").npu()
    first = compile_variant(model, calibration, "fused", npu, tmp_path)
    assert set(first.timings) == {"quantize", "lower", "vela"}
    monkeypatch.setattr(compile_module, "_CACHE", {})  # as in a new process
    monkeypatch.setattr(compile_module, "quantize", lambda *a, **k: 1 / 0)  # must not compile
    second = compile_variant(model, calibration, "fused", npu, tmp_path)
    assert second.timings == {}
    assert second.delegates == first.delegates  # payload, ops, estimates, quantization
    assert (second.cpu_ops, second.decisions, second.output_quant) == (
        first.cpu_ops, first.decisions, first.output_quant)
    x = [model.example_inputs[0].numpy()]
    assert np.array_equal(TosaReferenceRunner().run(first, x).outputs[0],
                          TosaReferenceRunner().run(second, x).outputs[0])


def test_changed_calibration_recompiles(tmp_path, monkeypatch):
    model = load_model("zoo:conv2d_relu")
    npu = load_target("corstone-300").npu()
    compile_variant(model, random_calibration(model.example_inputs, 4, 0), "fused", npu, tmp_path)
    monkeypatch.setattr(compile_module, "_CACHE", {})
    again = compile_variant(model, random_calibration(model.example_inputs, 4, 1), "fused", npu,
                            tmp_path)
    assert "lower" in again.timings
