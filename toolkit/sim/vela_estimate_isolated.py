"""Vela's per-operation estimate of a TOSA file this process did not compile, from a child.

Vela's C++ core reads the TOSA flatbuffer natively; a stored .tosa (a shared ETK_CACHE_DIR
entry) may be crafted to crash it, so it is read in a child (`python -I -m` this module), which
prints the estimates as one JSON list. The child dying, or printing anything else, is a ToolError.
"""

from __future__ import annotations

import json
import subprocess
import sys

from ..errors import ToolError
from .vela_estimate import VelaOpEstimate

_TIMEOUT_S = 600


def estimates_in_child(
    tosa_path: str, accelerator: str, system_config: str | None, memory_mode: str | None
) -> tuple[VelaOpEstimate, ...]:
    arguments = json.dumps([tosa_path, accelerator, system_config, memory_mode])
    try:
        child = subprocess.run(
            [sys.executable, "-I", "-m", __name__, arguments],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        raise ToolError(f"Vela did not finish reading {tosa_path} in {_TIMEOUT_S} s") from None
    if child.returncode != 0:
        last = (child.stderr.strip().splitlines() or [f"exit {child.returncode}"])[-1]
        raise ToolError(f"Vela could not read {tosa_path}: {last[:200]}")
    try:
        return tuple(_estimate(row) for row in json.loads(child.stdout.splitlines()[-1]))
    except (ValueError, TypeError, IndexError) as exc:
        raise ToolError(f"Vela's estimate of {tosa_path} is unreadable ({exc})") from None


def _estimate(row: list) -> VelaOpEstimate:
    offset, operator, name, op_cycles, npu_cycles, macs, fused = row
    numbers = (offset, op_cycles, npu_cycles, macs)
    if not all(type(n) is int for n in numbers) or not isinstance(fused, list):
        raise TypeError("a row that is not Vela's")
    return VelaOpEstimate(
        offset, str(operator), str(name), op_cycles, npu_cycles, macs, tuple(map(str, fused))
    )


if __name__ == "__main__":
    from .vela_estimate import vela_estimates

    print(json.dumps([list(e) for e in vela_estimates(*json.loads(sys.argv[1]))]))
