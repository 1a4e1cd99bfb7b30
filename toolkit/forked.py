"""Work done in a forked child of this process while this process does its own share.

A fork inherits the imported modules and the loaded objects (no second import of torch and
ExecuTorch, no model loaded again), so the work is a plain closure. Its result, or the exception
it raised, comes back through a pipe; a child that dies first is a ToolError naming its exit code.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
from collections.abc import Callable
from typing import Any

from .child_process import end_with_parent
from .errors import ToolError


def can_fork_a_worker() -> bool:
    """Two CPUs or more, and a process that may fork a child of its own (not a daemon one)."""
    return (
        (os.cpu_count() or 1) >= 2
        and "fork" in multiprocessing.get_all_start_methods()
        and not multiprocessing.current_process().daemon
    )


def _child(connection, work: Callable[[], Any], parent: int) -> None:
    end_with_parent(parent)
    import torch

    # GNU OpenMP's worker threads do not survive a fork: a parallel region in the child would
    # wait for them forever. One thread each, and the two processes use the two CPUs.
    torch.set_num_threads(1)
    try:
        connection.send(work())
    except BaseException as exc:  # noqa: BLE001 - re-raised in the parent
        try:
            connection.send(pickle.loads(pickle.dumps(exc)))
        except Exception:  # noqa: BLE001 - one that does not pickle (any type): its text
            connection.send(ToolError(f"{type(exc).__name__}: {exc}"))
    finally:
        connection.close()


class ForkedWork:
    """work() running in a forked child from construction; result() waits for it."""

    def __init__(self, work: Callable[[], Any], what: str):
        self.what = what  # "compiling the unfused variant": for the message if the child dies
        context = multiprocessing.get_context("fork")
        self._receive, send = context.Pipe(duplex=False)
        self._child = context.Process(target=_child, args=(send, work, os.getpid()), daemon=True)
        self._child.start()
        send.close()

    def result(self) -> Any:
        """work()'s value; its exception raised here."""
        try:
            outcome = self._receive.recv()
        except EOFError:  # the child died before it could report
            self._child.join()
            raise ToolError(
                f"{self.what} in a child process failed (exit code {self._child.exitcode})"
            ) from None
        self._child.join()
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def cancel(self) -> None:
        self._child.terminate()
        self._child.join()
