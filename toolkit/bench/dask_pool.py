"""Running a suite on a Dask distributed cluster: `etk bench --scheduler tcp://host:port`.

Each run is one task; records come back to this process, which alone writes results.jsonl.
Workers need the same toolkit installed; run artifacts (.pte, Vela output) stay on the worker
that made them (the record names the host and folder).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..errors import UserError
from .record import BenchRecord
from .results import lost_run_record, run_key
from .suite import RunSpec

CONNECT_TIMEOUT_S = 10


def _task(spec: RunSpec, out_root: str) -> BenchRecord:
    from toolkit.bench.runs import execute_run

    return execute_run(spec, out_root)


def run_dask(
    specs: Sequence[RunSpec],
    out_root: str,
    address: str,
    on_record: Callable[[BenchRecord], None],
) -> None:
    try:
        from distributed import Client, as_completed
    except ImportError:
        raise UserError(
            "--scheduler needs Dask: pip install 'ethos-u-toolkit[distributed]'"
        ) from None
    try:
        client = Client(address, timeout=CONNECT_TIMEOUT_S)
    except OSError as exc:
        raise UserError(f"cannot reach the Dask scheduler at {address}: {exc}") from None
    try:
        futures = {
            client.submit(_task, spec, out_root, key=f"etk-run-{run_key(spec)}", pure=False): spec
            for spec in specs
        }
        try:
            for future in as_completed(futures):
                spec = futures[future]
                try:
                    record = future.result()
                except Exception as exc:  # KilledWorker and the like: the run failed, go on
                    record = lost_run_record(spec, f"Dask: {type(exc).__name__}: {exc}")
                on_record(record)
        except KeyboardInterrupt:
            client.cancel(list(futures))
            raise
    finally:
        client.close()
