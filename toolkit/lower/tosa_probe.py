"""A stored TOSA graph is tried in a child process before etk reads it natively.

The TOSA reference model (C++) trusts the flatbuffer it is given: one changed byte of a .tosa file
can crash it (a segmentation fault takes etk down with nothing said). A stored program's .tosa
(OUT/VARIANT, a shared ETK_CACHE_DIR entry) is data anyone with write access may have crafted,
its checksums recomputed, so before etk's own process hands it to a native reader, a child
process runs each stored graph once on zero inputs of the graph's own input shapes, under a
memory limit and a timeout. A graph the child cannot run (a crash, a hang, a Python error, a
status other than VALID) makes the store damaged: it is compiled again. Graphs this process
compiled or already probed are not probed again.

The child is this file run as a script in isolated mode (`python -I`: no environment variables,
no script folder on sys.path), given the files as a JSON list on stdin; it prints one JSON line
per file.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

_TRUSTED: set[str] = set()  # SHA-256 of graphs this process wrote or probed
_TIMEOUT_S = 120
_CHILD_MEMORY = 8 << 30


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def trust_compiled(data: bytes) -> None:
    """A graph this process compiled: it needs no probe when read back."""
    _TRUSTED.add(_digest(data))


class ProbeFailed(ValueError):
    """The TOSA reference model could not run a stored graph; the message names the file."""


def probe_tosa_files(paths: Sequence[Path]) -> None:
    """ProbeFailed naming the first file the TOSA reference model cannot run on zero inputs."""
    pending: dict[str, str] = {}
    for path in paths:
        digest = _digest(Path(path).read_bytes())
        if digest not in _TRUSTED:
            pending[str(path)] = digest
    if not pending:
        return
    try:
        child = subprocess.run(
            [sys.executable, "-I", __file__],
            input=json.dumps(list(pending)),
            capture_output=True,
            text=True,
            errors="replace",
            timeout=_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        raise ProbeFailed(
            f"the TOSA reference model did not finish within {_TIMEOUT_S} s"
        ) from None
    verdicts = _verdicts(child.stdout)
    for name, digest in pending.items():
        status = verdicts.get(name)
        if status != "VALID":
            raise ProbeFailed(f"{Path(name).name} {_failure(child, status)}")
        _TRUSTED.add(digest)


def _verdicts(stdout: str) -> dict[str, str]:
    verdicts = {}
    for line in stdout.splitlines():
        try:
            entry = json.loads(line)
            verdicts[str(entry["file"])] = str(entry["status"])
        except (ValueError, KeyError, TypeError):
            continue
    return verdicts


def _failure(child: subprocess.CompletedProcess, status: str | None) -> str:
    if status is not None:
        return f"is not a graph the TOSA reference model runs ({status[:120]})"
    if child.returncode < 0:
        return f"crashed the TOSA reference model (signal {-child.returncode})"
    last = (child.stderr.strip().splitlines() or ["no message"])[-1]
    return f"could not be read ({last[:160]})"


def _input_arrays(data: bytes):
    import numpy as np
    from tosa import DType
    from tosa.TosaGraph import TosaGraph

    numpy_of = {
        DType.DType.INT8: np.int8,
        DType.DType.INT16: np.int16,
        DType.DType.INT32: np.int32,
        DType.DType.FP32: np.float32,
        DType.DType.BOOL: np.bool_,
    }
    block = TosaGraph.GetRootAsTosaGraph(data, 0).Regions(0).Blocks(0)
    tensors = {}
    for t in range(block.TensorsLength()):
        tensor = block.Tensors(t)
        tensors[tensor.Name()] = tensor
    arrays = []
    for i in range(block.InputsLength()):
        tensor = tensors[block.Inputs(i)]
        shape = [int(d) for d in tensor.ShapeAsNumpy()] if tensor.ShapeLength() else []
        arrays.append(np.zeros(shape, dtype=numpy_of[tensor.Type()]))
    return arrays


def _child(paths: Sequence[str]) -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (_CHILD_MEMORY, _CHILD_MEMORY))
    import tosa_reference_model

    for path in paths:
        data = Path(path).read_bytes()
        try:
            _outputs, status = tosa_reference_model.run(data, _input_arrays(data))
            verdict = "VALID" if "VALID" in str(status) else str(status)
        except Exception as exc:  # noqa: BLE001 - any failure to read it is the verdict
            verdict = f"{type(exc).__name__}: {exc}"
        print(json.dumps({"file": path, "status": verdict}), flush=True)


if __name__ == "__main__":
    _child(json.loads(sys.stdin.read()))
