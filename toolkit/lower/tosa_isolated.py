"""The TOSA reference model, run on graphs this process did not compile, in a child process.

The reference model (C++) trusts the flatbuffer it is given. A stored program's .tosa (OUT/VARIANT,
a shared ETK_CACHE_DIR entry) is probed on zero inputs before it is accepted (tosa_probe.py), but
a crafted graph can pass that probe and still crash, or corrupt memory, on other inputs
(scripts/fuzz_stored_tosa.py found one: heap damage that killed a later run). So every run of a
graph this process did not compile happens in a child of its own, started on first use, isolated
(`python -I`, no toolkit imported, a memory limit), speaking length-prefixed frames over its
stdin/stdout: a JSON header, then the graph and the input arrays as .npy bytes (never pickles, in
either direction). A child that dies is ChildDied (the caller names the file); the next call
starts a new one. A child ends when etk closes its stdin, at exit at the latest.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import struct
import subprocess
import sys
from dataclasses import dataclass

_CHILD_MEMORY = 8 << 30
_LIVE = 4  # children kept running (a job runs a few graphs, each many times)
_FRAME = struct.Struct("<Q")


@dataclass(frozen=True)
class ReferenceRun:
    outputs: list  # numpy arrays
    status: str  # the reference model's GraphStatus, as text
    log: str  # what the model printed (warnings; the intermediates when asked for)


def _npy(array) -> bytes:
    import numpy as np

    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(array), allow_pickle=False)
    return buffer.getvalue()


def _from_npy(data: bytes):
    import numpy as np

    return np.load(io.BytesIO(data), allow_pickle=False)


def _write_frame(stream, header: dict, blobs: list[bytes]) -> None:
    head = json.dumps({**header, "sizes": [len(b) for b in blobs]}).encode()
    stream.write(_FRAME.pack(len(head)) + head)
    for blob in blobs:
        stream.write(blob)
    stream.flush()


def _read_exact(stream, size: int) -> bytes:
    data = stream.read(size)
    if data is None or len(data) != size:
        raise EOFError
    return data


def _read_frame(stream, limit: int = 1 << 31) -> tuple[dict, list[bytes]]:
    (size,) = _FRAME.unpack(_read_exact(stream, _FRAME.size))
    if size > limit:
        raise EOFError
    header = json.loads(_read_exact(stream, size))
    sizes = header.get("sizes")
    if not isinstance(sizes, list) or not all(
        isinstance(s, int) and 0 <= s <= limit for s in sizes
    ):
        raise EOFError
    return header, [_read_exact(stream, s) for s in sizes]


class _Children:
    """One child per graph, started on first use: a graph that corrupts its child's memory
    cannot change another graph's results. The oldest is stopped beyond _LIVE."""

    live: dict[str, subprocess.Popen] = {}

    @classmethod
    def request(cls, graph: bytes, inputs: list, intermediates: bool) -> tuple[dict, list[bytes]]:
        key = hashlib.sha256(graph).hexdigest()
        process = cls.live.pop(key, None)
        if process is None or process.poll() is not None:
            process = subprocess.Popen(
                [sys.executable, "-I", __file__],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
        cls.live[key] = process  # the most recently used last
        while len(cls.live) > _LIVE:
            cls._stop(next(iter(cls.live)))
        assert process.stdin is not None and process.stdout is not None
        try:
            _write_frame(
                process.stdin,
                {"intermediates": intermediates},
                [graph, *(_npy(a) for a in inputs)],
            )
            return _read_frame(process.stdout)
        except (OSError, EOFError, ValueError):
            raise ChildDied(cls._stop(key)) from None

    @classmethod
    def _stop(cls, key: str) -> int:
        process = cls.live.pop(key)
        process.kill()
        for pipe in (process.stdin, process.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):  # a write still buffered to a dead child
                    pipe.close()
        return process.wait()


class ChildDied(Exception):
    def __init__(self, code: int):
        super().__init__(f"signal {-code}" if code < 0 else f"exit code {code}")


def run_reference_model(graph: bytes, inputs: list, intermediates: bool = False) -> ReferenceRun:
    """Run graph on the TOSA reference model: here if this process compiled it, else in the
    graph's child (ChildDied if the child died doing it)."""
    from .tosa_probe import compiled_here

    if compiled_here(graph):
        return _run_here(graph, inputs, intermediates)
    header, blobs = _Children.request(graph, inputs, intermediates)
    return ReferenceRun([_from_npy(b) for b in blobs], str(header["status"]), str(header["log"]))


def _run_here(graph: bytes, inputs: list, intermediates: bool) -> ReferenceRun:
    import tosa_reference_model

    from ..console_capture import capture_fds

    with capture_fds() as log:
        outputs, status = tosa_reference_model.run(
            graph, inputs, dump_intermediates=1 if intermediates else 0
        )
    return ReferenceRun(list(outputs), str(status), log.text)


def _serve() -> None:  # the child: this file run as a script, isolated
    import ctypes
    import resource
    import tempfile

    resource.setrlimit(resource.RLIMIT_AS, (_CHILD_MEMORY, _CHILD_MEMORY))
    import tosa_reference_model

    libc = ctypes.CDLL(None)
    requests = sys.stdin.buffer
    replies = os.fdopen(os.dup(1), "wb")
    while True:
        try:
            header, blobs = _read_frame(requests)
        except EOFError:
            return
        with tempfile.TemporaryFile() as sink:
            for fd in (1, 2):  # what the model prints goes to the log, not the replies
                os.dup2(sink.fileno(), fd)
            try:
                outputs, status = tosa_reference_model.run(
                    blobs[0],
                    [_from_npy(b) for b in blobs[1:]],
                    dump_intermediates=1 if header.get("intermediates") else 0,
                )
            except Exception as exc:  # noqa: BLE001 - the parent gets it as the status
                outputs, status = [], f"{type(exc).__name__}: {exc}"
            libc.fflush(None)
            sink.seek(0)
            log = sink.read().decode(errors="replace")
        _write_frame(replies, {"status": str(status), "log": log}, [_npy(o) for o in outputs])


if __name__ == "__main__":
    _serve()
