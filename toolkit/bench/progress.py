"""The suite's progress bar: done, failed, remaining and time left."""

from __future__ import annotations

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from .record import BenchRecord


class BenchProgress:
    def __init__(self, total: int, console: Console):
        self.total, self.done, self.failed = total, 0, 0
        self.console = console
        self._progress = Progress(
            TextColumn("[bold]bench"),
            BarColumn(),
            TextColumn(
                "{task.fields[done]} done, [red]{task.fields[failed]} failed[/red], "
                "{task.fields[remaining]} remaining"
            ),
            TimeElapsedColumn(),
            TextColumn("left"),
            TimeRemainingColumn(),
            console=console,
            transient=False,
        )
        self._task = self._progress.add_task(
            "bench", total=total, done=0, failed=0, remaining=total
        )

    def __enter__(self) -> BenchProgress:
        self._progress.start()
        return self

    def __exit__(self, *exc) -> None:
        self._progress.stop()

    def record(self, record: BenchRecord) -> None:
        self.done += 1
        if not record.ok:
            self.failed += 1
            self._progress.console.print(
                f"FAILED {record.label}: {record.reason}", markup=False, highlight=False
            )
        self._progress.update(
            self._task,
            advance=1,
            done=self.done,
            failed=self.failed,
            remaining=self.total - self.done,
        )
