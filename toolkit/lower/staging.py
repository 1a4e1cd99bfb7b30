"""Output folders that are complete or absent: build in a staging folder, then rename it in.

Staging folders have unique names, so runs never remove each other's. A folder the toolkit
wrote carries a marker file; only such a folder is ever replaced.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from ..errors import UserError

MARKER = ".etk-output"
_STAGING = ".{name}.partial-"


def _check_replaceable(final: Path) -> None:
    if final.exists() and not (final / MARKER).is_file():
        raise UserError(
            f"{final} exists and was not written by etk (no {MARKER} marker): move "
            "it away or choose another output folder; etk does not delete it"
        )


def new_staging(final: Path) -> Path:
    """An empty, uniquely named staging folder next to final."""
    _check_replaceable(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=_STAGING.format(name=final.name), dir=final.parent))
    (staging / MARKER).write_text("written by etk; this folder is replaced by the next run\n")
    return staging


def remove_stale_staging(folder: Path) -> None:
    """Staging folders left by interrupted runs (call with the output folder's lock held)."""
    for stale in Path(folder).glob(".*.partial-*"):
        shutil.rmtree(stale, ignore_errors=True)


def move_into_place(staging: Path, final: Path) -> None:
    """Replace final (only if etk wrote it) by staging; the old folder is removed after."""
    _check_replaceable(final)
    if final.exists():
        old = Path(
            tempfile.mkdtemp(prefix=_STAGING.format(name=final.name + ".old"), dir=final.parent)
        )
        final.rename(old / final.name)
        staging.rename(final)
        shutil.rmtree(old, ignore_errors=True)
    else:
        staging.rename(final)
