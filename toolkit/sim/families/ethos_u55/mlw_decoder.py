"""Vela's mlw weight decoder, run in a child process of its own.

The decoder (Vela's mlw_codec library, mlw_decode.h) calls C exit(1) on a stream that ends
early ("bitbuf_getbit: underrun"), which would end etk with no message and no report. Here it
runs in one long-lived child per etk process, started on first use: the parent sends each
stream down a pipe and reads the decoded int16 values back (a round trip costs microseconds; a
fork per stream cost 20-40 ms in a process that holds torch). A child that dies is reported
as a PayloadError quoting what the decoder printed, and the next stream starts a new child.
"""

from __future__ import annotations

import atexit
import struct
import subprocess
import sys
import threading

import numpy as np
from ethosu import mlw_codec

from ...errors import PayloadError

# The child: the codec library by its path (no ethosu import), the protocol on its own copy of
# stdout, and the decoder's own prints sent to stderr, which the parent reads when it dies.
_CHILD = r"""
import ctypes, os, struct, sys
lib = ctypes.CDLL(sys.argv[1])
lib.mlw_decode.argtypes = [ctypes.c_char_p, ctypes.c_int,
                           ctypes.POINTER(ctypes.POINTER(ctypes.c_int16)), ctypes.c_int]
lib.mlw_decode.restype = ctypes.c_int
lib.mlw_free_outbuf.argtypes = [ctypes.c_void_p]
source = os.fdopen(0, "rb", buffering=0)
sink = os.fdopen(os.dup(1), "wb", buffering=0)
os.dup2(2, 1)
while True:
    head = source.read(8)
    if len(head) < 8:
        break
    (size,) = struct.unpack("<q", head)
    stream = b""
    while len(stream) < size:
        chunk = source.read(size - len(stream))
        if not chunk:
            sys.exit(0)
        stream += chunk
    out = ctypes.POINTER(ctypes.c_int16)()
    count = lib.mlw_decode(stream, len(stream), ctypes.byref(out), 0)
    values = ctypes.string_at(out, 2 * count) if count > 0 else b""
    lib.mlw_free_outbuf(ctypes.cast(out, ctypes.c_void_p))
    sink.write(struct.pack("<q", len(values) // 2) + values)
"""


class _Decoder:
    def __init__(self) -> None:
        self._child: subprocess.Popen | None = None
        self._lock = threading.Lock()

    def _started(self) -> subprocess.Popen:
        if self._child is None or self._child.poll() is not None:
            self._child = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _CHILD, mlw_codec.__file__],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                bufsize=0,
            )
        return self._child

    def decode(self, stream: bytes) -> np.ndarray:
        with self._lock:
            child = self._started()
            assert child.stdin is not None and child.stdout is not None
            try:
                child.stdin.write(struct.pack("<q", len(stream)) + stream)
                head = _read_exactly(child.stdout, 8)
                (count,) = struct.unpack("<q", head)
                values = _read_exactly(child.stdout, 2 * count)
            except (OSError, EOFError, struct.error):
                raise PayloadError(self._died(len(stream))) from None
            return np.frombuffer(values, np.int16).copy()

    def _died(self, size: int) -> str:
        """What to say of a child that stopped while decoding a stream of `size` bytes."""
        child, self._child = self._child, None
        assert child is not None
        try:
            _, err = child.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            child.kill()
            _, err = child.communicate()
        said = err.decode(errors="replace").strip().splitlines()
        detail = f": {said[-1].strip()}" if said else f" (exit code {child.returncode})"
        return f"a weight stream of {size} bytes is corrupt: Vela's mlw decoder stopped{detail}"

    def close(self) -> None:
        child, self._child = self._child, None
        if child is not None:
            child.kill()
            child.wait()
            for pipe in (child.stdin, child.stdout, child.stderr):
                if pipe is not None:
                    pipe.close()


def _read_exactly(pipe, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = pipe.read(size - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


_DECODER = _Decoder()
atexit.register(_DECODER.close)


def mlw_decode(stream: bytes) -> np.ndarray:
    """The int16 values of an mlw-compressed weight stream (what mlw_codec.decode gives);
    PayloadError where the decoder cannot decode it."""
    return _DECODER.decode(stream)
