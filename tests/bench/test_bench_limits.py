"""What a suite may ask is capped, a suite file or results.jsonl that is not what etk wrote is one
line (exit 2), SIGTERM keeps what finished, and a worker does not outlive a killed `etk bench`.

On main: eval_samples = 10**29 grew a worker without end; a TOML file nested 60,000 deep, or with
a 5,000-digit integer, and a results.jsonl line that is an array or has no schema were tracebacks;
SIGTERM printed no "interrupted" line; a SIGKILLed bench left its worker running.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from toolkit.cli import main
from toolkit.job import MAX_SAMPLES, MAX_SEED

from .helpers import records, write_suite


def _one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err.strip()


@pytest.mark.parametrize(
    "setting, value, expected",
    [
        ("eval_samples", "100000000000000000000000000000", f"expected 1 to {MAX_SAMPLES:,}"),
        ("calibration_samples", "1000000", f"expected 1 to {MAX_SAMPLES:,}"),
        ("seed", "-1", f"expected 0 to {MAX_SEED:,}"),
        ("seed", str(2**64), f"expected 0 to {MAX_SEED:,}"),
    ],
)
def test_a_suite_asking_too_much_is_refused(tmp_path, capsys, setting, value, expected):
    suite = write_suite(tmp_path / "s.toml", models=["zoo:conv2d_relu"], fusion=["on"])
    text = suite.read_text()
    start = text.index(f"{setting} = ")
    suite.write_text(text[:start] + f"{setting} = {value}" + text[text.index("\n", start) :])
    assert main(["bench", str(suite), "--out", str(tmp_path / "out")]) == 2
    assert _one_line(capsys) == (
        f"etk: error: suite file {suite}: key 'settings.{setting}' is {value}, {expected}"
    )
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "flag, value, name",
    [
        ("--eval-samples", str(10**29), "--eval-samples"),
        ("--calibration-samples", "20000", "--calibration-samples"),
        ("--seed", str(2**40), "--seed"),
        ("--seeds", "5000", "--seeds"),
    ],
)
def test_the_command_line_asking_too_much_is_refused(tmp_path, capsys, flag, value, name):
    assert main(["compile", "zoo:conv2d_relu", "-o", str(tmp_path / "o"), flag, value]) == 2
    assert _one_line(capsys).startswith(f"etk: error: {name} {value} is out of range: give ")


@pytest.mark.parametrize(
    "text, problem",
    [
        ("a = " + "[" * 60_000 + "]" * 60_000 + "\n", "nested too deeply"),
        ("seed = " + "7" * 5000 + "\n", "an integer of 5,000 digits (TOML integers are 64-bit)"),
    ],
)
def test_a_hostile_toml_file_is_one_line(tmp_path, capsys, text, problem):
    suite = tmp_path / "s.toml"
    suite.write_text('models = ["zoo:conv2d_relu"]\n' + text)
    assert main(["bench", str(suite), "--out", str(tmp_path / "out")]) == 2
    assert _one_line(capsys) == f"etk: error: suite file {suite} is not valid TOML: {problem}"
    target = tmp_path / "t.toml"
    target.write_text(text)
    assert main(["compile", "zoo:conv2d_relu", "--target", str(target), "-o", str(tmp_path)]) == 2
    assert _one_line(capsys) == f"etk: error: target file {target} is not valid TOML: {problem}"


@pytest.mark.parametrize(
    "line, what",
    [
        ("[1, 2, 3]", "a JSON array, not a record"),
        ('{"key": "k", "label": "l", "spec": {}, "status": "ok"}', "no 'schema'"),
        ('{"schema": 1, "key": 5, "label": "l", "spec": {}, "status": "ok"}', "'key' is int"),
    ],
)
def test_a_results_line_that_is_no_record_is_one_line(tmp_path, capsys, line, what):
    suite = write_suite(tmp_path / "s.toml", models=["zoo:conv2d_relu"], fusion=["on"])
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.jsonl").write_text(line + "\n")
    expected = (
        f"etk: error: {out / 'results.jsonl'} line 1 is not a bench record ({what}): etk bench "
        "did not write it; move the file away or choose another --out"
    )
    assert main(["report", str(out)]) == 2
    assert _one_line(capsys) == expected
    assert main(["bench", str(suite), "--out", str(out), "--resume"]) == 2
    assert _one_line(capsys) == expected


GATED = """
import os, time
from pathlib import Path
import torch

def example_inputs():
    return (torch.randn(1, 16),)

def net():
    Path({pid!r}).write_text(str(os.getpid()))
    deadline = time.monotonic() + {hold_s}
    while not Path({gate!r}).exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    return torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU())
"""


def _gated_suite(tmp_path: Path, hold_s: int, models=()) -> tuple[Path, Path, Path]:
    gated = tmp_path / "gated.py"
    pid, gate = tmp_path / "worker.pid", tmp_path / "gate"
    gated.write_text(GATED.format(pid=str(pid), gate=str(gate), hold_s=hold_s))
    suite = write_suite(
        tmp_path / "s.toml",
        models=[*models, f"{gated}:net"],
        npus=["ethos-u55-128"],
        fusion=["on"],
    )
    return suite, pid, gate


def _start_bench(suite: Path, out: Path, jobs: int = 1) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "toolkit.cli",
            "bench",
            str(suite),
            "-j",
            str(jobs),
            "--out",
            str(out),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # a signal to the test's group does not reach it
    )


def _wait_for(path: Path, process: subprocess.Popen, timeout_s: float = 240) -> None:
    deadline = time.monotonic() + timeout_s
    while not (path.exists() and path.read_text().strip()):
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, f"no {path} in {timeout_s} s"
        time.sleep(0.2)


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def test_sigterm_says_interrupted_and_keeps_the_finished_run(tmp_path):
    broken = tmp_path / "broken.py"  # a run that finishes at once (failed), recorded as any run
    broken.write_text("def net():\n    raise ValueError('broken on purpose')\n")
    suite, pid_file, gate = _gated_suite(tmp_path, 120, models=[f"{broken}:net"])
    out = tmp_path / "out"
    process = _start_bench(suite, out, jobs=2)
    try:
        _wait_for(out / "results.jsonl", process)  # one run finished; the gated one holds
        _wait_for(pid_file, process)
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=60)
    finally:
        gate.touch()
        if process.poll() is None:
            process.kill()
    assert process.returncode == 128 + signal.SIGTERM, err
    assert "Traceback" not in err
    assert (
        f"interrupted (SIGTERM): 1 runs are recorded in {out}; continue with etk bench {suite} "
        f"--out {out} --resume" in err
    )
    assert [(r["spec"]["model"], r["status"]) for r in records(out)] == [
        (f"{broken}:net", "failed")
    ]


@pytest.mark.skipif(sys.platform != "linux", reason="the kernel's parent-death signal")
def test_a_worker_ends_with_a_killed_bench(tmp_path):
    suite, pid_file, gate = _gated_suite(tmp_path, 300)
    process = _start_bench(suite, tmp_path / "out")
    worker = None
    try:
        _wait_for(pid_file, process)
        worker = int(pid_file.read_text())
        process.kill()  # SIGKILL: no cleanup runs in etk bench
        process.communicate(timeout=30)
        deadline = time.monotonic() + 30
        while _running(worker) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _running(worker), "the worker outlived its bench"
    finally:
        gate.touch()
        if process.poll() is None:
            process.kill()
        if worker is not None and _running(worker):
            os.kill(worker, signal.SIGKILL)
