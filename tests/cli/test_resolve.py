"""The user's strings as typed values (toolkit/resolve.py): one rule each for CLI, bench, plugin."""

from __future__ import annotations

import pytest

from toolkit.errors import UserError
from toolkit.resolve import (
    fusion_variants,
    is_tflite,
    resolve_runner,
    resolve_target,
    runner_for_model,
)


def test_fusion_on_off_and_both():
    assert fusion_variants("on") == ("fused",)
    assert fusion_variants("off") == ("unfused",)
    assert fusion_variants("off", compare=True) == ("fused", "unfused")


def test_tflite_models_run_on_the_simulator_only():
    assert is_tflite("m.tflite") and not is_tflite("m.pt2")
    assert runner_for_model("m.tflite", "auto") == "sim"
    assert runner_for_model("zoo:ds_cnn", "fvp") == "fvp"
    target, npu = resolve_target("corstone-300", "ethos-u55-128")
    with pytest.raises(UserError) as err:
        resolve_runner("m.tflite", "tosa-ref", target, npu)
    assert str(err.value) == (
        "a .tflite model runs on the simulator only (it has no .pte or TOSA graph for the "
        "tosa-ref runner): use the sim runner"
    )


def test_target_and_npu_resolve_with_the_targets_defaults():
    target, npu = resolve_target("corstone-300", "ethos-u65-256")
    assert (target.name, npu.accelerator, npu.family, npu.macs) == (
        "corstone-300",
        "ethos-u65-256",
        "ethos-u65",
        256,
    )
    # the target file's [npu.vela.ethos-u65], not ExecuTorch's U65 default (Dedicated_Sram_384KB)
    assert (npu.system_config, npu.memory_mode) == ("Ethos_U65_High_End", "Sram_Only")
