"""Shared single-operator models, lowered once per session through the ExecuTorch Ethos-U chain.

Each case is lowered to TOSA once (the U55 and U65 TOSA profiles are the same), compiled with Vela
for each accelerator on demand, and run once on the TOSA reference model for the expected output.
"""

from __future__ import annotations

import contextlib
import glob
import io
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from toolkit.npu import npu_config
from toolkit.sim import SIMULATED

# every Ethos-U55/U65 configuration (Ethos-U85's are run by test_u85_execution.py and the slow
# test_u85_sweep.py, which say what they refuse)
ACCELERATORS = tuple(n for n in SIMULATED if not n.startswith("ethos-u85"))


class Clamp(nn.Module):
    """clamp(0, 6) is not fused by the annotator: TOSA keeps a CLAMP that Vela folds (unfused)."""

    def forward(self, x):
        return torch.clamp(x, 0.0, 6.0)


class Linear2d(nn.Module):
    def __init__(self, n_in: int, n_out: int):
        super().__init__()
        self.fc = nn.Linear(n_in, n_out)

    def forward(self, x):
        return self.fc(x)


class Add(nn.Module):
    def forward(self, x, y):
        return x + y


class AddScaled(nn.Module):
    """x + 3y: the operands' scales differ more (and a MUL by a scalar comes first)."""

    def forward(self, x, y):
        return x + 3.0 * y


class Sub(nn.Module):
    def forward(self, x, y):
        return x - y


class AddSelf(nn.Module):
    def forward(self, x):
        return x + x


class Mul(nn.Module):
    def forward(self, x, y):
        return x * y


class MeanHW(nn.Module):
    """mean over H and W: Vela's reduce-sum pools and a transpose of their int32 sums."""

    def forward(self, x):
        return x.mean((2, 3))


def _conv(cin, cout, k, stride=1, dilation=1, padding=0, groups=1, act=None):
    layers = [
        nn.Conv2d(cin, cout, k, stride=stride, dilation=dilation, padding=padding, groups=groups)
    ]
    if act == "relu":
        layers.append(nn.ReLU())
    elif act == "clamp":
        layers.append(Clamp())
    return nn.Sequential(*layers)


# name -> (module factory, input shape). Channels, kernels, strides, dilations and padding vary.
CASES = {
    "conv1x1_c3_c8": (lambda: _conv(3, 8, 1), (1, 3, 6, 7)),
    "conv3x3_same_relu": (lambda: _conv(8, 16, 3, padding=1, act="relu"), (1, 8, 10, 12)),
    "conv3x3_same_clamp": (lambda: _conv(8, 16, 3, padding=1, act="clamp"), (1, 8, 10, 12)),
    "conv5x5_s2_valid": (lambda: _conv(16, 24, 5, stride=2), (1, 16, 13, 11)),
    "conv3x3_d2_same": (lambda: _conv(4, 12, 3, dilation=2, padding=2), (1, 4, 12, 9)),
    "conv7x7_s3_c1": (lambda: _conv(1, 5, 7, stride=3, padding=3), (1, 1, 17, 15)),
    "conv2x2_c40_c70": (lambda: _conv(40, 70, 2), (1, 40, 5, 6)),
    "dw3x3_same": (lambda: _conv(24, 24, 3, padding=1, groups=24), (1, 24, 9, 10)),
    "dw3x3_mult2_s2": (lambda: _conv(8, 16, 3, stride=2, padding=1, groups=8), (1, 8, 11, 11)),
    "fc_256_10": (lambda: Linear2d(256, 10), (1, 256)),
    "maxpool2": (lambda: nn.MaxPool2d(2), (1, 8, 10, 12)),
    "maxpool3_s2_pad": (lambda: nn.MaxPool2d(3, stride=2, padding=1), (1, 16, 9, 9)),
    "avgpool2": (lambda: nn.AvgPool2d(2), (1, 8, 10, 12)),
    "avgpool3_s1": (lambda: nn.AvgPool2d(3, stride=1), (1, 12, 7, 8)),
    # TOSA AVG_POOL2D with padding: the NPU divides by the taps inside the IFM (pool.py)
    "avgpool3_s1_pad_exclude": (
        lambda: nn.AvgPool2d(3, stride=1, padding=1, count_include_pad=False),
        (1, 12, 7, 8),
    ),
    "avgpool3_s2_pad_exclude": (
        lambda: nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False),
        (1, 8, 9, 10),
    ),
    "mean_hw": (MeanHW, (1, 12, 9, 10)),
    "upsample_nearest2x": (lambda: nn.Upsample(scale_factor=2, mode="nearest"), (1, 8, 5, 6)),
    "conv_transpose2x2_s2": (lambda: nn.ConvTranspose2d(8, 4, 2, stride=2), (1, 8, 5, 6)),
    "conv_transpose3x3_s2_p1": (
        lambda: nn.ConvTranspose2d(8, 6, 3, stride=2, padding=1, output_padding=1),
        (1, 8, 5, 6),
    ),
}
# Elementwise: several inputs, each case's shapes as a list.
ELEMENTWISE_CASES = {
    "add_scaled": (AddScaled, [(1, 8, 5, 6), (1, 8, 5, 6)]),
    "add_self": (AddSelf, [(1, 8, 5, 6)]),
    "add_broadcast": (Add, [(1, 8, 5, 6), (1, 8, 1, 1)]),
    "add_broadcast_first": (Add, [(1, 1, 5, 6), (1, 8, 5, 6)]),
    "add_same_scale": (Add, [(1, 16, 4, 4), (1, 16, 4, 4)]),
    "sub": (Sub, [(1, 8, 5, 6), (1, 8, 5, 6)]),
    "sub_broadcast_first": (Sub, [(1, 8, 1, 6), (1, 8, 5, 6)]),
    "mul": (Mul, [(1, 8, 5, 6), (1, 8, 5, 6)]),
}
CASES.update(ELEMENTWISE_CASES)
DEFAULT_CASES = tuple(CASES)


def _full_sweep() -> dict:
    sweep = {}
    for k in range(1, 8):
        for stride in (1, 2, 3):
            for dil in (1, 2):
                for pad in ("same", "valid"):
                    if pad == "same" and (stride > 1 or k % 2 == 0):
                        # No "same" with stride > 1 in PyTorch; even kernels pad asymmetrically
                        # and the partitioner leaves them on the CPU.
                        continue
                    padding = "same" if pad == "same" else 0
                    size = (k - 1) * dil + 1 + 2 * stride + 3
                    name = f"conv{k}x{k}_s{stride}_d{dil}_{pad}"
                    sweep[name] = (
                        (
                            lambda k=k, s=stride, d=dil, p=padding: nn.Conv2d(
                                6, 10, k, stride=s, dilation=d, padding=p
                            )
                        ),
                        (1, 6, size, size + 1),
                    )
    for cin, cout in ((1, 1), (1, 256), (256, 1), (33, 65), (128, 256), (256, 256)):
        sweep[f"conv3x3_c{cin}_c{cout}"] = (
            (lambda a=cin, b=cout: nn.Conv2d(a, b, 3, padding=1)),
            (1, cin, 5, 6),
        )
    for mult in (1, 2, 3):
        for k in (3, 5):
            sweep[f"dw{k}x{k}_m{mult}"] = (
                (lambda m=mult, k=k: nn.Conv2d(12, 12 * m, k, padding=k // 2, groups=12)),
                (1, 12, 9, 8),
            )
    for n_in in (1, 16, 300, 1024):
        sweep[f"fc_{n_in}_64"] = ((lambda n=n_in: Linear2d(n, 64)), (1, n_in))
    for k, s in ((2, 2), (3, 1), (3, 2), (5, 3)):
        sweep[f"maxpool{k}_s{s}"] = ((lambda k=k, s=s: nn.MaxPool2d(k, s)), (1, 20, 11, 13))
        sweep[f"avgpool{k}_s{s}"] = ((lambda k=k, s=s: nn.AvgPool2d(k, s)), (1, 20, 11, 13))
    for act in ("relu", "clamp"):
        sweep[f"conv3x3_{act}_u8range"] = (
            (lambda a=act: _conv(16, 32, 3, padding=1, act=a)),
            (1, 16, 8, 8),
        )
    return sweep


FULL_SWEEP = _full_sweep()


@dataclass
class Case:
    name: str
    tosa: Path
    inputs: list[np.ndarray]  # int8, the TOSA graph's inputs
    expected: np.ndarray  # TOSA reference model output
    npz: dict[str, Path] = field(default_factory=dict)

    @property
    def input(self) -> np.ndarray:
        return self.inputs[0]


def lower_to_tosa(module: nn.Module, shapes: list[tuple[int, ...]], out_dir: Path) -> Path:
    from executorch.backends.arm.ethosu import EthosUCompileSpec
    from executorch.backends.arm.quantizer import get_symmetric_quantization_config
    from executorch.backends.arm.util._factory import (
        create_partitioner,
        create_quantizer,
    )
    from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    torch.manual_seed(0)
    module = module.eval()
    example = tuple(torch.randn(*shape) for shape in shapes)
    spec = EthosUCompileSpec("ethos-u55-128")
    spec.dump_intermediate_artifacts_to(str(out_dir))
    graph = torch.export.export(module, example).module(check_guards=False)
    quantizer = create_quantizer(spec)
    quantizer.set_global(get_symmetric_quantization_config(is_per_channel=True))
    prepared = prepare_pt2e(graph, quantizer)
    for _ in range(4):
        prepared(*(torch.randn(*shape) for shape in shapes))
    converted = convert_pt2e(prepared)
    with contextlib.redirect_stdout(io.StringIO()):
        to_edge_transform_and_lower(
            torch.export.export(converted, example),
            partitioner=[create_partitioner(spec)],
            compile_config=EdgeCompileConfig(_check_ir_validity=False),
        )
    found = sorted(glob.glob(str(out_dir / "output_tag0_*.tosa")))
    assert len(found) == 1, f"expected one delegate, got {found}"
    return Path(found[0])


def vela_compile(tosa: Path, accelerator: str, out_dir: Path) -> Path:
    from ethosu.vela import vela

    cfg = npu_config(accelerator)
    with contextlib.redirect_stdout(io.StringIO()):
        vela.main([*cfg.vela_flags, "--output-format=raw", f"--output-dir={out_dir}", str(tosa)])
    return out_dir / f"{tosa.stem}_vela.npz"


def tosa_reference(tosa: Path, inputs: list[np.ndarray]) -> list[np.ndarray]:
    import tosa_reference_model

    outputs, status = tosa_reference_model.run(tosa.read_bytes(), inputs)
    assert str(status).endswith("TOSA_VALID"), status
    return outputs


class CaseStore:
    def __init__(self, root: Path):
        self.root = root
        self.cases: dict[str, Case] = {}

    def get(self, name: str, accelerator: str | None = None) -> Case:
        case = self.cases.get(name)
        if case is None:
            factory, shapes = CASES.get(name) or FULL_SWEEP[name]
            shapes = shapes if isinstance(shapes, list) else [shapes]
            out = self.root / name
            out.mkdir(parents=True, exist_ok=True)
            torch.manual_seed(0)  # the same weights whatever ran before (fused vs unfused pairs)
            tosa = lower_to_tosa(factory(), shapes, out)
            rng = np.random.default_rng(zlib.crc32(name.encode()))
            xs = [rng.integers(-128, 128, size=shape).astype(np.int8) for shape in shapes]
            case = Case(name, tosa, xs, tosa_reference(tosa, xs)[0])
            self.cases[name] = case
        if accelerator and accelerator not in case.npz:
            out = self.root / case.name / accelerator
            case.npz[accelerator] = vela_compile(case.tosa, accelerator, out)
        return case


@pytest.fixture(scope="session")
def cases(tmp_path_factory) -> CaseStore:
    return CaseStore(tmp_path_factory.mktemp("sim_cases"))


FIXTURE_MODELS = Path(__file__).resolve().parents[1] / "fixtures" / "sim_models.py"


@pytest.fixture(scope="session")
def fixture_model(tmp_path_factory):
    """fixture_model(name, input shape) -> JobResult: tests/fixtures/sim_models.py:NAME compiled
    fused and unfused for ethos-u55-128 through the toolkit's own chain, once per session."""
    import functools

    from toolkit.job import Job
    from toolkit.pipeline import run_job

    @functools.cache
    def build(name: str, shape: str):
        return run_job(
            Job(
                model=f"{FIXTURE_MODELS}:{name}",
                input_shape=shape,
                eval_samples=2,
                out_dir=tmp_path_factory.mktemp(name),
            )
        )

    return build
