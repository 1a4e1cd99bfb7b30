"""A program's weight and scale streams, decoded once and kept with its plan (plan.py).

An operation reads its streams from memory as it runs (Vela DMAs them into scratch first, often
into a buffer that the next operation's stream reuses), so they are looked up by content: the
first run of a program decodes each stream, later runs find it here. Each operation keeps the
last stream it read (StreamSlot): a run compares the bytes with it, or in a region that no
operation writes and no input is placed in takes it as it is.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any

import numpy as np

from . import outstage
from .memory import Memory
from .native.batch import memory_slot

if TYPE_CHECKING:
    from .families.family import NpuFamily


class DecodedStreams:
    """The streams of one plan, decoded by its family (NpuFamily.decode_weights and
    decode_scales) the first time an operation reads them."""

    def __init__(self, family: NpuFamily) -> None:
        self.family = family
        self._weights: dict[tuple[bytes, Hashable], np.ndarray] = {}
        self._scales: dict[tuple, tuple] = {}
        self.constant_regions: frozenset[int] = frozenset()  # set by the plan

    def slot(self, region: int, base: int, length: int) -> StreamSlot:
        """Where one operation reads a stream."""
        return StreamSlot(self, region, base, length)

    def weights(self, stream: bytes, fmt: Hashable) -> np.ndarray:
        """The family's decoding of the stream (int16, as the kernels read it)."""
        key = (stream, fmt)
        matrix = self._weights.get(key)
        if matrix is None:
            matrix = self._weights[key] = self.family.decode_weights(stream, fmt)
        return matrix

    def scales(self, raw: bytes, channels: int, rounding: int, where: str, fmt: Hashable = None):
        """(bias, output-stage rescale, max |bias|) from one scale stream."""
        key = (raw, channels, rounding, fmt)
        decoded = self._scales.get(key)
        if decoded is None:
            raw_bytes = np.frombuffer(raw, dtype=np.uint8)
            bias, scale, shift = self.family.decode_scales(raw_bytes, channels, where, fmt)
            rescale = outstage.Rescale(scale, shift, rounding)
            decoded = self._scales[key] = (bias, rescale, int(np.abs(bias).max(initial=0)))
        return decoded


class StreamSlot:
    """Where one operation reads a stream, with the last stream it read there and what that
    decoded to: a run compares the bytes there with it instead of hashing them for a lookup by
    content, and in a region that nothing writes does not even read them."""

    def __init__(self, decoded: DecodedStreams, region: int, base: int, length: int):
        self.decoded, self.region, self.base, self.length = decoded, region, base, length
        self.last: tuple[bytes, Any] | None = None  # (stream, decoded), replaced as one

    @property
    def constant(self) -> bool:
        """Whether the stream is read and can no longer change (it lies where nothing writes)."""
        return self.last is not None and self.region in self.decoded.constant_regions

    def check(self) -> tuple[int, int, np.ndarray] | tuple[()] | None:
        """What a native batch checks before it runs with the last stream (batch.Row.checks):
        nothing where it cannot change, (memory slot, offset, the bytes) where it can, None
        before the slot is read."""
        if self.last is None:
            return None
        if self.constant:
            return ()
        return (memory_slot(self.region), self.base, np.frombuffer(self.last[0], np.uint8))

    def get(self, mem: Memory, decode: Callable[..., Any], *args: Any) -> Any:
        """decode(stream, *args) of the stream there (the same args at every run)."""
        last = self.last
        if last is not None and self.region in self.decoded.constant_regions:
            return last[1]
        stream = mem.regions[self.region][self.base : self.base + self.length].tobytes()
        if last is None or stream != last[0]:
            last = self.last = (stream, decode(stream, *args))
        return last[1]
