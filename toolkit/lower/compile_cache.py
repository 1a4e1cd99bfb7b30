"""Compiled programs shared between processes: ETK_CACHE_DIR/KEY holds the program compiled under
cache key KEY (program_store's format), so another process (a second etk run, a bench worker, a
test worker) copies it instead of compiling again.

Off unless ETK_CACHE_DIR is set; a folder that is set but cannot be used is an error, not a cache
quietly left off. The key covers the model, calibration, options, tool versions and the
toolkit's own sources, so an entry is never reused by code that would compile something else.
One process compiles a key at a time (a lock file per key, KEY.lock, kept: removing it would let
a process waiting on the old file and a newcomer hold the same key); the others wait for it and
copy its result. A hit touches the entry, so `etk cache prune` removes the least recently used.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import UserError
from .program_store import copy_stored_program

CACHE_DIR_ENV = "ETK_CACHE_DIR"


def cache_root() -> Path | None:
    value = os.environ.get(CACHE_DIR_ENV)
    return Path(value) if value else None


def unusable_cache(root: Path, reason: str) -> UserError:
    return UserError(
        f"{CACHE_DIR_ENV}={root} cannot be used as the compile cache: {reason}; "
        f"set {CACHE_DIR_ENV} to a writable folder or unset it"
    )


def _cache_folder() -> Path | None:
    """The cache folder, made if missing; None when no cache is set."""
    root = cache_root()
    if root is None:
        return None
    if root.exists() and not root.is_dir():
        raise unusable_cache(root, "it is not a folder")
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise unusable_cache(root, exc.strerror or str(exc)) from exc
    return root


def usable_cache_root() -> Path | None:
    """The cache folder (made if missing, checked writable), None when no cache is set.
    UserError when it is set but cannot be used: checked before a command compiles anything
    (a compile that meets an unwritable folder later fails the same way, on its key's lock)."""
    root = _cache_folder()
    if root is None:
        return None
    try:
        probe, probe_path = tempfile.mkstemp(prefix=".etk-write-check-", dir=root)
        os.close(probe)
        os.unlink(probe_path)
    except OSError as exc:
        raise unusable_cache(root, exc.strerror or str(exc)) from exc
    return root


@contextmanager
def key_lock(root: Path, key: str, wait: bool = True) -> Iterator[bool]:
    """Hold key's lock while the block runs; with wait=False, yields False at once (holding
    nothing) when another process holds it."""
    try:
        fd = os.open(root / f"{key}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise unusable_cache(root, exc.strerror or str(exc)) from exc
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


@contextmanager
def held_entry(key: str) -> Iterator[Path | None]:
    """The cache folder for key, with its lock held while the caller reads or fills it; None when
    no cache is set (then the caller simply compiles)."""
    root = _cache_folder()
    if root is None:
        yield None
        return
    with key_lock(root, key):
        yield root / key


def mark_used(entry: Path) -> None:
    """A hit: the entry becomes the most recently used (its folder's mtime), the last to prune."""
    os.utime(entry)


class PublishFailed(Exception):
    """The compiled program could not be copied into the cache (it is still in its folder)."""


def publish(folder: Path, entry: Path) -> None:
    """Copy the program stored in folder into the cache entry (its lock held), replacing what is
    there: the caller compiled because that could not be used (damaged, or a partial copy).
    PublishFailed when the cache cannot take it (a full disk): the caller's program is kept."""
    try:
        staging = Path(tempfile.mkdtemp(prefix=f".{entry.name}.partial-", dir=entry.parent))
    except OSError as exc:
        raise PublishFailed(exc.strerror or str(exc)) from exc
    if not copy_stored_program(folder, staging):
        shutil.rmtree(staging, ignore_errors=True)
        raise PublishFailed(f"copying the compiled program into {staging} failed")
    shutil.rmtree(entry, ignore_errors=True)
    staging.rename(entry)
