"""The one report writer: report.json (docs/report-format.md) and report.md of a job's result,
for the CLI, the Python API and bench runs alike (pipeline.run_job calls it once per job)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .job_report import report_dict
from .json_report import write_json_atomic
from .tables import write_markdown

if TYPE_CHECKING:
    from ..results import JobResult


def write_reports(result: JobResult) -> None:
    """result.report_path (report.json) and report.md beside it."""
    write_json_atomic(result.report_path, report_dict(result))
    write_markdown(result, result.report_path.with_name("report.md"))
