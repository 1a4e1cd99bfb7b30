"""The local worker pool: -j N processes, one run at a time each, records back to the parent.

The parent hands each run to one worker over that worker's pipe, so when a worker dies (killed,
out of memory, a crash in native code) it knows which run was lost: that run is tried once more
on a fresh worker, and recorded as failed if its worker dies again.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait

from .record import BenchRecord
from .results import lost_run_record
from .suite import RunSpec
from .worker_server import worker_context

OnRecord = Callable[[BenchRecord], None]
ATTEMPTS = 2


@dataclass
class _Worker:
    process: multiprocessing.process.BaseProcess
    conn: Connection
    spec: RunSpec | None = None


def _start(ctx, out_root: str) -> _Worker:
    from .worker import worker_main

    parent, child = ctx.Pipe()
    process = ctx.Process(target=worker_main, args=(child, out_root, os.getpid()), daemon=True)
    process.start()
    child.close()
    return _Worker(process, parent)


def run_local(specs: Sequence[RunSpec], out_root: str, jobs: int, on_record: OnRecord) -> None:
    ctx = worker_context()
    queue = list(reversed(specs))
    attempts: dict[RunSpec, int] = {}
    workers = [_start(ctx, out_root) for _ in range(max(1, min(jobs, len(specs))))]
    try:
        while True:
            _hand_out(workers, queue, attempts)
            busy = [w for w in workers if w.spec is not None]
            if not busy:
                return
            wait([w.conn for w in busy] + [w.process.sentinel for w in busy])
            for i, worker in enumerate(workers):
                if worker.spec is not None and not _receive(worker, on_record):
                    if not worker.process.is_alive():
                        _requeue_or_lose(worker, queue, attempts, on_record)
                        workers[i] = _start(ctx, out_root)
    except KeyboardInterrupt:
        for worker in workers:  # keep what finished between the last wait and the interrupt
            if worker.spec is not None:
                _receive(worker, on_record)
        raise
    finally:
        _stop(workers)


def _hand_out(workers: list[_Worker], queue: list[RunSpec], attempts: dict[RunSpec, int]) -> None:
    """The next queued run to each idle worker."""
    for worker in workers:
        if worker.spec is None and queue:
            worker.spec = queue.pop()
            attempts[worker.spec] = attempts.get(worker.spec, 0) + 1
            worker.conn.send(worker.spec)


def _requeue_or_lose(
    worker: _Worker, queue: list[RunSpec], attempts: dict[RunSpec, int], on_record: OnRecord
) -> None:
    """A worker died on its run: the run goes back in the queue, or after ATTEMPTS is lost."""
    worker.process.join()
    spec = worker.spec
    assert spec is not None
    if attempts[spec] < ATTEMPTS:
        queue.append(spec)
        return
    on_record(
        lost_run_record(
            spec,
            f"worker process died {ATTEMPTS} times on this run "
            f"(last exit code {worker.process.exitcode})",
        )
    )


def _receive(worker: _Worker, on_record: OnRecord) -> bool:
    try:
        if not worker.conn.poll():
            return False
        record = worker.conn.recv()
    except (EOFError, OSError):
        return False
    worker.spec = None
    on_record(record)
    return True


def _stop(workers: list[_Worker]) -> None:
    for worker in workers:
        if worker.process.is_alive() and worker.spec is None:
            try:
                worker.conn.send(None)
            except OSError:
                pass
    for worker in workers:
        worker.process.join(timeout=2 if worker.spec is None else 0)
        if worker.process.is_alive():
            worker.process.terminate()
            worker.process.join(timeout=5)
        if worker.process.is_alive():
            worker.process.kill()
            worker.process.join()
        worker.conn.close()
