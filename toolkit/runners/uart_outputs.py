"""Model outputs from the runner's `Output[i][j]: (type) value` lines, as numpy arrays.

Float outputs are printed with printf's %f (6 decimals). When the output is a dequantized int8/int16
tensor (the program's output_quant), the printed value pins down the integer exactly, and the
float is rebuilt the way the dequantize kernel computes it, (q - zp) * scale in float32: bit-exact.
Without quantization parameters the 6-decimal value is all there is, and the result says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..artifacts import TensorQuant, TensorSpec
from .uart_log import OutputValue

_PRINT_RESOLUTION = 5e-7  # %f rounds to 1e-6


@dataclass(frozen=True)
class DecodedOutputs:
    arrays: tuple[np.ndarray, ...]
    exact: bool  # False: some float output is only known to 6 decimals
    note: str


def missing_values(
    printed: Sequence[Sequence[OutputValue]], specs: Sequence[TensorSpec]
) -> str | None:
    """What is missing from the Output lines, or None when every value of every output is there."""
    if len(printed) != len(specs):
        return f"{len(printed)} of {len(specs)} outputs printed"
    for i, (values, spec) in enumerate(zip(printed, specs)):
        want = int(np.prod(spec.shape, dtype=np.int64))
        if len(values) != want:
            return f"output {i}: {len(values)} of {want} values printed"
    return None


def _dequantized(values: np.ndarray, quant: TensorQuant) -> np.ndarray | None:
    """The exact float32 outputs, or None when the printed values are not on the quant grid."""
    scale = np.float32(quant.scale)
    q = np.clip(np.rint(values / float(scale)) + quant.zero_point, quant.qmin, quant.qmax)
    rebuilt = (q - quant.zero_point).astype(np.float32) * scale
    if np.max(np.abs(rebuilt.astype(np.float64) - values), initial=0.0) > _PRINT_RESOLUTION * 1.01:
        return None
    return rebuilt


def decode_outputs(
    printed: Sequence[Sequence[OutputValue]],
    specs: Sequence[TensorSpec],
    quants: Sequence[TensorQuant | None],
) -> DecodedOutputs:
    """Arrays shaped and typed per the program's output specs (missing_values() must be None)."""
    arrays, approximate = [], []
    for i, (values, spec, quant) in enumerate(zip(printed, specs, quants)):
        dtype = np.dtype(spec.dtype)
        raw = np.asarray(values, dtype=np.float64 if dtype.kind == "f" else dtype)
        if dtype.kind == "f":
            exact = _dequantized(raw, quant) if quant is not None else None
            if exact is None:
                approximate.append(i)
                exact = raw
            raw = exact
        arrays.append(raw.astype(dtype).reshape(spec.shape))
    if approximate:
        note = (
            f"float output(s) {', '.join(map(str, approximate))} as printed with 6 decimals: "
            f"compare with a tolerance, not bit for bit"
        )
    else:
        note = "outputs rebuilt exactly from the printed values"
    return DecodedOutputs(tuple(arrays), not approximate, note)
