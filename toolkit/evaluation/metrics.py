"""Output metrics: errors in quantization steps, SQNR, cosine similarity, top-1 agreement."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..artifacts import TensorQuant


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


SQNR_FLOOR_DB = 20.0  # an output below this gets a warning line


@dataclass(frozen=True)
class OutputAccuracy:
    """One model output of a quantized program against the float model, over the samples."""

    index: int
    shape: tuple[int, ...]  # one sample's
    sqnr_db: float
    cosine: float
    max_abs_err_lsb: float  # nan for an output that is not quantized
    top1_agreement: float | None  # classifier logits only
    clipped: int  # values at qmin/qmax whose float value lies beyond the calibrated range
    clipped_error_share: float  # the clipped values' share of the squared error (0..1)
    nonfinite_float: int = 0  # NaN or infinite values of the float model's output


@dataclass(frozen=True)
class InputClipping:
    """Evaluation input values outside the range the input's quantize represents."""

    clipped: int
    values: int


def input_clipping(samples, input_quant) -> InputClipping:
    """Over every sample (a tuple of arrays, one per input) and quantized input."""
    clipped = values = 0
    for sample in samples:
        for x, quant in zip(sample, input_quant):
            if quant is None:
                continue
            low, high = _representable(quant)
            x = np.asarray(x, np.float64)
            clipped += int(np.sum((x < low) | (x > high)))
            values += x.size
    return InputClipping(clipped, values)


def _representable(quant: TensorQuant) -> tuple[float, float]:
    """Beyond half a step past qmin/qmax a float value is clipped, not rounded."""
    return (
        (quant.qmin - quant.zero_point - 0.5) * quant.scale,
        (quant.qmax - quant.zero_point + 0.5) * quant.scale,
    )


@dataclass(frozen=True)
class Accuracy:
    """Every model output; the headline figures are the worst (lowest SQNR, NaN first) output's."""

    samples: int
    outputs: tuple[OutputAccuracy, ...]
    inputs: InputClipping | None = None  # None: the inputs were not looked at

    @property
    def worst(self) -> OutputAccuracy:
        return min(self.outputs, key=lambda o: (not math.isnan(o.sqnr_db), o.sqnr_db))

    @property
    def sqnr_db(self) -> float:
        return self.worst.sqnr_db

    @property
    def cosine(self) -> float:
        return self.worst.cosine

    @property
    def max_abs_err_lsb(self) -> float:
        return self.worst.max_abs_err_lsb

    @property
    def top1_agreement(self) -> float | None:
        return self.worst.top1_agreement


def output_accuracy(
    index: int,
    float_outputs: list[np.ndarray],
    quant_outputs: list[np.ndarray],
    quant: TensorQuant | None,
    classifier: bool,
) -> OutputAccuracy:
    """Metrics over the samples of one model output, stacked."""
    ref = np.stack([np.asarray(o, np.float64) for o in float_outputs])
    test = np.stack([np.asarray(o, np.float64) for o in quant_outputs])
    clipped = np.zeros(ref.shape, bool)
    if quant is not None:
        codes = np.rint(test / quant.scale) + quant.zero_point
        low, high = _representable(quant)
        clipped = ((codes <= quant.qmin) & (ref < low)) | ((codes >= quant.qmax) & (ref > high))
    error = (ref - test) ** 2
    return OutputAccuracy(
        index=index,
        shape=tuple(np.shape(float_outputs[0])),
        sqnr_db=sqnr_db(ref, test),
        cosine=cosine_similarity(ref, test),
        max_abs_err_lsb=max_abs_err_lsb(ref, test, quant.scale) if quant else float("nan"),
        top1_agreement=top1_agreement(ref, test) if classifier else None,
        clipped=int(clipped.sum()),
        clipped_error_share=float(error[clipped].sum() / error.sum()) if error.any() else 0.0,
        nonfinite_float=int(ref.size - np.isfinite(ref).sum()),
    )


def low_sqnr_warnings(acc: Accuracy, host: Accuracy | None = None) -> list[str]:
    """One line per output below SQNR_FLOOR_DB or NaN, with its likely cause. host: the host
    reference's figures of the same program, when acc is another runner's."""
    lines = []
    for out in acc.outputs:
        if math.isnan(out.sqnr_db):
            lines.append(f"output {out.index} SQNR nan vs float: {_nan_cause(out, acc.samples)}")
        elif out.sqnr_db < SQNR_FLOOR_DB:
            lines.append(
                f"output {out.index} SQNR {out.sqnr_db:.1f} dB vs float (below "
                f"{SQNR_FLOOR_DB:g} dB): {_cause(out, acc, host)}"
            )
    return lines


def _nan_cause(out: OutputAccuracy, samples: int) -> str:
    if out.nonfinite_float:
        return (
            f"the float model gives {out.nonfinite_float:,} of {samples * math.prod(out.shape):,}"
            " values NaN or infinite on the evaluation inputs (inputs outside its domain); "
            "evaluate on data it takes (--calibration-data DIR, or example_inputs() of the "
            "inputs' range)"
        )
    return "the program's outputs hold NaN or infinite values (a float operator on the CPU)"


def _cause(out: OutputAccuracy, acc: Accuracy, host: Accuracy | None) -> str:
    host_db = host.outputs[out.index].sqnr_db if host is not None else None
    if host_db is not None and host_db >= SQNR_FLOOR_DB:
        return f"the host reference has {host_db:.1f} dB: the runner's outputs differ from it"
    values = acc.samples * math.prod(out.shape)
    clipped = (
        f"{out.clipped:,} of {values:,} values clipped at qmin/qmax, "
        f"{out.clipped_error_share:.0%} of the error"
    )
    inputs = acc.inputs.clipped if acc.inputs is not None else 0
    beyond = (
        f"{inputs:,} of {acc.inputs.values:,} input values lie outside the calibrated input "
        "range and were clipped at the input's quantize"
        if acc.inputs is not None and inputs
        else ""
    )
    if out.clipped_error_share >= 0.5:
        return (
            f"{clipped}: the calibrated range is too narrow{f' ({beyond})' if beyond else ''}; "
            "calibrate on more or representative data (--calibration-data, "
            "--calibration-samples)"
        )
    if beyond:  # the error is not rounding: the inputs were clipped before anything ran
        return (
            f"{clipped}; {beyond}: calibrate on data like the evaluation inputs "
            "(--calibration-data DIR, --calibration-samples)"
        )
    return (
        f"rounding, not clipping ({clipped}): a dynamic range wider than int8 holds, in this "
        "output or a tensor before it"
    )
