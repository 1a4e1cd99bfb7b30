"""An interrupted suite loses nothing finished; --resume completes it with each run once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from toolkit.bench.results import run_key
from toolkit.bench.suite import load_suite
from toolkit.cli import main

from .helpers import records, write_suite


def _wait_for_records(path, count, process, timeout_s=240):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and len(path.read_text().splitlines()) >= count:
            return
        assert process.poll() is None, process.communicate()
        time.sleep(0.2)
    raise AssertionError(f"no {count} records in {timeout_s} s")


GATED = """
import time
from pathlib import Path
import torch

def example_inputs():
    return (torch.randn(1, 16),)

def net():
    deadline = time.monotonic() + 120
    while not Path({gate!r}).exists() and time.monotonic() < deadline:
        time.sleep(0.1)  # held until the test opens the gate: the suite is surely unfinished
    return torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU())
"""


def test_sigint_then_resume_keeps_each_finished_run_once(tmp_path):
    gate, gated = tmp_path / "gate", tmp_path / "gated.py"
    gated.write_text(GATED.format(gate=str(gate)))
    suite = write_suite(
        tmp_path / "s.toml",
        models=["zoo:linear_relu6", f"{gated}:net"],
        npus=["ethos-u55-128", "ethos-u55-256"],
        fusion=["on"],
    )
    out = tmp_path / "out"
    # A shell starts background jobs with SIGINT ignored, and a child inherits that: give the
    # bench Python's own Ctrl-C handling, as in a terminal.
    process = subprocess.Popen(
        [sys.executable, "-m", "toolkit.cli", "bench", str(suite), "-j", "2", "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    _wait_for_records(out / "results.jsonl", 1, process)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    assert "--resume" in err
    before = (out / "results.jsonl").read_text().splitlines()
    expected = {run_key(s) for s in load_suite(suite).runs()}
    assert 1 <= len(before) <= 2 < len(expected)  # the gated runs cannot have finished

    gate.touch()
    assert main(["bench", str(suite), "-j", "2", "--out", str(out), "--resume"]) == 0
    after = (out / "results.jsonl").read_text().splitlines()
    assert after[: len(before)] == before  # finished runs untouched
    keys = [r["key"] for r in records(out)]
    assert sorted(keys) == sorted(expected)  # each run exactly once, the rest completed
    assert all(r["status"] == "ok" for r in records(out))


KILLER = """
import os, signal
from pathlib import Path
import torch

MARK = Path({mark!r})

def example_inputs():
    return (torch.randn(1, 16),)

def {name}():
    if {always} or not MARK.exists():
        MARK.touch()
        os.kill(os.getpid(), signal.SIGKILL)  # the worker dies in the middle of this run
    return torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU())
"""


def test_killed_worker_loses_nothing_and_its_run_is_retried(tmp_path):
    once, always = tmp_path / "once.py", tmp_path / "always.py"
    once.write_text(KILLER.format(mark=str(tmp_path / "once.mark"), name="net", always=False))
    always.write_text(KILLER.format(mark=str(tmp_path / "always.mark"), name="net", always=True))
    models = [f"{once}:net", "zoo:linear_relu6", f"{always}:net"]
    suite = write_suite(tmp_path / "s.toml", models=models, npus=["ethos-u55-128"], fusion=["on"])
    out = tmp_path / "out"
    assert main(["bench", str(suite), "-j", "2", "--out", str(out)]) == 1  # a run failed
    recs = {r["spec"]["model"]: r for r in records(out)}
    assert len(records(out)) == 3 and set(recs) == set(models)
    assert recs[f"{once}:net"]["status"] == "ok"  # retried on a fresh worker
    assert recs["zoo:linear_relu6"]["status"] == "ok"
    assert recs[f"{always}:net"]["status"] == "failed"
    assert "worker process died 2 times" in recs[f"{always}:net"]["reason"]
    assert f"exit code {-signal.SIGKILL}" in recs[f"{always}:net"]["reason"]
    # --resume runs the failed one again (and only it): its newest record wins
    assert main(["bench", str(suite), "--out", str(out), "--resume"]) == 1  # and fails again
    assert [r["spec"]["model"] for r in records(out)][3:] == [f"{always}:net"]
    assert os.path.exists(tmp_path / "always.mark")
