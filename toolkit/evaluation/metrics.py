"""Output metrics: errors in quantization steps, SQNR, cosine similarity, top-1 agreement."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


def max_abs_err_lsb(reference: np.ndarray, test: np.ndarray, scale: float) -> float:
    """Largest |reference - test| in quantization steps of the given scale."""
    diff = np.abs(np.asarray(reference, np.float64) - np.asarray(test, np.float64))
    return float(diff.max() / scale) if diff.size else 0.0


def exact_match_rate(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.asarray(a), np.asarray(b)
    return float(np.mean(a == b)) if a.size else 1.0


def sqnr_db(reference: np.ndarray, test: np.ndarray) -> float:
    """Signal-to-quantization-noise ratio of test against reference, in dB (inf when equal)."""
    reference = np.asarray(reference, np.float64)
    noise = np.sum((reference - np.asarray(test, np.float64)) ** 2)
    signal = np.sum(reference**2)
    if noise == 0:
        return math.inf
    if signal == 0:
        return -math.inf
    return float(10 * np.log10(signal / noise))


def cosine_similarity(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    norms = np.linalg.norm(a) * np.linalg.norm(b)
    if norms == 0:
        return 1.0 if np.array_equal(a, b) else 0.0
    return float(a @ b / norms)


def top1_agreement(reference_logits: np.ndarray, test_logits: np.ndarray) -> float:
    """Fraction of samples (rows of the last axis) whose argmax agrees."""
    ref = np.asarray(reference_logits).reshape(-1, np.shape(reference_logits)[-1])
    test = np.asarray(test_logits).reshape(-1, np.shape(test_logits)[-1])
    return float(np.mean(ref.argmax(axis=1) == test.argmax(axis=1)))


@dataclass(frozen=True)
class Accuracy:
    """A quantized program's outputs against the float model over the evaluation inputs."""

    samples: int
    sqnr_db: float
    cosine: float
    max_abs_err_lsb: float
    top1_agreement: float | None  # classifiers only (2-D outputs with more than one class)


def accuracy(
    float_outputs: list[np.ndarray],
    quant_outputs: list[np.ndarray],
    output_scale: float | None,
    classifier: bool,
) -> Accuracy:
    """Metrics over samples of one model output, stacked."""
    ref = np.stack([np.asarray(o, np.float64) for o in float_outputs])
    test = np.stack([np.asarray(o, np.float64) for o in quant_outputs])
    return Accuracy(
        samples=len(float_outputs),
        sqnr_db=sqnr_db(ref, test),
        cosine=cosine_similarity(ref, test),
        max_abs_err_lsb=max_abs_err_lsb(ref, test, output_scale) if output_scale else float("nan"),
        top1_agreement=top1_agreement(ref, test) if classifier else None,
    )
