"""Ethos-U85 weight and scale streams as the shared convolution engine reads them: the streams
of one operation (one per core, or one fast-format stream) come as one span of memory and are
cut apart here, decoded (u85_weights.py, u85_codec.py) and laid out as sim/conv.py multiplies
by them."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..u85_weights import WeightLayout, decode_scales, decode_weights


class U85WeightFormat(NamedTuple):
    layout: WeightLayout
    streams: tuple[tuple[str, int, int], ...]  # (name, offset in the span, length)
    depthwise: bool


def decode_matrix(span: bytes, fmt: U85WeightFormat) -> np.ndarray:
    """(O, KH * KW * I) int16, or (KH, KW, O) for depthwise."""
    streams = [(name, span[at : at + length]) for name, at, length in fmt.streams]
    weights = decode_weights(streams, fmt.layout)  # (O, KH, KW, I)
    if fmt.depthwise:
        return np.ascontiguousarray(weights[..., 0].transpose(1, 2, 0))
    return np.ascontiguousarray(weights.reshape(weights.shape[0], -1))


def decode_scale_stream(
    raw: np.ndarray, channels: int, where: str, acc48: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    records = decode_scales(raw.tobytes(), channels, acc48, where)
    return records.bias, records.scale, records.shift
