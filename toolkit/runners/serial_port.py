"""Opening a board's serial port with pyserial: clear errors when it is missing or in use."""

from __future__ import annotations

import errno
import os
import time
from dataclasses import dataclass
from pathlib import Path

from ..errors import UserError

READ_TIMEOUT_S = 0.05


@dataclass(frozen=True)
class Holder:
    pid: int
    command: str

    def __str__(self) -> str:
        return f"pid {self.pid} ({self.command})"


def holders(port: str) -> tuple[Holder, ...]:
    """Other processes with the port open, found through /proc/*/fd (Linux; empty elsewhere)."""
    try:
        device = os.path.realpath(port)
    except OSError:
        return ()
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        pid = int(proc.name)
        if pid == os.getpid():
            continue
        try:
            if not any(os.path.realpath(fd) == device for fd in (proc / "fd").iterdir()):
                continue
            command = (
                (proc / "cmdline")
                .read_bytes()
                .replace(b"\0", b" ")
                .decode(errors="replace")
                .strip()
            )
        except OSError:  # gone, or not ours to look at
            continue
        found.append(Holder(pid, command[:80] or "?"))
    return tuple(found)


def _busy(port: str, detail: str) -> UserError:
    held = holders(port)
    who = (
        f"held by {', '.join(map(str, held))}"
        if held
        else "another program has it open (a terminal like minicom or screen?)"
    )
    return UserError(f"serial port {port} is busy: {who}; close it and retry ({detail})")


def open_port(port: str, baud: int):
    """An open, exclusively locked serial.Serial; UserError naming the port when it cannot be."""
    import serial

    try:
        link = serial.Serial(port, baud, timeout=READ_TIMEOUT_S, exclusive=True)
    except serial.SerialException as exc:
        code = exc.errno if isinstance(exc.errno, int) else getattr(exc.__context__, "errno", None)
        if code in (errno.ENOENT, errno.ENODEV, errno.ENXIO):
            raise UserError(
                f"serial port {port} not found: connect the board, see `etk ports` "
                f"for the ports present, or pass --port"
            ) from None
        if code in (errno.EACCES, errno.EPERM):
            raise UserError(
                f"no permission to open serial port {port}: add yourself to its "
                f"group (often 'dialout') and log in again"
            ) from None
        if code in (errno.EAGAIN, errno.EWOULDBLOCK, errno.EBUSY):
            raise _busy(port, str(exc)) from None
        raise UserError(f"cannot open serial port {port}: {exc}") from None
    held = holders(port)
    if held:  # terminals that do not take the lock would silently share the board's output
        link.close()
        raise _busy(port, "it would receive part of the board's output")
    return link


def reopen_port(port: str, baud: int, time_limit_s: float):
    """Wait for a port that went away (USB re-enumeration) to come back, then open it."""
    deadline = time.monotonic() + time_limit_s
    while True:
        try:
            return open_port(port, baud)
        except UserError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
