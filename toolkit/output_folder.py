"""Output folders: created with a clear error when that is impossible, refused when they hold a
symbolic link or a special file (safe_paths.refuse_links), and held by one run at a time (a
lock file naming the pid that holds it, opened without following a link or blocking on a
FIFO)."""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from contextlib import contextmanager
from pathlib import Path

from .errors import UserError
from .safe_paths import refuse_links

LOCK_NAME = ".etk.lock"


def make_output_folder(folder: Path, what: str = "output folder") -> Path:
    """folder, created if missing; UserError if it is a file, under a file or not writable."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise UserError(f"{what} {folder} is a file: choose a folder (-o/--out)")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise UserError(
            f"{what} {folder} cannot be created: part of its path is a file; choose another folder"
        ) from None
    except OSError as exc:
        raise UserError(
            f"{what} {folder} cannot be created: {exc.strerror}; choose a writable folder"
        ) from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UserError(f"{what} {folder} is not writable: choose a writable folder")
    return folder


def _missing_folders(folder: Path) -> list[Path]:
    """folder and those of its parents that do not exist, deepest first."""
    missing = []
    for path in (folder, *folder.parents):
        if os.path.lexists(path):
            break
        missing.append(path)
    return missing


def _remove_if_only_the_lock(created: list[Path]) -> None:
    """After a failed run: the folders this run created, when they hold nothing but its lock
    (a bad MODEL, refused after the lock was taken) - no empty folder with a stale lock."""
    if not created:
        return
    try:
        if {p.name for p in created[0].iterdir()} - {LOCK_NAME}:
            return
        (created[0] / LOCK_NAME).unlink(missing_ok=True)
        for path in created:
            path.rmdir()
    except OSError:
        pass  # something else is in there, or it is already gone: leave it


@contextmanager
def locked_output_folder(folder: Path, what: str = "output folder"):
    """Hold folder for this run; UserError naming the pid of another run that holds it. A run
    that fails leaves no folder it created with nothing in it but the lock."""
    created = _missing_folders(Path(folder))
    folder = make_output_folder(folder, what)
    refuse_links(folder, what)
    lock = folder / LOCK_NAME
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # a link made since refuse_links looked
            raise UserError(f"{what} {folder}: {LOCK_NAME} is a symbolic link; remove it") from None
        raise UserError(
            f"{what} {folder} is not writable ({exc.strerror}): choose a writable folder"
        ) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UserError(f"{what} {folder}: {LOCK_NAME} is not a regular file; remove it")
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            raise UserError(
                f"{what} {folder} is in use by pid {holder} (another etk run): "
                "wait for it to finish or choose another folder"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        try:
            yield folder
        except BaseException:
            _remove_if_only_the_lock(created)  # still holding the lock: nobody else is in
            raise
    finally:
        os.close(fd)  # releases the lock
