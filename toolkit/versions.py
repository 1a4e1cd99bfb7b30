"""Versions of the tools a result depends on, for reports and cache keys."""

from __future__ import annotations

import hashlib
import platform
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path


def tool_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for key, dist in (
        ("torch", "torch"),
        ("executorch", "executorch"),
        ("torchao", "torchao"),  # ExecuTorch's quantizer runs torchao's pt2e quantization
        ("vela", "ethos-u-vela"),
        ("tosa_tools", "tosa-tools"),
        ("toolkit", "ethos-u-toolkit"),
    ):
        try:
            versions[key] = version(dist)
        except PackageNotFoundError:
            versions[key] = "not installed"
    return versions


@cache
def toolkit_source_hash() -> str:
    """A hash of the toolkit's own code, so a cached compile is not reused across code changes
    that keep the version number (a development checkout)."""
    digest = hashlib.sha256()
    for path in sorted(Path(__file__).parent.rglob("*.py")):
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]
