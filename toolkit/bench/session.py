"""`etk bench`: the suite's runs not yet recorded, on the local pool or Dask, into DIR."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from ..errors import UserError
from ..output_folder import locked_output_folder
from ..report.json_report import write_json_atomic
from .baseline import BASELINE_NAME, baseline_from_records
from .progress import BenchProgress
from .record import BenchRecord
from .results import (
    RESULTS_NAME,
    append_record,
    finished_keys,
    latest,
    read_records,
    repair_torn_tail,
    run_key,
)
from .suite import Suite

if TYPE_CHECKING:
    from ..farm.pool import FarmOptions


@dataclass(frozen=True)
class BenchOutcome:
    total: int  # runs in the suite
    skipped: int  # already recorded (--resume)
    ran: int
    failed: int  # of the runs made now
    results: Path


def run_suite(
    suite: Suite,
    out: Path,
    jobs: int = 1,
    resume: bool = False,
    scheduler: str | None = None,
    console: Console | None = None,
    farm: FarmOptions | None = None,
) -> BenchOutcome:
    console = console or Console(stderr=True)
    if farm is None and any(s.runner == "farm" for s in suite.runs()):
        raise UserError(
            f"{suite.source} runs on a board farm (runner 'farm'): pass --coordinator "
            "HOST:PORT of the labgrid coordinator (or set LG_COORDINATOR)"
        )
    with locked_output_folder(out, "bench folder"):
        return _run_suite(suite, out, jobs, resume, scheduler, console, farm)


def _dispatch(todo, out_root: str, jobs: int, scheduler, farm, on_record) -> None:
    """Farm runs to the labgrid places, the others to the local pool or Dask."""
    on_farm = [s for s in todo if s.runner == "farm"]
    rest = [s for s in todo if s.runner != "farm"]
    if on_farm and farm is not None:
        from ..farm.pool import run_farm

        run_farm(on_farm, out_root, farm, on_record)
    if scheduler and rest:
        from .dask_pool import run_dask

        run_dask(rest, out_root, scheduler, on_record)
    elif rest:
        from .pool import run_local

        run_local(rest, out_root, jobs, on_record)


def _run_suite(
    suite: Suite,
    out: Path,
    jobs: int,
    resume: bool,
    scheduler: str | None,
    console: Console,
    farm: FarmOptions | None,
) -> BenchOutcome:
    specs = suite.runs()
    results = out / RESULTS_NAME
    torn = repair_torn_tail(results)
    if torn:
        console.print(
            f"note: {results} ended in a torn line ({torn} bytes, from a run killed "
            f"while writing it): moved to {results.name}.torn; that run runs again",
            markup=False,
            highlight=False,
        )
    previous = read_records(results)
    if previous and not resume:
        raise UserError(
            f"{results} already holds {len(previous)} runs: pass --resume to "
            "continue that suite, or choose another --out"
        )
    done = finished_keys(previous)
    todo = [s for s in specs if run_key(s) not in done]
    if suite.source.resolve() != (out / "suite.toml").resolve():
        shutil.copyfile(suite.source, out / "suite.toml")
    console.print(
        f"{suite.name}: {len(specs)} runs, {len(specs) - len(todo)} already recorded, "
        f"{len(todo)} to run" + (f" on {scheduler}" if scheduler else f" with -j {jobs}"),
        markup=False,
        highlight=False,
    )
    failed = 0
    with BenchProgress(len(todo), console) as progress:

        def on_record(record: BenchRecord) -> None:  # written first: an interrupt loses nothing
            nonlocal failed
            append_record(results, record)
            failed += not record.ok
            progress.record(record)

        _dispatch(todo, str(out.resolve()), jobs, scheduler, farm, on_record)
    keys = {run_key(s) for s in specs}
    newest = [r for k, r in latest(read_records(results)).items() if k in keys]
    write_json_atomic(out / BASELINE_NAME, baseline_from_records(newest))
    return BenchOutcome(len(specs), len(specs) - len(todo), len(todo), failed, results)
