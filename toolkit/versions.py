"""Versions of the tools a result depends on, for reports and cache keys."""

from __future__ import annotations

import hashlib
import os
import platform
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

# The Vela etk's pinned figures and checks were made with (pyproject.toml pins it; executorch's
# [ethos-u] extra pins 5.1.0, so an environment can end up with another).
TESTED_VELA = "5.2.0"


# Environment variables that choose oneDNN's and MKL's float kernels (ATen's own choice,
# ATEN_CPU_CAPABILITY included, is torch's CPU capability)
_FLOAT_KERNEL_OVERRIDES = ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS")


def host_float_kernels() -> str:
    """The host's float kernels, as torch picks them: calibration runs the float model on them,
    and their rounding differs by vector width. On an AVX-512 host DS-CNN's calibrated scales
    differ from an AVX2 host's in the last float32 bits, and so do some of Vela's scale shifts:
    a program is reproducible on hosts of the same kind."""
    import torch

    kind = f"{platform.machine()} {torch.backends.cpu.get_cpu_capability()}"
    overrides = [f"{n}={os.environ[n]}" for n in _FLOAT_KERNEL_OVERRIDES if os.environ.get(n)]
    return " ".join([kind, *overrides])


def tool_versions() -> dict[str, str]:
    versions = {"python": platform.python_version(), "host_float_kernels": host_float_kernels()}
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


def vela_version_warning(installed: str) -> str | None:
    """One line when the installed Vela is not the one etk was tested with, else None."""
    if installed == TESTED_VELA:
        return None
    return (
        f"WARNING ethos-u-vela {installed} is installed; etk was tested with {TESTED_VELA} "
        f"(pip install ethos-u-vela=={TESTED_VELA}): estimates and command streams may differ"
    )


@cache
def toolkit_source_hash() -> str:
    """A hash of the toolkit's own code, so a cached compile is not reused across code changes
    that keep the version number (a development checkout)."""
    digest = hashlib.sha256()
    for path in sorted(Path(__file__).parent.rglob("*.py")):
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]
