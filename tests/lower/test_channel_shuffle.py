"""channel-shuffle-as-conv: ShuffleNet's view -> transpose -> view becomes one 1x1 convolution.

Same values: exactly in float (a permutation weight), and bit for bit in int8 when both graphs get
the same quantization (min/max observers here: a histogram observer weights the shared group's
observations by how many nodes share it, which alone moves the scale by ~0.05%).
"""

from __future__ import annotations

import functools
from dataclasses import fields
from pathlib import Path

import numpy as np
import torch

from toolkit.lower.build_variant import compile_variant
from toolkit.quantize.calibration import random_calibration
from toolkit.rewrites import DEFAULT_REWRITES, apply_rewrites
from toolkit.runners.sim import SimulatorRunner
from toolkit.runners.tosa_ref import TosaReferenceRunner
from toolkit.targets import load_target

FIXTURE = Path(__file__).parents[1] / "fixtures" / "shuffle_models.py"


def _unit():
    from toolkit.models.loader import load_model

    return load_model(f"{FIXTURE}:shuffle_unit", "1,3,16,16")


def test_shuffle_becomes_one_conv_with_the_same_float_values():
    model = _unit()
    x = model.example_inputs[0]
    graph = torch.export.export(model.module, (x,)).module(check_guards=False)
    expected = graph(x)
    (record,) = apply_rewrites(graph, ("channel-shuffle-as-conv",))
    assert record.change.startswith("channel shuffle of 16 channels in 2 groups -> one 1x1")
    targets = [n.target for n in graph.graph.nodes if n.op == "call_function"]
    assert torch.ops.aten.transpose.int not in targets
    assert targets.count(torch.ops.aten.conv2d.default) == 4  # stem, branch, shuffle, head
    assert torch.equal(graph(x), expected)


def _min_max_config():
    from executorch.backends.arm.quantizer import get_symmetric_quantization_config
    from torchao.quantization.pt2e import MinMaxObserver

    from toolkit.quantize.quantizer import EtkQuantizationConfig

    base = get_symmetric_quantization_config(is_per_channel=True)
    act = base.input_activation.__class__(
        **{**base.input_activation.__dict__, "observer_or_fake_quant_ctr": MinMaxObserver}
    )
    values = {f.name: getattr(base, f.name) for f in fields(base)}
    return EtkQuantizationConfig(**{**values, "input_activation": act, "output_activation": act})


def test_shuffle_unit_fewer_npu_operations_same_bits(tmp_path, monkeypatch):
    import toolkit.lower.compiler as compile_module
    from toolkit.quantize.quantizer import quantize

    monkeypatch.setattr(
        compile_module, "quantize", functools.partial(quantize, config=_min_max_config())
    )
    model = _unit()
    npu = load_target("corstone-300").npu(None, None, None)
    calibration = random_calibration(model.example_inputs, 4, 0)
    without = tuple(r for r in DEFAULT_REWRITES if r != "channel-shuffle-as-conv")
    programs = {
        name: compile_variant(model, calibration, "fused", npu, tmp_path / name, (), rw)
        for name, rw in (("with", DEFAULT_REWRITES), ("without", without))
    }
    assert [r.rewrite for r in programs["with"].rewrites].count("channel-shuffle-as-conv") == 1
    assert programs["without"].npu_ops == 301
    assert programs["with"].npu_ops == 46
    rng = np.random.default_rng(3)
    for _ in range(2):
        x = rng.standard_normal((1, 3, 16, 16)).astype(np.float32)
        ref = {k: TosaReferenceRunner().run(p, [x]).outputs for k, p in programs.items()}
        assert np.array_equal(ref["with"][0], ref["without"][0])
        assert np.array_equal(
            SimulatorRunner().run(programs["with"], [x]).outputs[0], ref["with"][0]
        )
