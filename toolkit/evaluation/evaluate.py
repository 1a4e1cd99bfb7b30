"""Evaluate a compiled variant against the float model on seeded inputs, on the host."""

from __future__ import annotations

import io
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch

from ..artifacts import CalibrationSet, LoadedModel, Program, RunResult
from ..atomic_write import write_atomic
from ..errors import ToolError, UserError
from ..models.input_draws import describe_draws, draw_samples
from ..runners.base import HostRunner, Runner
from ..targets import Target
from .metrics import Accuracy, input_clipping, output_accuracy
from .split_runs import run_samples

EVAL_SEED_OFFSET = 1000  # evaluation inputs never coincide with calibration inputs
# ExecuTorch's Zephyr hello-executorch sample (src/arm_executor_runner.cpp, prepare_input_tensors)
# sets every element of Float inputs to 1.0 and of Int and Char inputs to 1 (the raw integer); it
# leaves inputs of other types unset.
ONES_DTYPES = (torch.float32, torch.int32, torch.int8)


@dataclass(frozen=True)
class Evaluation:
    inputs: tuple[tuple[np.ndarray, ...], ...]
    float_outputs: tuple[tuple[np.ndarray, ...], ...]
    outputs: tuple[tuple[np.ndarray, ...], ...]  # the runner's, per sample
    runs: tuple[RunResult, ...]
    accuracy: Accuracy | None  # of the runner's outputs; None without a float model
    kept: tuple[int, ...] | None = None  # the samples these runs are of; None: every sample

    def __repr__(self) -> str:  # short: the arrays stay out of a notebook's output
        from ..result_views import evaluation_repr

        return evaluation_repr(self)


@dataclass(frozen=True)
class EvaluationInputs:
    samples: tuple[tuple[np.ndarray, ...], ...]
    source: str  # what was fed, for the report: "random(seed=1000, samples=8): ..."


def evaluation_inputs(
    model: LoadedModel, samples: int, seed: int, data: CalibrationSet | None = None
) -> EvaluationInputs:
    """samples inputs: from the user's calibration data when given (a seeded choice, at most
    all of it), else drawn like the example inputs (models/input_draws.py)."""
    if data is not None:
        count = min(samples, len(data.samples))
        picked = np.random.default_rng(seed + EVAL_SEED_OFFSET).permutation(len(data.samples))
        chosen = tuple(
            tuple(x.detach().numpy() for x in data.samples[i]) for i in sorted(picked[:count])
        )
        return EvaluationInputs(
            chosen, f"{count} of the {len(data.samples)} samples of {data.source}"
        )
    generator = torch.Generator().manual_seed(seed + EVAL_SEED_OFFSET)
    drawn = draw_samples(model.example_inputs, samples, generator)
    return EvaluationInputs(
        tuple(tuple(x.numpy() for x in sample) for sample in drawn),
        f"random(seed={seed + EVAL_SEED_OFFSET}, samples={samples}): "
        f"{describe_draws(model.example_inputs)}",
    )


def ones_inputs(model: LoadedModel) -> tuple[tuple[np.ndarray, ...], ...]:
    """One sample of all-ones inputs of the model's shapes and dtypes: what firmware that runs the
    model on fixed inputs (board.inputs = "ones") feeds it."""
    unset = [
        f"input {i} ({x.dtype})"
        for i, x in enumerate(model.example_inputs)
        if x.dtype not in ONES_DTYPES
    ]
    if unset:
        raise UserError(
            f"{model.name}: the firmware fills only float32, int32 and int8 inputs "
            f"with ones and leaves {', '.join(unset)} unset, so its outputs cannot be "
            f"checked: use firmware that takes etk's inputs (--no-build --no-flash)"
        )
    return (tuple(torch.ones(x.shape, dtype=x.dtype).numpy() for x in model.example_inputs),)


def float_outputs(model: LoadedModel, inputs) -> tuple[tuple[np.ndarray, ...], ...]:
    results = []
    with torch.no_grad():
        for sample in inputs:
            out = model.module(*(torch.from_numpy(x) for x in sample))
            out = out if isinstance(out, (tuple, list)) else (out,)
            results.append(tuple(o.detach().numpy() for o in out))
    return tuple(results)


def is_logits(shape: tuple[int, ...], input_shape: tuple[int, ...]) -> bool:
    """A (N, C) output with fewer classes than an input sample has elements: a classifier's
    logits, not a regression or a reconstruction."""
    return len(shape) == 2 and 1 < shape[1] < math.prod(input_shape[1:])


Samples = Sequence[tuple[np.ndarray, ...]]


def evaluate(
    program: Program,
    runner: Runner,
    inputs: Samples,
    reference_floats: Samples,
    target: Target,
    expected: Samples | None = None,
) -> Evaluation:
    """Every input run on runner for target, scored against the float model's outputs.

    A runner that runs several samples per start (run_samples: FVP server mode, a board's
    bundle of test sets) runs them so; its session (starts, samples that failed or hung) is in
    the first run's details, and the evaluation covers the samples that ran (`kept`).
    expected: the host reference's outputs, which a board checks itself against (BundleIO).
    """
    if not hasattr(runner, "run_samples"):
        runs = tuple(runner.run(program, list(sample), target) for sample in inputs)
        return _scored(program, inputs, reference_floats, runs)
    batch = runner.run_samples(program, inputs, target, expected)
    kept = [k for k, run in enumerate(batch.runs) if run is not None]
    if not kept:
        first = batch.failures[0]
        raise ToolError(
            f"no sample ran on {runner.name}: sample {first.index} {first.status}: {first.reason}"
        )
    runs = tuple(batch.runs[k] for k in kept)
    first_run = runs[0]
    runs = (replace(first_run, details={**first_run.details, "session": batch.entry()}), *runs[1:])
    scored = _scored(program, [inputs[k] for k in kept], [reference_floats[k] for k in kept], runs)
    return scored if len(kept) == len(inputs) else replace(scored, kept=tuple(kept))


def evaluate_on_host(
    program: Program, runner: HostRunner, inputs: Samples, reference_floats: Samples
) -> Evaluation:
    """evaluate() on a runner that needs no target (the host reference run); slow runs on two
    CPUs (split_runs.py)."""
    runs = tuple(run_samples(lambda sample: runner.run(program, list(sample)), list(inputs)))
    return _scored(program, inputs, reference_floats, runs)


def _scored(
    program: Program, inputs: Samples, reference_floats: Samples, runs: tuple[RunResult, ...]
) -> Evaluation:
    outputs = tuple(r.outputs for r in runs)
    input_shape = program.input_specs[0].shape
    acc = Accuracy(
        len(outputs),
        tuple(
            output_accuracy(
                i,
                [f[i] for f in reference_floats],
                [o[i] for o in outputs],
                program.output_quant[i],
                is_logits(spec.shape, input_shape),
            )
            for i, spec in enumerate(program.output_specs)
        ),
        input_clipping(inputs, program.input_quant),
    )
    return Evaluation(tuple(inputs), tuple(reference_floats), outputs, runs, acc)


def save_arrays(folder: Path, prefix: str, samples) -> None:
    """sample k, tensor i -> folder/{prefix}_{k}_{i}.npy, each file written atomically.

    The folder then holds exactly these arrays under prefix: files an earlier run with more
    samples or tensors left (a reused program folder) are removed, so no reader takes them for
    this run's.
    """
    folder.mkdir(parents=True, exist_ok=True)
    written = set()
    for k, sample in enumerate(samples):
        for i, array in enumerate(sample):
            name = f"{prefix}_{k}_{i}.npy"
            buffer = io.BytesIO()
            np.save(buffer, array)
            write_atomic(folder / name, buffer.getvalue())
            written.add(name)
    ours = re.compile(rf"{re.escape(prefix)}_\d+_\d+\.npy")
    for path in folder.iterdir():
        if ours.fullmatch(path.name) and path.name not in written:
            path.unlink(missing_ok=True)
