"""The terminal table and report.md rows of a fused vs unfused job, pinned exactly."""

from __future__ import annotations

import pytest
from rich.console import Console

from toolkit.job import Job
from toolkit.pipeline import run_job
from toolkit.report.tables import print_result, rows, write_markdown
from toolkit.runners.sim import SimulatorRunner

# zoo:conv2d_relu, corstone-300 (ethos-u55-128), calibration seed 0, 2 evaluation samples, sim;
# Vela 5.2.0 (5.1.0 compiled the same streams and estimated 5,728 NPU / 6,304 total cycles)
EXPECTED = [
    ["delegates", "1", "1", ""],
    ["CPU operators", "0", "0", ""],
    ["TOSA CLAMP ops", "0", "1", ""],
    ["TOSA RESCALE ops", "1", "1", ""],
    ["NPU operations (command stream)", "42", "42", "0"],
    ["NPU cycles (Vela estimate)", "4,832", "4,832", "0"],
    ["total cycles (Vela estimate)", "5,408", "5,408", "0"],
    ["activations fused", "1", "0", ""],
    ["SQNR vs float (dB, sim)", "39.51", "37.69", "1.82"],
    ["max |err| vs float (LSB)", "3.25", "1.62", ""],
    ["NPU compute cycles, op sum (sim, simulated)", "46,448", "46,448", "0"],
    ["NPU TOTAL, PMU prediction (sim, simulated)", "46,448", "46,084", "364"],
    ["  sim / Vela estimate (total)", "8.589x", "8.521x", ""],
    ["outputs == host reference", "yes", "yes", ""],
    ["max diff vs host reference (LSB)", "0.00", "0.00", ""],
]


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    out = tmp_path_factory.mktemp("tables")
    return run_job(
        Job(model="zoo:conv2d_relu", out_dir=out, eval_samples=2), runner=SimulatorRunner()
    )


def test_rows_pinned(result):
    header, table = rows(result)
    assert header == ["", "fused", "unfused", "delta (fused - unfused)"]
    assert table == EXPECTED


def test_report_md_has_the_same_rows(result, tmp_path):
    path = tmp_path / "report.md"
    write_markdown(result, path)
    lines = path.read_text().splitlines()
    start = lines.index("|  | fused | unfused | delta (fused - unfused) |")
    assert lines[start + 1] == "|---|---|---|---|"
    assert lines[start + 2 : start + 2 + len(EXPECTED)] == [
        "| " + " | ".join(row) + " |" for row in EXPECTED
    ]


def test_terminal_table_shows_each_row_in_order(result):
    console = Console(record=True, width=160)
    print_result(result, console)
    text = console.export_text()
    first_table = text.split("└", 1)[0]  # the costliest layers' table follows it
    lines = [line for line in first_table.splitlines() if line.startswith("│")]
    cells = [[c.strip() for c in line.strip("│").split("│")] for line in lines]
    assert cells == [[c.strip() for c in row] for row in EXPECTED]
    assert text.rstrip().endswith(f"report: {result.report_path}")
