"""Checking tensors handed to a runner against the program's input/output specs."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..artifacts import TensorSpec
from ..errors import UserError


def check_tensors(arrays: Sequence[np.ndarray], specs: Sequence[TensorSpec], what: str) -> None:
    """One clear UserError when the count, a shape or a dtype differs from the program's."""
    if len(arrays) != len(specs):
        raise UserError(f"the program takes {len(specs)} {what}s, got {len(arrays)}")
    for n, (array, spec) in enumerate(zip(arrays, specs)):
        array = np.asarray(array)
        if tuple(array.shape) != tuple(spec.shape) or array.dtype != np.dtype(spec.dtype):
            raise UserError(
                f"{what} {n} is {array.dtype}{list(array.shape)}, the program "
                f"takes {spec.dtype}{list(spec.shape)}"
            )
