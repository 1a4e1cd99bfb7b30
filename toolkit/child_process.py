"""Child processes that end with their parent, however it dies (SIGKILL included)."""

from __future__ import annotations

import ctypes
import os
import select
import signal
import sys
import threading
import time

PR_SET_PDEATHSIG = 1  # linux/prctl.h


def end_with_parent(parent: int) -> None:
    """Linux: the kernel sends this process SIGTERM when its parent dies (SIGTERM's default
    action runs no Python cleanup, so the parent could not end it itself). parent: the pid the
    caller was started by; if it is gone already, this process ends now."""
    if sys.platform != "linux":
        return
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # it died before the request was made
        os._exit(1)


def alive(pid: int) -> bool:
    """Whether a process with this pid exists (someone else's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def end_with(pid: int) -> None:
    """This process gets SIGTERM when process pid ends, whichever process started this one: a
    thread waits on a pidfd (Linux 5.3+; elsewhere it looks every second). For a worker that a
    forkserver started: the forkserver outlives the process that asked for the worker (each
    worker holds the fd whose end would stop it), so its death tells nothing."""
    try:
        fd: int | None = os.pidfd_open(pid)
    except ProcessLookupError:
        os._exit(1)  # it is gone already
    except (AttributeError, OSError):
        fd = None
    threading.Thread(target=_watch, args=(pid, fd), name="etk-end-with", daemon=True).start()


def _watch(pid: int, fd: int | None) -> None:
    if fd is not None:
        select.select([fd], [], [])  # readable when the process has ended
    else:
        while alive(pid):
            time.sleep(1)
    os.kill(os.getpid(), signal.SIGTERM)
