"""A farm worker process: one per place, runs what the parent sends on its board.

The forkserver preloads this module, so torch and ExecuTorch are imported once.
"""

from __future__ import annotations

import os
import signal
from multiprocessing.connection import Connection

from ..console_capture import quiet_torch_import

quiet_torch_import()
import torch  # noqa: E402

from ..bench.runs import execute_run, import_run_dependencies  # noqa: E402
from .lease import LEASE_ENV, PlaceLease, reachable  # noqa: E402

import_run_dependencies()


def farm_worker_main(conn: Connection, out_root: str, lease_json: str) -> None:
    """Each run's record goes back with whether the place was lost during it: a failed run
    whose board no longer answers is run again on another place."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides what to keep
    torch.set_num_threads(1)
    os.environ[LEASE_ENV] = lease_json
    lease = PlaceLease.from_json(lease_json)
    while True:
        spec = conn.recv()
        if spec is None:
            return
        record = execute_run(spec, out_root)
        conn.send((record, not record.ok and not reachable(lease)))
