"""Ethos-U85 command streams executed by the simulator (issue 47): Vela 5.2.0's streams for
ethos-u85-256, bit-exact with the TOSA reference model, and what is refused up front.

The operation cases of conftest.py (convolutions of the shapes the U55 tests cover, depthwise,
fully connected, pools, elementwise with broadcasts) are compiled again for ethos-u85-256 (their
TOSA graphs are the ones the U55 tests lower; Vela puts NCHW<->NHWC transposes on the OFM write
of SUM pools); a conv + residual add runs through U85 chaining; zoo:ds_cnn comes through the
toolkit's own chain for corstone-320, fused and unfused. RESIZE: test_u85_resize.py. The slow
sweep (test_u85_sweep.py) runs the zoo on every U85 configuration.
"""

from __future__ import annotations

import dataclasses
from collections import Counter

import numpy as np
import pytest
import torch
from torch import nn

import toolkit
from toolkit.job import Job
from toolkit.npu import npu_config
from toolkit.pipeline import run_job
from toolkit.runners.sim import SimulatorRunner
from toolkit.runners.tosa_ref import TosaReferenceRunner
from toolkit.sim import load_payload, simulate, simulates
from toolkit.sim.families import accelerator
from toolkit.sim.plan import plan_for

from .conftest import DEFAULT_CASES, lower_to_tosa, tosa_reference

U85 = "ethos-u85-256"


@pytest.mark.parametrize("name", DEFAULT_CASES)
def test_operation_cases_run_bit_exact_on_u85(cases, name):
    case = cases.get(name, U85)
    got = simulate(load_payload(case.npz[U85]), case.inputs, U85).outputs[0]
    assert np.array_equal(got.reshape(-1), np.asarray(case.expected).reshape(-1))


def test_every_u85_configuration_is_simulated():
    names = [f"ethos-u85-{macs}" for macs in (128, 256, 512, 1024, 2048)]
    assert all(simulates(n) for n in names)
    assert [accelerator(n).cores for n in names] == [1, 1, 2, 4, 4]


class ConvResidual(nn.Module):
    """conv -> conv + skip -> relu -> conv: Vela chains the ADD to the second convolution
    (chaining buffer 0), as in zoo:resnet8."""

    def __init__(self):
        super().__init__()
        self.first = nn.Conv2d(8, 8, 3, padding=1)
        self.second = nn.Conv2d(8, 8, 3, padding=1)
        self.third = nn.Conv2d(8, 8, 3, padding=1)

    def forward(self, x):
        y = torch.relu(self.first(x))
        return self.third(torch.relu(self.second(y) + y))


@pytest.fixture(scope="module")
def residual(tmp_path_factory):
    out = tmp_path_factory.mktemp("u85_residual")
    torch.manual_seed(0)
    tosa = lower_to_tosa(ConvResidual(), [(1, 8, 9, 10)], out)
    return tosa, load_payload(_corstone_320(tosa, out / U85))


def _corstone_320(tosa, out):
    """Vela 5.2.0's compile for the corstone-320 target's system config and memory mode."""
    import contextlib
    import io

    from ethosu.vela import vela

    flags = npu_config(U85, "Ethos_U85_SYS_DRAM_Mid", "Dedicated_Sram_384KB").vela_flags
    with contextlib.redirect_stdout(io.StringIO()):
        vela.main([*flags, "--output-format=raw", f"--output-dir={out}", str(tosa)])
    return out / f"{tosa.stem}_vela.npz"


def test_a_chained_elementwise_runs_bit_exact(residual):
    tosa, program = residual
    plan = plan_for(program, accelerator(U85))
    chained = [s.record.kind for s in plan.steps if s.record.register("OFM_PRECISION") >> 14 == 2]
    assert chained == ["conv"]  # the conv writes chaining buffer 0, the ADD reads it
    rng = np.random.default_rng(3)
    for _ in range(3):
        x = rng.integers(-128, 128, size=(1, 8, 9, 10)).astype(np.int8)
        got = simulate(program, [x], U85).outputs[0]
        assert np.array_equal(got.reshape(-1), tosa_reference(tosa, [x])[0].reshape(-1))


@pytest.fixture(scope="module")
def ds_cnn(tmp_path_factory):
    """zoo:ds_cnn for ethos-u85-256, as test_u85_weights.py compiles it (one compile a session)."""
    out = tmp_path_factory.mktemp("ds_cnn-ethos-u85-256")
    job = Job(
        model="zoo:ds_cnn", target="corstone-320", npu="ethos-u85-256", eval_samples=1, out_dir=out
    )
    return run_job(job, runner=SimulatorRunner())


def test_ds_cnn_runs_bit_exact_fused_and_unfused(ds_cnn):
    rng = np.random.default_rng(5)
    for name, variant in ds_cnn.variants.items():
        assert variant.run.evaluation.runs[0].runner == "sim"
        assert variant.run.outputs_match_reference, name
        (delegate,) = variant.program.delegates
        program = load_payload(delegate.payload)
        kinds = Counter(s.record.kind for s in plan_for(program, accelerator(U85)).steps)
        assert kinds == {"conv": 7, "depthwise": 4, "pool.sum": 1, "dma": 11}, name
        for _ in range(2):
            x = rng.integers(-128, 128, size=(1, 1, 49, 10)).astype(np.int8)
            got = simulate(program, [x], U85).outputs[0]
            want = tosa_reference(delegate.tosa_path, [x])[0]
            assert np.array_equal(got.reshape(-1), want.reshape(-1)), name


def test_u85_cycles_are_labelled_and_beside_vela_s_estimate(ds_cnn):
    run = ds_cnn.variants["fused"].run.evaluation.runs[0]
    assert run.cycles.label == "simulated, not checked against an FVP"
    rows = run.details["layers"]
    assert [r["operator"] for r in rows] == ["Conv2D"] + ["DepthwiseConv2D", "Conv2D"] * 4 + [
        "AvgPool",
        "Conv2D",
    ]
    # our compute cycles follow Vela 5.2's U85 model: within 5% of its NPU estimate in sum
    vela_npu = sum(d.estimate.npu_cycles for d in ds_cnn.variants["fused"].program.delegates)
    assert abs(run.cycles.npu_cycles / vela_npu - 1) < 0.05


def _with_pool_mode(payload: bytes, program, offset: int, mode: int) -> bytes:
    """The payload with the NPU_OP_POOL at `offset` of its command stream given `mode`."""
    at = payload.find(program.command_stream) + offset
    return payload[: at + 2] + mode.to_bytes(2, "little") + payload[at + 4 :]


def test_a_refused_program_falls_back_to_the_tosa_reference_and_says_why(ds_cnn):
    variant = ds_cnn.variants["fused"]
    (delegate,) = variant.program.delegates
    program = load_payload(delegate.payload)
    (pool,) = [
        s.record for s in plan_for(program, accelerator(U85)).steps if "pool" in s.record.kind
    ]
    argmax = _with_pool_mode(delegate.payload, program, pool.offset, 6)
    refused = dataclasses.replace(
        variant.program, delegates=(dataclasses.replace(delegate, payload=argmax),)
    )
    runner = SimulatorRunner(fallback=TosaReferenceRunner())
    x = np.zeros((1, 1, 49, 10), np.float32)
    result = runner.run(refused, [x])
    assert result.runner == "tosa-ref"
    assert result.details["fallback"].startswith(
        "the simulator cannot run it (delegate 0: pooling mode ARGMAX_X is not implemented by "
        f"the simulator (in NPU_OP_POOL (value 0x6) at command-stream offset {pool.offset:#x})"
    )
    assert "Vela's AvgPool" in result.details["fallback"]


class TinyGru(nn.Module):
    """Two GRU steps at a16w8: sigmoid and tanh as int16 tables (ACTIVATION LUT_S16_S16) and
    the hidden state's int32 ADD rescaled to int16 by a NONE pool loading the accumulators from
    IFM2 (regor's NullPool), as in the collection's gru_keyword."""

    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(4, 8, batch_first=True)

    def forward(self, x):
        return self.gru(x)[0]


class WideResidual(nn.Module):
    """a16w8, a convolution's output feeding an ADD and the next convolution (the inverted
    residuals of the MobileNets): Vela writes its INT48 output as a 64-bit OFM and rescales it
    per channel by NONE pools reading it from IFM2 into 48-bit accumulators (DOUBLE_SYMMETRIC
    rounding per channel, TOSA's double rounding)."""

    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(3, 8, 3, padding=1)
        self.b = nn.Conv2d(8, 8, 1)

    def forward(self, x):
        y = self.a(x)
        return self.b(y) + y


def _restored(step) -> tuple:
    """(kind, IFM bytes, OFM bytes, per-channel scaled) of a pool that loads its accumulators
    from IFM2."""
    r = step.record
    return r.kind, r.ifm_elem_size, r.ofm_elem_size, not r.register("OFM_PRECISION") >> 8 & 1


@pytest.mark.parametrize(
    "net, shape, luts, restored, wide_convs",
    [
        (TinyGru, (1, 2, 4), 6, [("pool.sum", 4, 2, False)], 0),
        (WideResidual, (1, 3, 8, 8), 0, [("pool.sum", 8, 2, True), ("pool.sum", 8, 4, True)], 1),
    ],
)
def test_a16w8_tables_and_restored_accumulators_run_bit_exact(
    net, shape, luts, restored, wide_convs
):
    torch.manual_seed(0)
    x = torch.randn(shape, generator=torch.Generator().manual_seed(1))
    result = toolkit.deploy(
        net(), example_inputs=(x,), runner="sim", quant="a16w8", npu=U85,
        target="corstone-320", eval_samples=2,
    )  # fmt: skip
    vr = result.variants["fused"]
    assert (vr.run.evaluation.runs[0].runner, vr.run.outputs_match_reference) == ("sim", True)
    (delegate,) = vr.program.delegates
    program = load_payload(delegate.payload)
    steps = plan_for(program, accelerator(U85)).steps
    assert sum(s.record.activation == 8 for s in steps) == luts  # LUT_S16_S16
    pools = [s for s in steps if s.record.kind.startswith("pool")]
    from_ifm2 = [s for s in pools if s.record.register("ACC_FORMAT") >> 4 & 3 == 2]
    assert [_restored(s) for s in from_ifm2] == restored
    assert sum(s.record.kind == "conv" and s.record.ofm_elem_size == 8 for s in steps) == wide_convs
    rng = np.random.default_rng(11)
    for _ in range(2):
        h = rng.integers(-32768, 32768, size=shape).astype(np.int16)
        got = simulate(program, [h], U85).outputs[0]
        want = tosa_reference(delegate.tosa_path, [h])[0]
        assert np.array_equal(got.reshape(-1), want.reshape(-1))


class Attention(nn.Module):
    """Scores Q.K^T then their product with V: two TOSA MATMULs, which Vela 5.2 runs on U85 as
    convolutions taking their weights from IFM2."""

    def __init__(self):
        super().__init__()
        self.q, self.k, self.v = nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 8)

    def forward(self, x):
        scores = torch.matmul(self.q(x), self.k(x).transpose(-1, -2))
        return torch.matmul(scores, self.v(x))


MATMUL_SHAPES = [((1, 6, 8), (1, 6, 6)), ((1, 6, 6), (1, 6, 8))]  # (IFM, OFM): Q.K^T, then .V


def test_matmuls_run_bit_exact(tmp_path):
    tosa = lower_to_tosa(Attention(), [(1, 6, 8)], tmp_path)
    program = load_payload(_corstone_320(tosa, tmp_path / U85))
    steps = plan_for(program, accelerator(U85)).steps
    # a MatMul has a kind of its own and reads two feature maps, no weight or scale stream
    matmuls = [s.record for s in steps if s.record.kind == "matmul"]
    assert [(r.ifm_shape, r.ofm_shape, len(r.bytes_read)) for r in matmuls] == [
        (*shapes, 2) for shapes in MATMUL_SHAPES
    ]
    kinds = Counter(s.record.kind for s in steps)
    assert (kinds["conv"], kinds["matmul"]) == (3, 2)  # the three Linear layers, the products
    rng = np.random.default_rng(13)
    for _ in range(3):
        x = rng.integers(-128, 128, size=(1, 6, 8)).astype(np.int8)
        result = simulate(program, [x], U85)
        assert np.array_equal(
            result.outputs[0].reshape(-1), tosa_reference(tosa, [x])[0].reshape(-1)
        )
    # timed as regor times a MatMul (a depth-first convolution over the IFM depth): the
    # figures these two had as kind "conv"
    timed = [(r.kind, r.compute_cycles) for r in result.operations if r.kind in ("conv", "matmul")]
    assert timed == [("conv", 111)] * 3 + [("matmul", 108), ("matmul", 110)]
    assert (result.npu_cycles, result.total_cycles) == (1024, 1024)
