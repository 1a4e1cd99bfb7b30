"""Ethos-U85 weight streams, decoded: the standard format (SWD) and the fast format (FWD).

Written from the format Vela 5.2.0's encoder writes (regor's mlw codec: mlw_encode.cpp for the
standard format, mlw_encode_fwd.cpp for the fast one); the bit order is the encoder's: fields
are packed least significant bit first into little-endian 32-bit words, so bit k of the stream
is bit k % 8 of byte k // 8.

Standard format: slices of at most 32768 weights, each a header (ZDIV 3 bits, SLICELEN 15, WDIV
3, WTRUNC 1, NEWPAL 1 and, with NEWPAL, DIROFS 5, PALSIZE 5, PALBITS 3 and the palette) and
chunks that interleave Golomb-Rice coded weight indices with, when ZDIV is not 6, the lengths of
the zero runs between weights. ZDIV 7 marks the end of the stream. The same bitstream as
Ethos-U55's (Vela's mlw_codec.decode reads it too).

Fast format: a 256-bit header (bit 0 raw mode, bit 1 two-bit table, bits 104-111 a signed zero
adjustment, bits 112-255 sixteen 9-bit table entries) then one index per weight: 2 bits (a
table of four), 4 bits (a table of sixteen) or 8 bits (raw: the weight plus the adjustment, as
a byte); the body is padded to 256 bits. The stream does not say how many weights it holds: the
operation does.

A stream is untrusted: every read is bounds-checked and every loop ends with the stream, and a
stream that cannot be decoded is a PayloadError naming the stream and the bit where it went
wrong.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..errors import PayloadError

__all__ = ["FAST_HEADER_BYTES", "decode_fast", "decode_standard"]

FAST_HEADER_BYTES = 32
_ZDIV_NO_RUNS = 6
_ZDIV_END = 7
_WDIV_UNCOMPRESSED = 7
_SLICE_BITS = 15
_WEIGHT_INDEX_LIMIT = 512  # the NPU's weights are 9-bit: sign and 8-bit magnitude


class _Bits:
    """A bounds-checked reader of a little-endian bitstream."""

    def __init__(self, data: bytes, name: str):
        self.data, self.name = data, name
        self.pos, self.end = 0, len(data) * 8
        self._bit_array: np.ndarray | None = None

    def get(self, n: int, field: str) -> int:
        if self.pos + n > self.end:
            raise self.error(f"ends inside {field} ({n} bits wanted, {self.end - self.pos} left)")
        first = self.pos >> 3
        last = (self.pos + n + 7) >> 3
        value = int.from_bytes(self.data[first:last], "little") >> (self.pos & 7)
        self.pos += n
        return value & ((1 << n) - 1)

    def skip(self, n: int, field: str) -> int:
        """Step over n bits (read later by gather); where they start."""
        if self.pos + n > self.end:
            raise self.error(f"ends inside {field} ({n} bits wanted, {self.end - self.pos} left)")
        start = self.pos
        self.pos += n
        return start

    def gather(self, starts: np.ndarray, width: int) -> np.ndarray:
        """The `width`-bit values at bit positions `starts` (already bounds-checked)."""
        if self._bit_array is None:
            raw = np.frombuffer(self.data, np.uint8)
            self._bit_array = np.unpackbits(raw, bitorder="little")
        if not width or not len(starts):
            return np.zeros(len(starts), np.int64)
        picked = self._bit_array[starts[:, None] + np.arange(width)].astype(np.int64)
        return picked @ (np.int64(1) << np.arange(width, dtype=np.int64))

    def error(self, what: str, at: int | None = None) -> PayloadError:
        where = self.pos if at is None else at
        return PayloadError(
            f"{self.name}: corrupt weight stream: {what} at bit {where} (byte {where // 8:#x})"
        )


def _unfold(folded: np.ndarray | int) -> np.ndarray:
    """Sign in the least significant bit, magnitude above it -> signed value."""
    folded = np.asarray(folded, dtype=np.int32)
    magnitude = folded >> 1
    return np.where(folded & 1, -magnitude, magnitude).astype(np.int16)


# --- fast format --------------------------------------------------------------------------------


def decode_fast(stream: bytes, name: str, count: int) -> np.ndarray:
    """The first `count` weights of a fast-format stream (int16, zero points already taken
    off, as the encoder stored them)."""
    if len(stream) < FAST_HEADER_BYTES:
        raise PayloadError(
            f"{name}: corrupt weight stream: {len(stream)} bytes, shorter than the "
            f"{FAST_HEADER_BYTES}-byte fast-format header"
        )
    header = np.unpackbits(np.frombuffer(stream[:FAST_HEADER_BYTES], np.uint8), bitorder="little")
    raw, small = bool(header[0]), bool(header[1])
    if raw and small:
        raise PayloadError(
            f"{name}: corrupt weight stream: fast-format header sets both raw mode and the "
            "two-bit table (bits 0 and 1) at bit 0 (byte 0x0)"
        )
    bits = 8 if raw else 2 if small else 4
    body = np.frombuffer(stream, np.uint8, offset=FAST_HEADER_BYTES)
    if count * bits > body.size * 8:
        raise PayloadError(
            f"{name}: corrupt weight stream: the fast-format body ends at bit "
            f"{len(stream) * 8} (byte {len(stream):#x}) after {body.size * 8 // bits} weights, "
            f"the operation needs {count}"
        )
    if raw:
        adjust = int(np.packbits(header[104:112], bitorder="little").view(np.int8)[0])
        return body[:count].view(np.int8).astype(np.int16) - np.int16(adjust)
    weights = 1 << np.arange(9)
    table = _unfold(header[112:256].reshape(16, 9).astype(np.int32) @ weights)
    per_byte = 8 // bits
    fields = body[: -(-count // per_byte), None] >> (np.arange(per_byte) * bits)
    indices = (fields & ((1 << bits) - 1)).reshape(-1)[:count]
    return table[indices]


# --- standard format ----------------------------------------------------------------------------


class _Palette:
    def __init__(self) -> None:
        self.defined = False
        self.direct_offset = 0
        self.size = 0
        self.bits = 2
        self.entries = np.zeros(0, np.int32)

    def read(self, bits: _Bits) -> None:
        self.defined = True
        self.direct_offset = bits.get(5, "DIROFS")
        size = bits.get(5, "PALSIZE")
        self.size = size + 1 if size else 0
        self.bits = bits.get(3, "PALBITS") + 2
        self.entries = np.array(
            [bits.get(self.bits, "PALETTE") for _ in range(self.size)], np.int32
        )

    def uncompressed_bits(self) -> int:
        """Bits per index in an uncompressed slice: enough for the palette, or PALBITS."""
        return max(0, (self.size - 1).bit_length()) if self.size else self.bits

    def weights(self, indices: np.ndarray) -> np.ndarray:
        """Folded weights: an index below the palette size names an entry, the others a
        value directly (offset by DIROFS)."""
        direct = indices - self.size + self.direct_offset
        if not self.size:
            return direct
        entries = self.entries[np.minimum(indices, self.size - 1)]
        return np.where(indices < self.size, entries, direct)


class _Slice:
    """One slice's header fields."""

    def __init__(self, bits: _Bits, zdiv: int, palette: _Palette, runs_before: bool | None):
        start = bits.pos - 3
        if zdiv not in (0, 1, 2, 3, _ZDIV_NO_RUNS):
            raise bits.error(f"ZDIV {zdiv} is no zero-run divisor (0-3, or 6: none)", start)
        self.zero_runs = zdiv != _ZDIV_NO_RUNS
        self.zdiv = zdiv if self.zero_runs else 0
        self.count = bits.get(_SLICE_BITS, "SLICELEN") + 1
        wdiv = bits.get(3, "WDIV")
        self.truncated = bool(bits.get(1, "WTRUNC"))
        self.new_palette = bool(bits.get(1, "NEWPAL"))
        if self.new_palette:
            palette.read(bits)
        elif not palette.defined:
            raise bits.error("a slice reuses a palette before any was defined", start)
        elif runs_before is not None and runs_before != self.zero_runs:
            raise bits.error("a slice switches zero runs on or off without a new palette", start)
        self.uncompressed = wdiv == _WDIV_UNCOMPRESSED
        if not self.uncompressed and wdiv > 5:
            raise bits.error(f"WDIV {wdiv} is no weight divisor (0-5, or 7: uncompressed)", start)
        self.wdiv = palette.uncompressed_bits() if self.uncompressed else wdiv
        # zero runs: one after each weight, and one before the first in a palette's first slice
        self.runs = self.count + self.new_palette if self.zero_runs else 0


@lru_cache(maxsize=1 << 16)
def _weight_chunk(unary0: int, unary1: int, truncated: bool) -> tuple[tuple[int, ...], int]:
    """The weight quotients a chunk's 12 unary positions end (the first one without what an
    earlier chunk carried into it) and the part of the one it ends inside. Each position adds
    0 (WUNARY0 bit clear), 1 or 2 (the next WUNARY1 bit); a symbol ends below 2, or at every
    position when truncated."""
    ended: list[int] = []
    q = 0
    for i in range(12):
        code = 0
        if unary0 >> i & 1:
            code = 1 + (unary1 & 1)
            unary1 >>= 1
        q += code
        if code < 2 or truncated:
            ended.append(q)
            q = 0
    return tuple(ended), q


@lru_cache(maxsize=1 << 12)
def _run_chunk(unary: int, length: int) -> tuple[tuple[int, ...], int]:
    """The zero-run quotients a chunk's unary positions end, and the part of the one it ends
    inside: each set bit adds one, each clear bit ends a symbol."""
    ended: list[int] = []
    q = 0
    for i in range(length):
        if unary >> i & 1:
            q += 1
        else:
            ended.append(q)
            q = 0
    return tuple(ended), q


def _carried(chunk: tuple[tuple[int, ...], int], carry: int, wanted: int) -> tuple[list[int], int]:
    """A chunk's quotients with what the previous chunk carried added to the first (at most
    `wanted`: the positions after a slice's last symbol are padding), and the carry on."""
    ended, tail = chunk
    if not ended:
        return [], carry + tail
    symbols = list(ended[:wanted])
    symbols[0] += carry
    return symbols, 0 if len(ended) >= wanted else tail


class _SliceBody:
    """A slice's chunks: each chunk's unary parts (WUNARY0, ZUNARY, WUNARY1), then the
    remainders of the previous chunk's symbols (WREMAIN, ZREMAIN). The remainders are stepped
    over and read all at once at the end of the slice."""

    def __init__(self, bits: _Bits, s: _Slice):
        self.bits, self.s = bits, s
        self.w_quotients: list[int] = []  # of the weight indices, in order
        self.w_starts: list[int] = []  # bit where each one's remainder starts
        self.z_quotients: list[int] = []  # of the zero-run lengths
        self.z_starts: list[int] = []
        self.w_seen = self.z_seen = 0  # symbols whose quotient is known
        self.w_carry = self.z_carry = 0  # quotients a chunk ended inside
        self.run_bits = 12 if s.zdiv < 3 else 8

    def read(self) -> tuple[np.ndarray, np.ndarray]:
        """(weight indices, zero-run lengths)."""
        w_pending: list[int] = []
        z_pending: list[int] = []
        while True:
            s = self.s
            balance = self.w_seen - self.z_seen if s.zero_runs else 0
            w_on = balance < 8 and self.w_seen < s.count
            z_on = s.zero_runs and balance >= 0 and self.z_seen < s.runs
            w_new, z_new = self._unaries(w_on, z_on)
            self._remainders(w_pending, z_pending)
            if not (w_on or z_on):
                return self._values()
            self.w_seen += len(w_new)
            self.z_seen += len(z_new)
            w_pending, z_pending = w_new, z_new

    def _unaries(self, w_on: bool, z_on: bool) -> tuple[list[int], list[int]]:
        bits, s = self.bits, self.s
        w_new: list[int] = []
        z_new: list[int] = []
        unary0 = bits.get(12, "WUNARY0") if w_on and not s.uncompressed else 0
        if z_on:
            unary = bits.get(self.run_bits, "ZUNARY")
            z_new, self.z_carry = _carried(
                _run_chunk(unary, self.run_bits), self.z_carry, s.runs - self.z_seen
            )
        if w_on and s.uncompressed:
            w_new = [0] * min(s.count - self.w_seen, 8 if s.wdiv > 5 else 12)
        elif w_on:
            unary1 = bits.get(unary0.bit_count(), "WUNARY1") if unary0 else 0
            w_new, self.w_carry = _carried(
                _weight_chunk(unary0, unary1, s.truncated), self.w_carry, s.count - self.w_seen
            )
            if self.w_carry << s.wdiv >= _WEIGHT_INDEX_LIMIT:
                raise bits.error("a weight index runs past 511")
        return w_new, z_new

    def _remainders(self, w_pending: list[int], z_pending: list[int]) -> None:
        bits, s = self.bits, self.s
        if w_pending:
            start = bits.skip(s.wdiv * len(w_pending), "WREMAIN")
            step = s.wdiv or 1  # a divisor of 0: no remainder bits
            self.w_starts.extend(range(start, start + step * len(w_pending), step))
            self.w_quotients.extend(w_pending)
        if z_pending:
            start = bits.skip(s.zdiv * len(z_pending), "ZREMAIN")
            step = s.zdiv or 1
            self.z_starts.extend(range(start, start + step * len(z_pending), step))
            self.z_quotients.extend(z_pending)

    def _values(self) -> tuple[np.ndarray, np.ndarray]:
        s, bits = self.s, self.bits
        w_starts = np.asarray(self.w_starts, np.int64)
        indices = np.asarray(self.w_quotients, np.int64) << s.wdiv
        indices |= bits.gather(w_starts, s.wdiv)
        if indices.size and int(indices.max()) >= _WEIGHT_INDEX_LIMIT:
            first = int(np.argmax(indices >= _WEIGHT_INDEX_LIMIT))
            raise bits.error(f"weight index {indices[first]} is past 511", int(w_starts[first]))
        runs = np.asarray(self.z_quotients, np.int64) << s.zdiv
        runs |= bits.gather(np.asarray(self.z_starts, np.int64), s.zdiv)
        return indices, runs


def _place(weights: np.ndarray, lengths: np.ndarray, leading: bool) -> np.ndarray:
    """A slice's weights with its zero runs between them (before each weight when `leading`:
    the first slice of a palette starts with a run)."""
    if not lengths.size:
        return weights
    before = (
        np.cumsum(lengths[: len(weights)])
        if leading
        else np.concatenate(([0], np.cumsum(lengths[: len(weights) - 1])))
    )
    out = np.zeros(len(weights) + int(lengths.sum()), np.int16)
    out[np.arange(len(weights)) + before] = weights
    return out


def decode_standard(stream: bytes, name: str, limit: int) -> np.ndarray:
    """The weights of a standard-format stream, up to its end-of-stream marker (int16, zero
    points already taken off). More than `limit` weights is a PayloadError: a stream decodes
    to what its operation needs, never to an unbounded amount."""
    bits = _Bits(stream, name)
    palette = _Palette()
    pieces: list[np.ndarray] = []
    total = 0
    runs_before: bool | None = None
    while True:
        if bits.end - bits.pos < 3:
            raise bits.error("the stream ends without an end-of-stream marker (ZDIV 7)")
        zdiv = bits.get(3, "ZDIV")
        if zdiv == _ZDIV_END:
            break
        start = bits.pos - 3
        s = _Slice(bits, zdiv, palette, runs_before)
        runs_before = s.zero_runs
        indices, runs = _SliceBody(bits, s).read()
        folded = palette.weights(indices)
        if folded.size and int(folded.max()) >= _WEIGHT_INDEX_LIMIT:
            raise bits.error("a weight past the 9-bit range", start)
        total += len(indices) + int(runs.sum())
        if total > limit:
            raise bits.error(f"the stream holds more than the {limit} weights its operation needs")
        pieces.append(_place(_unfold(folded), runs, s.new_palette))
    return np.concatenate(pieces) if pieces else np.zeros(0, np.int16)
