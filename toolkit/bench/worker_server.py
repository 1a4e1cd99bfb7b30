"""The forkserver every `etk bench` worker (local pool or farm place) is forked from.

It preloads the worker modules, so torch, ExecuTorch and the BundleIO writer are imported once
(seconds), not by each worker; `etk bench` starts it before anything else, so that import goes on
while the parent starts (its own torch import, the suite, the farm's reservations).
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.forkserver
from multiprocessing.context import ForkServerContext

PRELOAD = ["toolkit.bench.worker", "toolkit.farm.worker"]


def worker_context() -> ForkServerContext:
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    return ctx


def start_worker_server() -> None:
    worker_context()
    multiprocessing.forkserver.ensure_running()
