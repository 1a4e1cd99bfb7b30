"""A program's weight and scale streams, decoded once and kept with its plan (plan.py).

An operation reads its streams from memory as it runs (Vela DMAs them into scratch first, often
into a buffer that the next operation's stream reuses), so they are looked up by content: the
first run of a program decodes each stream, later runs find it here. What a program's store
(derived_store.py) kept from an earlier process is put in first.
"""

from __future__ import annotations

import numpy as np

from . import outstage
from .derived_store import Derived
from .weights import WeightFormat, decode_matrix, decode_scales


class DecodedStreams:
    def __init__(self) -> None:
        self._weights: dict[tuple[bytes, WeightFormat], np.ndarray] = {}
        self._scales: dict[tuple, tuple] = {}

    def add(self, stored: Derived) -> None:
        """Take what a program's store kept (decoded in an earlier process)."""
        for key, matrix in stored.weights.items():
            self._weights.setdefault(key, matrix)
        for raw, channels, rounding in stored.scales:
            self.scales(raw, channels, rounding, "stored scale stream")

    def weights(self, stream: bytes, fmt: WeightFormat) -> np.ndarray:
        """weights.decode_matrix of the stream."""
        key = (stream, fmt)
        matrix = self._weights.get(key)
        if matrix is None:
            matrix = self._weights[key] = decode_matrix(stream, fmt)
        return matrix

    def scales(self, raw: bytes, channels: int, rounding: int, where: str):
        """(bias, output-stage rescale, max |bias|) from one scale stream."""
        key = (raw, channels, rounding)
        decoded = self._scales.get(key)
        if decoded is None:
            bias, scale, shift = decode_scales(np.frombuffer(raw, dtype=np.uint8), channels, where)
            decoded = self._scales[key] = (
                bias,
                outstage.Rescale(scale, shift, rounding),
                int(np.abs(bias).max(initial=0)),
            )
        return decoded

    @property
    def size(self) -> int:
        """How many streams are decoded (grows as operations first run)."""
        return len(self._weights) + len(self._scales)

    def export(self, into: Derived) -> None:
        into.weights = dict(self._weights)
        into.scales = list(self._scales)
