"""Compiled programs shared between processes: ETK_CACHE_DIR/KEY holds the program compiled under
cache key KEY (program_store's format), so another process (a second etk run, a bench worker, a
test worker) copies it instead of compiling again.

Off unless ETK_CACHE_DIR is set: every entry is a full compiled program and nothing is evicted.
The key covers the model, calibration, options, tool versions and the toolkit's own sources, so
an entry is never reused by code that would compile something else. One process compiles a key
at a time (a lock file per key); the others wait for it and copy its result.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .program_store import copy_stored_program

CACHE_DIR_ENV = "ETK_CACHE_DIR"


def cache_root() -> Path | None:
    value = os.environ.get(CACHE_DIR_ENV)
    return Path(value) if value else None


@contextmanager
def held_entry(key: str) -> Iterator[Path | None]:
    """The cache folder for key, with its lock held while the caller reads or fills it; None when
    no cache is set or its folder cannot be used (then the caller simply compiles)."""
    root = cache_root()
    if root is None:
        yield None
        return
    try:
        root.mkdir(parents=True, exist_ok=True)
        fd = os.open(root / f"{key}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        yield None
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield root / key
    finally:
        os.close(fd)


def publish(folder: Path, entry: Path) -> None:
    """Copy the program stored in folder into the cache entry (its lock held), replacing what is
    there: the caller compiled because that could not be used (damaged, or a partial copy)."""
    try:
        staging = Path(tempfile.mkdtemp(prefix=f".{entry.name}.partial-", dir=entry.parent))
    except OSError:
        return
    if not copy_stored_program(folder, staging):
        shutil.rmtree(staging, ignore_errors=True)
        return
    shutil.rmtree(entry, ignore_errors=True)
    staging.rename(entry)
