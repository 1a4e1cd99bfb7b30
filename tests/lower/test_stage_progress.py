"""etk's stage display (cli/common.stage_progress): each stage with its elapsed time on a terminal,
nothing in a pipe."""

from __future__ import annotations

import io
import re
import time

from rich.console import Console

from toolkit.cli.common import stage_progress


def test_each_stage_ends_as_a_line_with_its_time_on_a_terminal():
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=100)
    with stage_progress(console) as stage:
        stage("loading zoo:ds_cnn")
        stage("compiling fused and unfused for ethos-u55-128")
        time.sleep(1.1)
    final = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.getvalue()).split("\r")[-1]
    lines = [line.strip() for line in final.splitlines() if line.strip()]
    assert re.fullmatch(r"\.\.\. loading zoo:ds_cnn +0:00:00", lines[0])
    assert re.fullmatch(r"\.\.\. compiling fused and unfused for ethos-u55-128 +0:00:01", lines[1])
    assert len(lines) == 2


def test_a_pipe_gets_no_progress():
    out = io.StringIO()
    with stage_progress(Console(file=out, force_terminal=False)) as stage:
        stage("loading zoo:ds_cnn")
    assert out.getvalue() == ""
