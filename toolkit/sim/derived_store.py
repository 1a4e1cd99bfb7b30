"""What the simulator derives from a compiled program, kept on disk next to it.

The first run of a program decodes its weight and scale streams and computes its cycle figures;
a deploy in a new process would pay that again on its first inference. One file per program
(sim_<key>.bin in the program's folder) keeps the decoded weights (int16, as the kernels read
them; as int8 when all of a program's fit), the scale streams, and the per-operation cycle
figures of each memory system. The streams, which lookups go by, are kept as where they lie in
the program's weights. A JSON header names the arrays.

The key hashes the command stream, the weight region, the accelerator and the simulator's own
source files and built kernels, so an edited simulator never reads what an older one derived. The file starts
with the SHA-256 of the rest (the program store's rule, program_store.py): a file that is
unreadable, truncated or changed is ignored and derived again. The digest is a checksum, not a
signature (anyone who can write the folder can recompute it), so what the file holds is checked
as data: every decoded matrix must have the shape its weight format gives (the kernels index it
by that shape), every figure must be an int; anything else and the file is ignored. Only a
regular file is read (a FIFO or a device there is ignored, never opened for blocking reads).
Written atomically (temporary file, then rename).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import tempfile
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import get_type_hints

import numpy as np

from .payload import NpuProgram
from .weights import WeightFormat, matrix_shape

_VERSION = b"etk-sim-derived 8"
_ALIGN = 16  # each array's bytes start at a multiple of this in a file of streams
_DIGEST = 32  # bytes of SHA-256 at the head of the file
_FORMAT_FIELDS = WeightFormat._fields
_FORMAT_TYPES = tuple(get_type_hints(WeightFormat)[name] for name in _FORMAT_FIELDS)  # int, bool


@lru_cache(maxsize=1)
def _code_digest() -> bytes:
    """SHA-256 over the simulator's source files and its built native kernels (what the derived
    state depends on)."""
    digest = hashlib.sha256(_VERSION)
    here = Path(__file__).parent
    for path in sorted(
        [*here.glob("*.py"), *here.glob("native/*.[ch]"), *here.glob("native/*.py")]
    ):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    for path in sorted(here.glob("native/_kernels*")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.digest()


@lru_cache(maxsize=8)
def _key_prefix(accelerator: str):
    """The key's hash over the simulator's code and the accelerator, copied for each program."""
    return hashlib.sha256(_code_digest() + accelerator.encode() + b"\0")


def store_file(folder: Path | str, program: NpuProgram, accelerator: str) -> str:
    digest = _key_prefix(accelerator).copy()
    digest.update(len(program.command_stream).to_bytes(8, "little") + program.command_stream)
    digest.update(program.weights)
    return f"{os.fspath(folder)}/sim_{digest.hexdigest()[:32]}.bin"


def timing_key(system_config: str, memory_mode: str, ini_digest: str) -> int:
    """A memory system's key for its figures in the file: the first 8 bytes of the SHA-256 of
    its names and its ini file's digest, as a signed int64."""
    text = f"{system_config}|{memory_mode}|{ini_digest}".encode()
    return int.from_bytes(hashlib.sha256(text).digest()[:8], "little", signed=True)


Timing = dict[int, tuple[list[int], list[int], tuple[int, ...]]]


@dataclass
class Derived:
    """Decoded weights ((stream, format) -> matrix), scale streams ((raw, channels, rounding)),
    and per memory-system key the per-operation (cycles, compute cycles) and PMU figures."""

    weights: dict[tuple[bytes, WeightFormat], np.ndarray] = field(default_factory=dict)
    scales: list[tuple[bytes, int, int]] = field(default_factory=list)
    # timing_key of a memory system -> per operation cycles and compute cycles, and the PMU figures
    timing: Timing = field(default_factory=dict)


_MAX_BYTES = 1 << 31  # a store file larger than this is not one save wrote for any NPU program


def _read(path: Path | str) -> bytes:
    """The bytes of a regular file; OSError for anything else (a FIFO is opened without
    blocking, then refused; a symlink is not followed)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > _MAX_BYTES:
            raise OSError(f"{path}: not a store file")
        return os.read(fd, info.st_size)
    finally:
        os.close(fd)


def load(path: Path | str, weights: bytes) -> Derived | None:
    """The derived state in path for the program with these weights, or None when it is missing
    or cannot be trusted."""
    try:
        raw = _read(path)
    except OSError:
        return None
    body = memoryview(raw)[_DIGEST:]  # not a copy: the arrays are views of raw
    if len(raw) <= _DIGEST or hashlib.sha256(body).digest() != raw[:_DIGEST]:
        return None
    try:
        return _unpack(*_parts(body), weights)
    except (ValueError, KeyError, IndexError, TypeError, StopIteration, AttributeError):
        return None


Part = tuple[str, list[int], memoryview]  # an array in the file: dtype, shape, its bytes
# json.loads's own scanner, called without its three Python frames and two regex matches (a
# tenth of a small program's first run): the header is one object, padded with spaces
# (typeshed does not declare scan_once, which JSONDecoder.__init__ sets)
_SCAN = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def _parts(body: memoryview) -> tuple[dict, dict[str, Part]]:
    """The timing and arrays of a body _body wrote: an 8-byte header length, a JSON header
    holding the numbers and naming each array's dtype, shape and byte range, then the arrays'
    bytes (no zip: reading an .npz's members cost more than the rest of the load). The arrays
    as views of the body's bytes."""
    size = int.from_bytes(body[:8], "little")
    header, _ = _SCAN(str(body[8 : 8 + size], "ascii"), 0)  # StopIteration: not JSON
    data = body[8 + size :]
    parts = {
        name: (dtype, shape, data[start:end])
        for name, (dtype, shape, start, end) in header.pop("arrays").items()
    }
    return header, parts


def _array(part: Part) -> np.ndarray:
    dtype, shape, raw = part
    return np.frombuffer(raw, dtype=dtype).reshape(shape)


def _body(numbers: dict, arrays: dict[str, np.ndarray]) -> bytes:
    described, chunks, pos = {}, [], 0
    for name, array in arrays.items():
        raw = np.ascontiguousarray(array).tobytes()
        described[name] = (array.dtype.str, list(array.shape), pos, pos + len(raw))
        padding = -len(raw) % _ALIGN
        chunks.append(raw + bytes(padding))
        pos += len(raw) + padding
    head = json.dumps({**numbers, "arrays": described}).encode()
    head += b" " * (-(8 + len(head)) % _ALIGN)  # the data aligned as the file's start is
    return len(head).to_bytes(8, "little") + head + b"".join(chunks)


def _slices(ends: np.ndarray) -> list[tuple[int, int]]:
    """(start, end) of each piece, from the pieces' ends."""
    bounds = [0, *ends.tolist()]
    return list(zip(bounds[:-1], bounds[1:]))


def _located(streams: list[bytes], weights: bytes, prefix: str) -> dict[str, np.ndarray]:
    """The streams as arrays for the file: where each starts in the program's weights (they
    are the weights' bytes, and the file is keyed by them), or -1 and its bytes kept inline when
    it is not there; keeping them only inline doubled the bytes to read and check."""
    starts = [weights.find(stream) for stream in streams]
    inline = [np.frombuffer(s, np.uint8) for s, at in zip(streams, starts) if at < 0]
    return {
        f"{prefix}starts": np.array(starts, np.int64),
        f"{prefix}lengths": np.array([len(s) for s in streams], np.int64),
        f"{prefix}inline": np.concatenate(inline) if inline else np.zeros(0, np.uint8),
    }


def _streams(a: dict[str, np.ndarray], prefix: str, weights: bytes) -> list[bytes]:
    """The streams _located kept."""
    inline, pos, streams = a[f"{prefix}inline"].tobytes(), 0, []
    for start, length in zip(a[f"{prefix}starts"].tolist(), a[f"{prefix}lengths"].tolist()):
        if start < 0:
            streams.append(inline[pos : pos + length])
            pos += length
        else:
            streams.append(weights[start : start + length])
    if pos != len(inline) or any(len(s) != n for s, n in zip(streams, a[f"{prefix}lengths"])):
        raise ValueError("streams outside the weights or the file")
    return streams


def _unpack_streams(a: dict[str, np.ndarray], weights: bytes, derived: Derived) -> None:
    """The decoded weights and scale streams save wrote. The weights are widened to int16 in
    one call and handed out as views (a conversion per stream cost more than reading the file)."""
    flat = a["w_values"].astype(np.int16)
    rows = zip(
        _streams(a, "w_", weights),
        _slices(a["w_value_ends"]),
        a["w_formats"].tolist(),
        a["w_shapes"].tolist(),
    )
    for stream, (v0, v1), fmt_row, shape in rows:
        fmt = WeightFormat(*(kind(v) for kind, v in zip(_FORMAT_TYPES, fmt_row)))
        matrix = flat[v0:v1].reshape([n for n in shape if n >= 0])
        if matrix.shape != matrix_shape(fmt):  # the kernels index it by the format's shape
            raise ValueError(f"a decoded matrix of shape {matrix.shape} for {fmt}")
        derived.weights[stream, fmt] = matrix
    for raw, (channels, rounding) in zip(_streams(a, "s_", weights), a["s_params"].tolist()):
        derived.scales.append((raw, channels, rounding))


def _unpack(numbers: dict, parts: dict[str, Part], weights: bytes) -> Derived:
    """The Derived that save wrote."""
    derived = Derived()
    _unpack_streams({name: _array(part) for name, part in parts.items()}, weights, derived)
    for key, (cycles, compute, pmu) in numbers["timing"].items():
        if len(cycles) != len(compute) or not all(
            type(v) is int for v in (*cycles, *compute, *pmu)
        ):
            raise ValueError("timing figures that are not one int per operation")
        derived.timing[int(key)] = (cycles, compute, tuple(pmu))
    return derived


def _ends(pieces) -> np.ndarray:
    return np.cumsum([len(p) for p in pieces], dtype=np.int64)


def _stream_arrays(derived: Derived, program_weights: bytes) -> dict[str, np.ndarray]:
    """The decoded weights and scale streams as arrays for the file."""
    weights = list(derived.weights.items())
    values = [m.reshape(-1).astype(np.int16) for _, m in weights]
    shapes = [list(m.shape) + [-1] * (3 - m.ndim) for _, m in weights]
    flat = np.concatenate(values) if values else np.zeros(0, np.int16)
    if flat.size and -128 <= flat.min() and flat.max() <= 127:
        flat = flat.astype(np.int8)  # most programs' weights: half the bytes to read and check
    return {
        **_located([s for (s, _), _ in weights], program_weights, "w_"),
        **_located([r for r, _, _ in derived.scales], program_weights, "s_"),
        "w_values": flat,
        "w_value_ends": _ends(values),
        "w_formats": np.array(
            [[int(getattr(f, n)) for n in _FORMAT_FIELDS] for (_, f), _ in weights], np.int64
        ).reshape(-1, len(_FORMAT_FIELDS)),
        "w_shapes": np.array(shapes, np.int64).reshape(-1, 3),
        "s_params": np.array([[c, r] for _, c, r in derived.scales], np.int64).reshape(-1, 2),
    }


def save(path: Path | str, derived: Derived, program_weights: bytes) -> None:
    """Write derived to path atomically; a folder that cannot be written is left as it is.
    program_weights: the weights of the program the file is kept for."""
    timing = {
        key: ([int(v) for v in cycles], [int(v) for v in compute], tuple(int(v) for v in pmu))
        for key, (cycles, compute, pmu) in derived.timing.items()
    }
    body = _body({"timing": timing}, _stream_arrays(derived, program_weights))
    try:
        folder, name = os.path.split(path)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=name, suffix=".tmp")
    except OSError:
        return
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(hashlib.sha256(body).digest() + body)
        os.replace(tmp, path)
    except OSError:
        Path(tmp).unlink(missing_ok=True)
