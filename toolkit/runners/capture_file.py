"""A saved console capture, read for `etk log`: a regular file only, streamed, within a size limit.

A device (/dev/zero, a serial port, a pty), a FIFO or a socket never ends or blocks: refused in
one line before anything is read, and opened without blocking (a FIFO with no writer would hold
open() forever). A regular file is read in chunks into the parser, which keeps no per-line
objects, so memory stays bounded whatever the capture's size; past SIZE_LIMIT bytes (by its size,
or by what reading it gave: /proc files say 0) it is refused.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ..errors import UserError
from .uart_log import UartLog, UartLogParser

SIZE_LIMIT = 512 << 20  # bytes: a day of a 115200-baud UART is about 1 GiB; a run is far less
CHUNK = 1 << 20
_KINDS = (
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a folder"),
)
_CUT = "cut it to the run (e.g. `tail -c 100M`)"


def parse_capture(path: Path) -> UartLog:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror}") from None
    try:
        mode = os.fstat(fd)
        _check_kind(path, mode.st_mode)
        if mode.st_size > SIZE_LIMIT:
            raise UserError(
                f"{path} holds {mode.st_size:,} bytes, more than etk log reads "
                f"({SIZE_LIMIT:,}): {_CUT}"
            )
        return _parse(path, fd)
    finally:
        os.close(fd)


def _check_kind(path: Path, mode: int) -> None:
    for test, kind in _KINDS:
        if test(mode):
            raise UserError(
                f"{path} is {kind}, not a saved capture: etk log reads a file; save the console "
                "output first (e.g. `cat PORT > capture.log`, stopped when the run ends)"
            )


def _parse(path: Path, fd: int) -> UartLog:
    parser = UartLogParser()
    read = 0
    while chunk := _read(path, fd, min(CHUNK, SIZE_LIMIT + 1 - read)):
        read += len(chunk)
        if read > SIZE_LIMIT:
            raise UserError(
                f"{path} holds more than etk log reads ({SIZE_LIMIT:,} bytes, read so far): {_CUT}"
            )
        parser.feed(chunk)
    return parser.finish()


def _read(path: Path, fd: int, size: int) -> bytes:
    try:
        return os.read(fd, size)
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror}") from None
