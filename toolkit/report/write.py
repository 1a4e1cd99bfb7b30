"""The one report writer: report.json (docs/report-format.md), report.md and report.html (the
per-layer chart, when the result has per-layer records) of a job's result,
for the CLI, the Python API and bench runs alike (pipeline.run_job calls it once per job)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .job_html import write_job_html
from .job_report import report_dict
from .json_report import write_json_atomic
from .tables import write_markdown

if TYPE_CHECKING:
    from ..results import JobResult


def write_reports(result: JobResult) -> None:
    """result.report_path (report.json), report.md and report.html beside it."""
    report = report_dict(result)
    write_json_atomic(result.report_path, report)
    write_markdown(result, result.report_path.with_name("report.md"))
    write_job_html(result.report_path.with_name("report.html"), report)
