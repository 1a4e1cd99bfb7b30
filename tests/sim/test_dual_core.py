"""Ethos-U65-512: two 256-MAC cores, core c computing OFM channels c, c + 2, ... from a weight and
scale stream of its own (the second core's in WEIGHT1_*, SCALE1_*).

Nets compiled fused and unfused for ethos-u65-512 through the toolkit's chain run bit-exactly
against the TOSA reference model, on the evaluation samples and on full-range random int8
delegate inputs; every one's command stream is checked to be dual-core (PARALLEL_MODE = 1 and a
second weight stream), so a Vela that fell back to one core would fail here. 13 and 21 channels
split unevenly between the cores (7 + 6, 11 + 10).
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from toolkit.job import Job
from toolkit.npu import npu_config
from toolkit.pipeline import run_job
from toolkit.sim import forget_programs, load_payload, simulate
from toolkit.sim.errors import UnsupportedError
from toolkit.sim.families import accelerator as configuration
from toolkit.sim.families.ethos_u55.registers import COMMANDS
from toolkit.sim.native import conv as native_conv
from toolkit.sim.plan import plan_for
from toolkit.sim.vela_estimate import vela_estimates

from .conftest import FIXTURE_MODELS
from .test_model_bitexact import _assert_delegate_exact, _assert_reference_samples_exact

U65_512 = "ethos-u65-512"
NETS = [
    (f"{FIXTURE_MODELS}:OddConvRelu", "1,8,10,12"),
    (f"{FIXTURE_MODELS}:DepthwiseRelu", "1,21,9,10"),
    (f"{FIXTURE_MODELS}:LinearRelu", "1,96"),
    pytest.param("zoo:ds_cnn", None, marks=pytest.mark.slow),  # ~30 s, the small nets cover it
]
CONVOLUTIONS = ("NPU_OP_CONV", "NPU_OP_DEPTHWISE")


@pytest.fixture(scope="module")
def dual_core_job(tmp_path_factory):
    @functools.cache
    def build(model: str, shape: str | None):
        return run_job(
            Job(
                model=model,
                input_shape=shape,
                npu=U65_512,
                eval_samples=2,
                out_dir=tmp_path_factory.mktemp("u65_512"),
            )
        )

    return build


def _second_core_streams(command_stream: bytes) -> list[tuple[int, int]]:
    """(PARALLEL_MODE, WEIGHT1_LENGTH) of each convolution of the stream."""
    return [
        (values.get("PARALLEL_MODE", 0), values.get("WEIGHT1_LENGTH", 0))
        for cmd, values in COMMANDS.operation_registers(command_stream)
        if cmd.name in CONVOLUTIONS and values is not None
    ]


@pytest.mark.parametrize(
    "model, shape", NETS, ids=["OddConvRelu", "DepthwiseRelu", "LinearRelu", "ds_cnn"]
)
def test_dual_core_nets_run_bit_exact(dual_core_job, model, shape):
    result = dual_core_job(model, shape)
    assert set(result.variants) == {"fused", "unfused"}
    for variant, vr in result.variants.items():
        assert vr.program.npu.accelerator == U65_512
        _assert_reference_samples_exact(vr, f"{model} {variant}")
        for d in vr.program.delegates:
            payload = load_payload(d.payload)
            streams = _second_core_streams(payload.command_stream)
            assert streams and all(mode == 1 for mode, _ in streams), streams
            assert any(length > 0 for _, length in streams), streams
            _assert_delegate_exact(d, U65_512, payload, f"{model} {variant} delegate {d.index}")


# Both cores' MAC arrays and output stages work at once, so a MAC-bound convolution takes a bit
# over half the cycles; what does not divide (the first IFM block's fetch, the last OFM block's
# write, the weight decoder's feed on a narrow OFM) keeps the ratio above 0.5. Measured, ours
# (Vela 5.1's own estimate in brackets): conv3x3_same_relu 0.58 (0.54), conv2x2_c40_c70 0.56
# (0.52), conv5x5_s2_valid 0.81 (0.60), dw3x3_same 0.63 (0.74).
RATIO_BAND = (0.5, 0.9)


@pytest.mark.parametrize(
    "name", ("conv3x3_same_relu", "conv2x2_c40_c70", "conv5x5_s2_valid", "dw3x3_same")
)
def test_two_cores_take_fewer_cycles_than_one(cases, name):
    def convolution_cycles(accelerator: str) -> tuple[int, int]:
        case = cases.get(name, accelerator)
        result = simulate(load_payload(case.npz[accelerator]), case.inputs, accelerator)
        ours = sum(r.compute_cycles for r in result.operations if r.kind in ("conv", "depthwise"))
        vela = sum(
            e.npu_cycles
            for e in vela_estimates(case.tosa, accelerator)
            if e.operator in ("Conv2D", "DepthwiseConv2D")
        )
        return ours, vela

    (ours_1, vela_1), (ours_2, vela_2) = map(convolution_cycles, ("ethos-u65-256", U65_512))
    low, high = RATIO_BAND
    assert low <= ours_2 / ours_1 <= high, (ours_2, ours_1)
    assert low <= vela_2 / vela_1 <= high, (vela_2, vela_1)  # the band is Vela's too


@pytest.mark.parametrize("name", ("conv2x2_c40_c70", "dw3x3_mult2_s2", "fc_256_10"))
def test_dual_core_bit_exact_on_the_numpy_path(cases, name, monkeypatch):
    """The cores' streams interleave the same for the numpy convolution as for the native one."""
    monkeypatch.setattr(native_conv, "_KERNEL", None)
    forget_programs()
    try:
        case = cases.get(name, U65_512)
        program = load_payload(case.npz[U65_512])
        for _ in range(2):  # the second run reuses the interleaved streams
            result = simulate(program, case.inputs, U65_512)
            assert np.array_equal(result.outputs[0], case.expected.reshape(result.outputs[0].shape))
        assert plan_for(program, configuration(U65_512)).blas
    finally:
        forget_programs()  # plans made without the kernel are not kept for other tests


def test_a_dual_core_program_on_one_core_is_refused(cases):
    """A U65-512 program's PARALLEL_MODE = 1 has no meaning on a single-core configuration."""
    program = load_payload(cases.get("conv3x3_same_relu", U65_512).npz[U65_512])
    assert npu_config(U65_512).macs == 512
    with pytest.raises(
        UnsupportedError, match=r"^PARALLEL_MODE = 1 is not implemented on ethos-u65-256, which "
    ):
        plan_for(program, configuration("ethos-u65-256"))
