"""Versions of the tools a result depends on, for reports and cache keys."""

from __future__ import annotations

import platform
from importlib.metadata import PackageNotFoundError, version


def tool_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for key, dist in (("torch", "torch"), ("executorch", "executorch"), ("vela", "ethos-u-vela"),
                      ("tosa_tools", "tosa-tools"), ("toolkit", "ethos-u-toolkit")):
        try:
            versions[key] = version(dist)
        except PackageNotFoundError:
            versions[key] = "not installed"
    return versions
