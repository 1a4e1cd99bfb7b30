"""quantize/observe.py: weights observed once give the observer states of observing every sample."""

from __future__ import annotations

import torch
from torchao.quantization.pt2e.observer import ObserverBase
from torchao.quantization.pt2e.quantize_pt2e import prepare_pt2e

from toolkit.models.loader import load_model
from toolkit.quantize.calibration import random_calibration
from toolkit.quantize.observe import calibrate, constant_observers
from toolkit.quantize.quantizer import export_module, make_quantizer
from toolkit.targets import load_target


def _observer_states(prepared) -> dict[str, torch.Tensor]:
    return {
        f"{name}.{key}": value
        for name, module in prepared.named_modules()
        if isinstance(module, ObserverBase)
        for key, value in module.state_dict().items()
    }


def test_observing_weights_once_leaves_every_observer_state_the_same():
    model = load_model("zoo:ds_cnn")
    samples = random_calibration(model.example_inputs, 3, 0).samples
    quantizer = make_quantizer(load_target("corstone-300").npu(None, None, None), "fused")
    every = prepare_pt2e(export_module(model), quantizer)
    once = prepare_pt2e(export_module(model), quantizer)
    with torch.no_grad():
        for sample in samples:
            every(*sample)
    constants = constant_observers(once)
    calibrate(once, samples)
    # DS-CNN: a convolution, 4 depthwise-separable blocks (2 weights each), the linear head
    assert [type(m).__name__ for m in constants] == ["PerChannelMinMaxObserver"] * 10
    assert all("forward" not in vars(m) for m in constants)  # upstream's forward is back
    expected, got = _observer_states(every), _observer_states(once)
    assert expected.keys() == got.keys() and len(expected) > 40
    assert all(torch.equal(expected[k], got[k]) for k in expected)
