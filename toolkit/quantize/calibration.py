"""Calibration data: seeded random inputs, or a folder of .npy/.npz files."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import torch

from ..artifacts import CalibrationSet
from ..errors import UserError
from ..models.input_draws import describe_draws, draw_samples


def _hash(samples) -> str:
    digest = hashlib.sha256()
    for sample in samples:
        for tensor in sample:
            digest.update(tensor.detach().numpy().tobytes())
    return digest.hexdigest()[:16]


def random_calibration(example_inputs: tuple, samples: int = 8, seed: int = 0) -> CalibrationSet:
    """Inputs shaped and ranged like the example inputs (models/input_draws.py), from a seeded
    generator."""
    if samples < 1:
        raise UserError(f"--calibration-samples must be at least 1, got {samples}")
    data = draw_samples(example_inputs, samples, torch.Generator().manual_seed(seed))
    source = f"random(seed={seed}, samples={samples}): {describe_draws(example_inputs)}"
    return CalibrationSet(data, source, seed, _hash(data))


def _load_file(path: Path, n_inputs: int) -> list[np.ndarray]:
    try:
        if path.suffix == ".npz":
            with np.load(path, allow_pickle=False) as archive:
                return [archive[key] for key in archive.files]
        return [np.load(path, allow_pickle=False)]
    except (OSError, ValueError) as exc:
        raise UserError(f"calibration file {path} could not be read: {exc}") from None


def _check_values(array: np.ndarray, path: Path) -> None:
    if array.dtype.kind not in "fiub":
        raise UserError(
            f"calibration file {path.name} holds {array.dtype} data: give numbers "
            "(float32 inputs as the model takes them)"
        )
    if array.dtype.kind == "f" and not np.isfinite(array).all():
        bad = int(np.size(array) - np.isfinite(array).sum())
        raise UserError(
            f"calibration file {path.name} holds {bad} NaN or infinite values: "
            "calibration needs finite inputs"
        )


def _file_samples(path: Path, shapes: list[tuple]) -> list[tuple]:
    """The samples of one calibration file: each array is one sample or a batch of them."""
    arrays = _load_file(path, len(shapes))
    if len(arrays) != len(shapes):
        raise UserError(
            f"calibration file {path.name} holds {len(arrays)} arrays, "
            f"the model takes {len(shapes)} inputs"
        )
    batches = [_batch(array, shape, path) for array, shape in zip(arrays, shapes)]
    if len({len(b) for b in batches}) != 1:
        raise UserError(
            f"calibration file {path.name}: its arrays hold different numbers of samples"
        )
    return [
        tuple(
            torch.from_numpy(np.ascontiguousarray(b[i].reshape(s), dtype=np.float32))
            for b, s in zip(batches, shapes)
        )
        for i in range(len(batches[0]))
    ]


def _batch(array: np.ndarray, shape: tuple, path: Path) -> np.ndarray:
    """array as a batch of samples of shape (one sample, or N along the first axis)."""
    _check_values(array, path)
    if tuple(array.shape) == shape:
        return array[None]
    if shape[:1] == (1,) and tuple(array.shape[1:]) == shape[1:]:
        return array[:, None]
    raise UserError(
        f"calibration file {path.name} has shape {tuple(array.shape)}, "
        f"expected {shape} (or a batch of them along the first axis)"
    )


def folder_calibration(folder: Path, example_inputs: tuple) -> CalibrationSet:
    """One sample per .npy (single-input models) or .npz (one array per input, in order).

    An array whose shape is the input shape with a leading batch of N is split into N samples.
    A labelled folder (x.npy + y.npy, as for --eval-data) calibrates on x.npy alone.
    """
    from ..evaluation.eval_data import is_labelled_folder

    folder = Path(folder)
    if not folder.is_dir():
        raise UserError(f"calibration folder {folder} not found")
    files = (
        [folder / "x.npy"]
        if is_labelled_folder(folder)
        else sorted(p for p in folder.iterdir() if p.suffix in (".npy", ".npz"))
    )
    if not files:
        raise UserError(f"calibration folder {folder} holds no .npy or .npz files")
    shapes = [tuple(x.shape) for x in example_inputs]
    samples = [sample for path in files for sample in _file_samples(path, shapes)]
    data = tuple(samples)
    return CalibrationSet(data, str(folder), None, _hash(data))


def calibration_subset(calibration: CalibrationSet, size: int, seed: int) -> CalibrationSet:
    """`size` samples drawn without replacement by a seeded generator (repeat calibration over
    several subsets to see how much the result depends on the choice)."""
    if not 1 <= size <= len(calibration.samples):
        raise UserError(
            f"a calibration subset of {size} samples: the set holds "
            f"{len(calibration.samples)} (pass --calibration-samples 1..{len(calibration.samples)})"
        )
    picked = np.sort(
        np.random.default_rng(seed).choice(len(calibration.samples), size, replace=False)
    )
    data = tuple(calibration.samples[i] for i in picked)
    return CalibrationSet(
        data, f"{calibration.source} (subset of {size}, seed {seed})", seed, _hash(data)
    )
