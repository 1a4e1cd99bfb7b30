"""The local pool's worker process: runs what the parent sends, sends back the record.

The forkserver preloads this module, so torch and ExecuTorch are imported once, not per worker.
"""

from __future__ import annotations

import signal
from multiprocessing.connection import Connection

from ..child_process import end_with
from ..console_capture import quiet_torch_import

quiet_torch_import()
import torch  # noqa: E402

from .runs import execute_run, import_run_dependencies  # noqa: E402

import_run_dependencies()


def worker_main(conn: Connection, out_root: str, bench: int) -> None:
    """bench: the pid of `etk bench`; when it dies, however it dies, this worker ends too: a run
    left going has no one to report to."""
    end_with(bench)
    # Ctrl-C reaches the whole process group; the parent decides what to keep and stops us.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    torch.set_num_threads(1)  # N workers on N cores; more threads only contend
    while True:
        try:
            spec = conn.recv()
            if spec is None:
                return
            conn.send(execute_run(spec, out_root))
        except (EOFError, BrokenPipeError, ConnectionResetError):
            return  # etk bench is gone: nothing to report to
