"""Fusion's effect on a trained network's accuracy, on real labelled data.

For each seed: a seeded split of the data into --calibration samples (calibration) and the rest
(evaluation); the model is quantized fused and unfused on the calibration part, compiled, and run
on the evaluation part by our simulator (Vela's command stream, bit-exact). The reference int8
.tflite file runs on the same evaluation samples (its input quantized with its own parameters),
and the float model too. Prints each figure as mean, std and range over the seeds.

    python scripts/bench_accuracy.py                      # DS-CNN on the KWS data, 200/800, 5 seeds
    python scripts/bench_accuracy.py --model zoo:resnet8@mlperf --data DIR   # DIR/x.npy, y.npy
    python scripts/bench_accuracy.py --quant int8,a16w8   # adds "fused a16w8", "unfused a16w8" rows

Top-1 for classifiers; ROC AUC of the per-clip reconstruction error for the autoencoder
(x.npy (N, windows, 640)). Takes about 15 minutes for DS-CNN on two busy cores.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kws_eval_data import DATA as KWS_DATA  # noqa: E402
from kws_eval_data import float_features  # noqa: E402

from toolkit.console_capture import COMPILER_SIDE, quiet_torch_import  # noqa: E402

quiet_torch_import(
    COMPILER_SIDE
)  # torchao's import-time chatter, as etk does; before the imports below

from toolkit.artifacts import CalibrationSet  # noqa: E402
from toolkit.evaluation.block_errors import block_errors, explain_fused_loss  # noqa: E402
from toolkit.evaluation.eval_data import LabelledData, load_labelled  # noqa: E402
from toolkit.evaluation.task_eval import evaluation_runner, program_outputs, task_metric  # noqa: E402
from toolkit.evaluation.task_metrics import reconstruction_scores, roc_auc, top1  # noqa: E402
from toolkit.job import check_quant  # noqa: E402
from toolkit.lower.build_variant import compile_variant  # noqa: E402
from toolkit.lower.tflite import compile_tflite  # noqa: E402
from toolkit.models.loader import load_model  # noqa: E402
from toolkit.pipeline import _reference_file  # noqa: E402
from toolkit.rewrites import DEFAULT_REWRITES  # noqa: E402
from toolkit.targets import load_target  # noqa: E402
from toolkit.versions import tool_versions  # noqa: E402


def _score(metric: str, windows: np.ndarray, outputs: np.ndarray, labels: np.ndarray) -> float:
    if metric == "top1":
        return top1(outputs[:, 0], labels)
    return roc_auc(reconstruction_scores(windows, outputs.reshape(windows.shape)), labels)


def _windows(data: LabelledData, shape) -> np.ndarray:
    return data.x if data.x.ndim == len(shape) + 1 else data.x[:, None]


def _calibration(windows: np.ndarray, indices: np.ndarray, shape, seed: int) -> CalibrationSet:
    samples = tuple(
        (torch.from_numpy(w.reshape(shape).copy()),) for i in indices for w in windows[i]
    )
    digest = hashlib.sha256(windows[indices].tobytes()).hexdigest()[:16]
    return CalibrationSet(samples, f"{len(indices)} samples, split seed {seed}", seed, digest)


def _samples(windows: np.ndarray, indices: np.ndarray, shape, count: int = 64) -> tuple:
    """The first count held-out windows as model inputs (for the per-block errors)."""
    flat = windows[indices].reshape(-1, *shape[1:])[:count]
    return tuple((torch.from_numpy(w[None].copy()),) for w in flat)


def _float_outputs(module, windows: np.ndarray, shape) -> np.ndarray:
    flat = torch.from_numpy(windows.reshape(-1, *shape[1:]))
    with torch.no_grad():
        out = torch.cat([module(flat[i : i + 256]) for i in range(0, len(flat), 256)]).numpy()
    return out.reshape(len(windows), windows.shape[1], -1)


def _line(name: str, values: list[float]) -> str:
    v = np.asarray(values)
    return (
        f"| {name} | {v.mean():.4f} | {v.std():.4f} | {v.min():.4f}..{v.max():.4f} | "
        + " ".join(f"{x:.4f}" for x in v)
        + " |"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="zoo:ds_cnn@mlperf")
    parser.add_argument(
        "--data",
        type=Path,
        help="DIR with x.npy (float32, model layout) and "
        "y.npy (default: the KWS data in examples/data)",
    )
    parser.add_argument(
        "--reference",
        type=Path,
        help="the int8 .tflite to compare with (default: the trained file of zoo:NAME@mlperf)",
    )
    parser.add_argument("--calibration", type=int, default=200)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument(
        "--first-seed",
        type=int,
        default=0,
        help="seeds FIRST..FIRST+SEEDS-1 (to spread the seeds over processes)",
    )
    parser.add_argument(
        "--quant",
        default="int8",
        help="comma-separated quantizations, e.g. int8,a16w8 (rows 'fused a16w8', ...)",
    )
    parser.add_argument("--target", default="corstone-300")
    parser.add_argument("--npu", default="ethos-u55-128")
    parser.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help="keep the compiled programs here (default: a temporary folder, removed at the end)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-accuracy-") as tmp:
        return measure(args, args.out or Path(tmp))


def _row(variant: str, quant: str) -> str:
    return variant if quant == "int8" else f"{variant} {quant}"


def measure(args: argparse.Namespace, out: Path) -> int:
    quants = tuple(check_quant(q) for q in args.quant.split(","))
    model = load_model(args.model)
    shape = tuple(model.example_inputs[0].shape)
    if args.data:
        data = load_labelled(args.data, shape)
    else:
        x = float_features(np.load(KWS_DATA / "kws_x_int8.npy"), "nchw")
        y = np.load(KWS_DATA / "kws_y.npy").astype(np.int64)
        data = LabelledData(x, y, str(KWS_DATA), "")
    windows = _windows(data, shape)
    with torch.no_grad():
        metric = task_metric(shape, tuple(model.module(*model.example_inputs).shape))
    npu = load_target(args.target).npu(args.npu)
    started = time.time()
    floats = _float_outputs(model.module, windows, shape)
    reference_path = args.reference or _reference_file(args.model)
    reference = None
    if reference_path is not None:
        program = compile_tflite(reference_path, npu, out / "reference")
        reference = program_outputs(
            program, evaluation_runner(program), data, shape, reference_path.name
        )
    figures: dict[str, list[float]] = {_row(v, q): [] for q in quants for v in ("fused", "unfused")}
    figures["float model"] = []
    if reference is not None:
        figures[f"reference {reference_path.name}"] = []
    explanations: list[str] = []
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        order = np.random.default_rng(seed).permutation(len(data.y))
        calibration, held_out = (
            np.sort(order[: args.calibration]),
            np.sort(order[args.calibration :]),
        )
        evaluation = data.subset(held_out, f"split seed {seed}")
        calibration_set = _calibration(windows, calibration, shape, seed)
        for quant in quants:
            for variant in ("fused", "unfused"):
                program = compile_variant(
                    model,
                    calibration_set,
                    variant,
                    npu,
                    out / f"seed_{seed}" / quant,
                    quant=quant,
                )
                label = f"{_row(variant, quant)}, seed {seed}"
                outputs = program_outputs(
                    program, evaluation_runner(program), evaluation, shape, label
                )
                figures[_row(variant, quant)].append(
                    _score(metric, windows[held_out], outputs, evaluation.y)
                )
        figures["float model"].append(
            _score(metric, windows[held_out], floats[held_out], evaluation.y)
        )
        if reference is not None:
            figures[f"reference {reference_path.name}"].append(
                _score(metric, windows[held_out], reference[held_out], evaluation.y)
            )
        print(
            f"seed {seed}: " + ", ".join(f"{k} {v[-1]:.4f}" for k, v in figures.items()), flush=True
        )
        for quant in quants:
            fused, unfused = (figures[_row(v, quant)][-1] for v in ("fused", "unfused"))
            if fused < unfused:
                samples = _samples(windows, held_out, shape)
                errors = block_errors(model, calibration_set, npu, DEFAULT_REWRITES, samples, quant)
                explanations.append(
                    f"seed {seed}, {quant}: fused {fused - unfused:+.4f} below unfused; "
                    f"{explain_fused_loss(errors)}"
                )
                print(f"  {explanations[-1]}", flush=True)
    name = {"top1": "top-1", "auc": "ROC AUC"}[metric]
    print(
        f"\n{args.model}, {npu.accelerator}: {name} on {len(data.y) - args.calibration} held-out "
        f"samples, calibrated on {args.calibration}, {args.seeds} seeded splits "
        f"(simulator: Vela's command stream; {time.time() - started:.0f} s)"
    )
    print(", ".join(f"{k} {v}" for k, v in tool_versions().items()) + "\n")
    print(f"| | {name} mean | std | min..max | per seed |\n|---|---|---|---|---|")
    for key, values in figures.items():
        print(_line(key, values))
    _print_deltas(figures, quants)
    for line in explanations:
        print(line)
    return 0


def _print_deltas(figures: dict[str, list[float]], quants: tuple[str, ...]) -> None:
    for quant in quants:
        fused, unfused = _row("fused", quant), _row("unfused", quant)
        delta = np.asarray(figures[fused]) - np.asarray(figures[unfused])
        print(
            f"\n{fused} - {unfused}: mean {delta.mean():+.4f}, per seed "
            + " ".join(f"{d:+.4f}" for d in delta)
        )


if __name__ == "__main__":
    sys.exit(main())
