"""Labelled data folders: DIR/x.npy (float32, N samples in the model's input layout, batch
first) and DIR/y.npy (N integer labels: classes, or 0 normal / 1 anomalous).

An anomaly-detection sample is a clip of W windows: x.npy (N, W, *input) (or (N, *input): one
window per clip).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import UserError


@dataclass(frozen=True)
class LabelledData:
    x: np.ndarray = field(repr=False)  # float32, (N, *input) or (N, W, *input)
    y: np.ndarray = field(repr=False)  # int64, (N,)
    source: str
    content_hash: str

    def subset(self, indices: np.ndarray, source: str) -> LabelledData:
        return LabelledData(
            self.x[indices], self.y[indices], source, _hash(self.x[indices], self.y[indices])
        )


def _hash(x: np.ndarray, y: np.ndarray) -> str:
    return hashlib.sha256(x.tobytes() + y.tobytes()).hexdigest()[:16]


def sample_shape(input_shape: tuple[int, ...]) -> tuple[int, ...]:
    """One sample's shape: the input's after a leading batch of 1; the whole input's when it
    has no batch axis (its first dimension is not 1, e.g. (10,) or (49, 10))."""
    shape = tuple(input_shape)
    return shape[1:] if shape[:1] == (1,) else shape


def is_labelled_folder(folder: Path) -> bool:
    return (Path(folder) / "x.npy").is_file()


def _load(path: Path) -> np.ndarray:
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise UserError(f"{path} could not be read: {exc}") from None


def load_labelled(folder: Path, input_shape: tuple[int, ...], labels: bool = True) -> LabelledData:
    """x.npy (and y.npy unless labels=False) checked against the model's input shape (1, ...)."""
    folder = Path(folder)
    if not is_labelled_folder(folder):
        raise UserError(
            f"{folder} holds no x.npy: an evaluation folder holds x.npy (float32, "
            "N inputs in the model's layout) and y.npy (N integer labels)"
        )
    x = _load(folder / "x.npy")
    sample = sample_shape(input_shape)
    if (
        x.ndim < 1 + len(sample)
        or tuple(x.shape[-len(sample) :] if sample else ()) != sample
        or x.ndim > 2 + len(sample)
        or len(x) == 0
    ):
        raise UserError(
            f"{folder / 'x.npy'} has shape {x.shape}: expected (N, {', '.join(map(str, sample))}) "
            f"in the model's input layout (an input is {tuple(input_shape)})"
        )
    if not np.issubdtype(x.dtype, np.floating):
        raise UserError(
            f"{folder / 'x.npy'} is {x.dtype}: expected float32 model inputs "
            "(dequantize int8 data first: real = scale * (q - zero_point))"
        )
    x = np.ascontiguousarray(x, np.float32)
    if not np.all(np.isfinite(x)):
        raise UserError(f"{folder / 'x.npy'} holds NaN or infinite values")
    if not labels:
        y = np.zeros(len(x), np.int64)
    else:
        if not (folder / "y.npy").is_file():
            raise UserError(f"{folder} holds x.npy but no y.npy (N integer labels)")
        y = _load(folder / "y.npy")
        if y.shape != (len(x),) or not np.issubdtype(y.dtype, np.integer):
            raise UserError(
                f"{folder / 'y.npy'} is {y.dtype} {y.shape}: expected {len(x)} "
                "integer labels, one per sample of x.npy"
            )
        y = y.astype(np.int64)
    return LabelledData(x, y, str(folder), _hash(x, y))
