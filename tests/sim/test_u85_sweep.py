"""The zoo on every Ethos-U85 configuration (issue 47), slow: each net compiled through the
toolkit's chain for corstone-320 (ethos-u85-256), fused and unfused, its delegates compiled again
by Vela 5.2.0 for ethos-u85-128, -512, -1024 and -2048 (the target's system config and memory
mode); the simulator must equal the TOSA reference model on full-range random int8 inputs."""

from __future__ import annotations

import tomllib
from pathlib import Path

import numpy as np
import pytest
from tosa.DType import DType
from tosa.TosaGraph import TosaGraph

from toolkit.job import Job
from toolkit.npu import npu_config
from toolkit.pipeline import run_job
from toolkit.runners.sim import SimulatorRunner
from toolkit.sim import load_payload, simulate
from toolkit.sim.families import accelerator
from toolkit.sim.plan import plan_for

from .conftest import tosa_reference
from .test_model_bitexact import _tosa_input_shapes

pytestmark = pytest.mark.slow

NETS = ("ds_cnn", "resnet8", "mobilenet_v1_025", "fc_autoencoder")
OTHERS = ("ethos-u85-128", "ethos-u85-512", "ethos-u85-1024", "ethos-u85-2048")
SYSTEM, MODE = "Ethos_U85_SYS_DRAM_Mid", "Dedicated_Sram_384KB"  # targets/corstone-320.toml


@pytest.fixture(scope="module")
def zoo(tmp_path_factory):
    built = {}

    def get(name):
        if name not in built:
            out = tmp_path_factory.mktemp(f"{name}-u85")
            job = Job(model=f"zoo:{name}", target="corstone-320", eval_samples=1, out_dir=out)
            built[name] = run_job(job, runner=SimulatorRunner())
        return built[name]

    return get


def _compile(tosa, accelerator, out):
    import contextlib
    import io

    from ethosu.vela import vela

    flags = npu_config(accelerator, SYSTEM, MODE).vela_flags
    with contextlib.redirect_stdout(io.StringIO()):
        vela.main([*flags, "--output-format=raw", f"--output-dir={out}", str(tosa)])
    return out / f"{tosa.stem}_vela.npz"


def _assert_exact(tosa, payload, accelerator, label):
    rng = np.random.default_rng(7)
    for sample in range(2):
        xs = [rng.integers(-128, 128, size=s).astype(np.int8) for s in _tosa_input_shapes(tosa)]
        got = simulate(payload, xs, accelerator, SYSTEM, MODE).outputs
        for g, w in zip(got, tosa_reference(tosa, xs)):
            assert np.array_equal(np.asarray(g).reshape(-1), np.asarray(w).reshape(-1)), (
                f"{label} on {accelerator}, sample {sample}"
            )


@pytest.mark.parametrize("name", NETS)
def test_zoo_bit_exact_on_every_u85_configuration(zoo, tmp_path, name):
    result = zoo(name)
    for variant, vr in result.variants.items():
        assert vr.run.outputs_match_reference, f"{name} {variant}"
        for d in vr.program.delegates:
            label = f"{name} {variant} delegate {d.index}"
            _assert_exact(d.tosa_path, load_payload(d.payload), "ethos-u85-256", label)
            for npu in OTHERS:
                npz = _compile(d.tosa_path, npu, tmp_path / variant / str(d.index) / npu)
                _assert_exact(d.tosa_path, load_payload(npz), npu, label)


COLLECTION = Path(__file__).parents[1] / "collection"
# a16w8 collection nets the simulator runs on U85 since int16 tables, NONE pools from IFM2 and
# 64-bit convolution outputs (scripts/u85_sweep.py lists the rest)
A16W8_NETS = ("gru_keyword", "mobilenet_v2_035")


def _input_arrays(tosa, rng) -> list[np.ndarray]:
    """Full-range random values of each TOSA graph input's own type (int8 or int16)."""
    block = TosaGraph.GetRootAsTosaGraph(tosa.read_bytes(), 0).Regions(0).Blocks(0)
    types = {}
    for i in range(block.TensorsLength()):
        t = block.Tensors(i)
        types[t.Name().decode()] = np.int16 if t.Type() == DType.INT16 else np.int8
    names = [block.Inputs(i).decode() for i in range(block.InputsLength())]
    return [
        rng.integers(np.iinfo(types[n]).min, np.iinfo(types[n]).max + 1, size=s).astype(types[n])
        for n, s in zip(names, _tosa_input_shapes(tosa))
    ]


def _collection_run(name: str, quant: str, out: Path):
    spec, shape = tomllib.loads((COLLECTION / "nets.toml").read_text())[name]
    job = Job(
        model=str(COLLECTION / spec), input_shape=shape, target="corstone-320", quant=quant,
        calibration_samples=4, eval_samples=1, out_dir=out / "job",
    )  # fmt: skip
    return run_job(job, runner=SimulatorRunner())


def _assert_delegates_exact(result, accelerators, out: Path, name: str) -> None:
    """Every delegate of every variant equal to the TOSA reference on each configuration
    (-256 as the chain compiled it, the others compiled again by Vela), 2 random samples."""
    rng = np.random.default_rng(7)
    for variant, vr in result.variants.items():
        assert vr.run.outputs_match_reference, f"{name} {variant}"
        for d in vr.program.delegates:
            for npu in accelerators:
                at = out / variant / str(d.index) / npu
                payload = d.payload if npu == "ethos-u85-256" else _compile(d.tosa_path, npu, at)
                for _ in range(2):
                    xs = _input_arrays(d.tosa_path, rng)
                    got = simulate(load_payload(payload), xs, npu, SYSTEM, MODE).outputs
                    for g, w in zip(got, tosa_reference(d.tosa_path, xs)):
                        assert np.array_equal(np.asarray(g).reshape(-1), np.asarray(w).reshape(-1))


@pytest.mark.parametrize("name", A16W8_NETS)
def test_a16w8_collection_nets_bit_exact_on_u85(tmp_path, name):
    result = _collection_run(name, "a16w8", tmp_path)
    _assert_delegates_exact(result, ("ethos-u85-256", "ethos-u85-128", "ethos-u85-512"),
                            tmp_path, name)  # fmt: skip


# collection nets with NPU_OP_RESIZE (nearest and bilinear upsampling), on the configurations
# scripts/u85_sweep.py runs them on (tiny_unet is in its SUBSET)
RESIZE_NETS = {
    "upsample_net": ("ethos-u85-256",),
    "tiny_unet": ("ethos-u85-256", "ethos-u85-128", "ethos-u85-512"),
    "tiny_unet_batch2": ("ethos-u85-256",),
}


@pytest.mark.parametrize("quant", ["int8", "a16w8"])
@pytest.mark.parametrize("name", sorted(RESIZE_NETS))
def test_resize_collection_nets_bit_exact_on_u85(tmp_path, name, quant):
    result = _collection_run(name, quant, tmp_path)
    for vr in result.variants.values():
        (delegate,) = vr.program.delegates
        steps = plan_for(load_payload(delegate.payload), accelerator("ethos-u85-256")).steps
        assert any(s.record.kind == "resize" for s in steps), name
    _assert_delegates_exact(result, RESIZE_NETS[name], tmp_path, f"{name} {quant}")
