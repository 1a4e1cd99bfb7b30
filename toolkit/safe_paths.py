"""Paths that come from data, and folders etk writes into, held to what they claim to be.

A name read from a file (a program store's list of files) is used only when it is a plain
relative path inside its folder: no absolute path, no `..`, no component that is a symbolic
link, and it ends in a regular file. An output folder that holds a symbolic link or a special
file (a FIFO, a device) anywhere inside it is refused before etk writes anything: a link there
would have etk write, or delete, wherever it points.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path, PurePosixPath

from .errors import UserError


class UnsafeName(ValueError):
    """A name from a file that does not stay inside its folder as a regular file."""


def plain_name(name: object) -> str:
    """name, when it is one file name (no folder part, not `.` or `..`); else UnsafeName."""
    if not isinstance(name, str) or name in ("", ".", "..") or "/" in name or "\\" in name:
        raise UnsafeName(f"{name!r} is not a file name")
    if "\0" in name:
        raise UnsafeName(f"{name!r} is not a file name")
    return name


def member(folder: Path, name: object) -> Path:
    """folder / name, for a name read from a file; UnsafeName unless it is a plain relative
    path whose directories are real directories and whose last part is a regular file."""
    if not isinstance(name, str) or not name or "\\" in name or "\0" in name:
        raise UnsafeName(f"{name!r} is not a file name")
    parts = PurePosixPath(name).parts
    if PurePosixPath(name).is_absolute() or any(p in ("", ".", "..") for p in parts):
        raise UnsafeName(f"{name!r} is not a plain path inside the folder")
    path = Path(folder)
    for k, part in enumerate(parts):
        path = path / part
        try:
            mode = os.lstat(path).st_mode
        except OSError:
            raise UnsafeName(f"{name} is missing") from None
        last = k == len(parts) - 1
        if stat.S_ISLNK(mode) or not (stat.S_ISREG(mode) if last else stat.S_ISDIR(mode)):
            raise UnsafeName(f"{name} is not a regular file inside the folder")
    return path


def refuse_links(folder: Path, what: str) -> None:
    """UserError naming the first symbolic link or special file inside folder (the folder
    itself may be a link: that is where the user chose to keep it)."""
    for root, dirs, files in os.walk(folder):
        for name in (*dirs, *files):
            path = Path(root, name)
            try:
                mode = os.lstat(path).st_mode
            except FileNotFoundError:
                continue  # removed while we looked
            if stat.S_ISLNK(mode):
                raise UserError(
                    f"{what} {folder} holds a symbolic link ({path}): etk writes only real "
                    "files in its folders; remove the link or choose another folder"
                )
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                raise UserError(
                    f"{what} {folder} holds {path}, which is not a regular file (a FIFO, "
                    "socket or device): remove it or choose another folder"
                )
