"""Bit-exact against the TOSA reference model on single-operator graphs, every supported NPU."""

from __future__ import annotations

import numpy as np
import pytest

from toolkit.sim import forget_programs, load_payload, simulate
from toolkit.sim.diff import operations
from toolkit.sim.families import accelerator as configuration
from toolkit.sim.native import conv as native_conv
from toolkit.sim.plan import plan_for

from .conftest import ACCELERATORS, DEFAULT_CASES, FULL_SWEEP


def _check(cases, name: str, accelerator: str):
    """The first run (each operation on its own) and the second (native operations batched,
    native/batch.py) both give the reference model's output."""
    case = cases.get(name, accelerator)
    program = load_payload(case.npz[accelerator])
    for run in ("first run", "second run"):
        result = simulate(program, case.inputs, accelerator)
        expected = case.expected.reshape(result.outputs[0].shape)
        mismatches = int(np.count_nonzero(result.outputs[0] != expected))
        assert result.outputs[0].dtype == expected.dtype
        assert mismatches == 0, f"{name} on {accelerator}, {run}: {mismatches} differ"
    assert result.operations, "no NPU operation ran"
    return result


@pytest.mark.parametrize("accelerator", ACCELERATORS)
@pytest.mark.parametrize("name", DEFAULT_CASES)
def test_single_op_bit_exact(cases, name, accelerator):
    _check(cases, name, accelerator)


@pytest.mark.parametrize("name", DEFAULT_CASES)
def test_single_op_bit_exact_on_the_numpy_path(cases, name, monkeypatch):
    """The numpy convolution (what runs where the native kernels are not built) is bit-exact
    too, not only the native kernel that runs by default."""
    monkeypatch.setattr(native_conv, "_KERNEL", None)
    forget_programs()
    try:
        result = _check(cases, name, "ethos-u55-128")
        program = load_payload(cases.get(name).npz["ethos-u55-128"])
        numpy_convolutions = plan_for(program, configuration("ethos-u55-128")).blas
    finally:
        forget_programs()  # plans made without the kernel are not kept for other tests
    if any(r.kind in ("conv", "depthwise") for r in result.operations):
        assert numpy_convolutions


@pytest.mark.slow
@pytest.mark.parametrize("accelerator", ACCELERATORS)
@pytest.mark.parametrize("name", sorted(FULL_SWEEP))
def test_full_sweep_bit_exact(cases, name, accelerator):
    _check(cases, name, accelerator)


@pytest.mark.parametrize(
    "name, mode",
    [("upsample_nearest2x", 1), ("conv_transpose2x2_s2", 2), ("conv_transpose3x3_s2_p1", 2)],
)
def test_resize_cases_run_ifm_upscale(cases, name, mode):
    """The cases above reach the NPU as IFM_UPSCALE (1: nearest, 2: transpose), which the
    simulator executes bit-exactly."""
    case = cases.get(name, "ethos-u55-128")
    modes = {
        dict(op.registers).get("IFM_UPSCALE", 0)
        for op in operations(load_payload(case.npz["ethos-u55-128"]))
    }
    assert mode in modes
