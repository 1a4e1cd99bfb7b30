"""Output folders that are complete or absent: build in a staging folder, then rename it in."""

from __future__ import annotations

import shutil
from pathlib import Path


def new_staging(final: Path) -> Path:
    """An empty staging folder next to final (any leftover of an interrupted run removed)."""
    staging = final.parent / f".{final.name}.partial"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    return staging


def move_into_place(staging: Path, final: Path) -> None:
    if final.exists():
        shutil.rmtree(final)
    staging.rename(final)
