"""evaluate() needs a target; evaluate_on_host() takes only runners that need none (mypy says so)."""

from __future__ import annotations

from pathlib import Path

from mypy import api

ROOT = Path(__file__).resolve().parents[2]
SNIPPET = """
import numpy as np
from toolkit.artifacts import Program
from toolkit.evaluation.evaluate import evaluate, evaluate_on_host
from toolkit.runners.fvp import FvpRunner
from toolkit.runners.sim import SimulatorRunner
from toolkit.runners.tosa_ref import TosaReferenceRunner
from toolkit.targets import Target

def check(program: Program, target: Target, x: list[tuple[np.ndarray, ...]], fvp: FvpRunner):
    evaluate_on_host(program, TosaReferenceRunner(), x, x)
    evaluate_on_host(program, SimulatorRunner(), x, x)
    evaluate(program, TosaReferenceRunner(), x, x, target)
    evaluate(program, fvp, x, x, target)
    evaluate_on_host(program, fvp, x, x)
    evaluate(program, SimulatorRunner(), x, x, None)
"""


def test_a_runner_that_needs_a_target_is_refused_on_the_host(tmp_path, monkeypatch):
    snippet = tmp_path / "snippet.py"
    snippet.write_text(SNIPPET)
    monkeypatch.chdir(ROOT)  # mypy finds toolkit/ and its cache here
    stdout, _, status = api.run(
        ["--config-file", "pyproject.toml", "--no-error-summary", str(snippet)]
    )
    errors = [line.split(": error: ")[1] for line in stdout.splitlines() if ": error: " in line]
    lines = [int(line.split(":")[1]) for line in stdout.splitlines() if ": error: " in line]
    assert errors == [
        'Argument 2 to "evaluate_on_host" has incompatible type "FvpRunner"; '
        'expected "HostRunner"  [arg-type]',
        'Argument 5 to "evaluate" has incompatible type "None"; expected "Target"  [arg-type]',
    ], stdout
    assert lines == [15, 16]
    assert status == 1
