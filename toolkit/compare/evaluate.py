"""Evaluate a compiled variant against the float model on seeded inputs, on the host."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..artifacts import LoadedModel, Program, RunResult
from .metrics import Accuracy, accuracy

EVAL_SEED_OFFSET = 1000  # evaluation inputs never coincide with calibration inputs


@dataclass(frozen=True)
class Evaluation:
    inputs: tuple[tuple[np.ndarray, ...], ...]
    float_outputs: tuple[tuple[np.ndarray, ...], ...]
    outputs: tuple[tuple[np.ndarray, ...], ...]  # the runner's, per sample
    runs: tuple[RunResult, ...]
    accuracy: Accuracy | None  # of the first model output; None without a float model


def evaluation_inputs(model: LoadedModel, samples: int, seed: int) -> tuple[tuple[np.ndarray, ...], ...]:
    generator = torch.Generator().manual_seed(seed + EVAL_SEED_OFFSET)
    return tuple(
        tuple(torch.randn(x.shape, generator=generator, dtype=x.dtype).numpy() for x in model.example_inputs)
        for _ in range(samples))


def float_outputs(model: LoadedModel, inputs) -> tuple[tuple[np.ndarray, ...], ...]:
    results = []
    with torch.no_grad():
        for sample in inputs:
            out = model.module(*(torch.from_numpy(x) for x in sample))
            out = out if isinstance(out, (tuple, list)) else (out,)
            results.append(tuple(o.detach().numpy() for o in out))
    return tuple(results)


def is_classifier(program: Program) -> bool:
    """A (1, C) output with fewer classes than input elements: logits, not a reconstruction."""
    shape = program.output_specs[0].shape
    inputs = int(np.prod(program.input_specs[0].shape))
    return len(shape) == 2 and shape[0] == 1 and 1 < shape[1] < inputs


def evaluate(program: Program, runner, inputs, reference_floats, target=None) -> Evaluation:
    runs = tuple(runner.run(program, list(sample), target) for sample in inputs)
    outputs = tuple(r.outputs for r in runs)
    quant = program.output_quant[0]
    acc = accuracy([f[0] for f in reference_floats], [o[0] for o in outputs],
                   quant.scale if quant else None, is_classifier(program))
    return Evaluation(tuple(inputs), tuple(reference_floats), outputs, runs, acc)


def save_arrays(folder: Path, prefix: str, samples) -> None:
    """sample k, tensor i -> folder/{prefix}_{k}_{i}.npy"""
    folder.mkdir(parents=True, exist_ok=True)
    for k, sample in enumerate(samples):
        for i, array in enumerate(sample):
            np.save(folder / f"{prefix}_{k}_{i}.npy", array)
