"""One run per output folder at a time, and only what etk wrote is ever replaced."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from toolkit.cli import main
from toolkit.lower.staging import MARKER
from toolkit.output_folder import locked_output_folder

ETK = [sys.executable, "-m", "toolkit.cli"]


def test_a_held_folder_is_refused_with_the_holders_pid(tmp_path, capsys):
    out = tmp_path / "out"
    with locked_output_folder(out):
        code = main(["compile", "zoo:conv2d_relu", "-o", str(out), "--eval-samples", "1"])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err == (
        f"etk: error: output folder {out} is in use by pid {os.getpid()} (another etk "
        "run): wait for it to finish or choose another folder"
    )
    assert sorted(p.name for p in out.iterdir()) == [".etk.lock"]


def test_two_concurrent_compiles_into_one_folder(tmp_path):
    out = tmp_path / "out"
    argv = [*ETK, "compile", "zoo:conv2d_relu", "-o", str(out), "--eval-samples", "1"]
    procs = [
        subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    results = [(p.wait(timeout=600), p.stderr.read().strip()) for p in procs]
    codes = sorted(code for code, _ in results)
    assert codes in ([0, 0], [0, 2]), results  # the second waits for nothing: it refuses
    for code, err in results:
        if code == 2:
            assert len(err.splitlines()) == 1 and "is in use by pid" in err
        else:
            assert "Traceback" not in err
    report = json.loads((out / "report.json").read_text())
    assert list(report["variants"]) == ["fused"]
    assert sorted(p.name for p in out.iterdir()) == [
        ".etk.lock",
        "fused",
        "report.html",
        "report.json",
        "report.md",
    ]
    assert (out / "fused" / MARKER).is_file() and (out / "fused" / "model.pte").is_file()


def test_a_users_own_folder_is_never_deleted(tmp_path, capsys):
    out = tmp_path / "out"
    mine = out / "fused"
    mine.mkdir(parents=True)
    (mine / "notes.txt").write_text("my notes")
    code = main(["compile", "zoo:conv2d_relu", "-o", str(out), "--eval-samples", "1"])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err == (
        f"etk: error: {mine} exists and was not written by etk (no {MARKER} marker): "
        "move it away or choose another output folder; etk does not delete it"
    )
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]
    assert (mine / "notes.txt").read_text() == "my notes"
    assert not list(out.glob(".*partial*"))
