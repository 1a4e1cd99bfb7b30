"""`etk log`: a reference output that is not numbers, and a reader that stops reading, are one line.

On main a host reference `.npy` holding an object array was a numpy traceback ("Object arrays
cannot be loaded when allow_pickle=False"), and `etk log --json | head` a BrokenPipeError.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from toolkit.cli import main

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "stand_ins"))
from board_emulator import transcript


@pytest.fixture(scope="module")
def program(compiled):
    return compiled("zoo:conv2d_relu").variants["fused"].program


def _capture(tmp_path: Path, program) -> Path:
    outputs = [
        np.load(program.out_dir / "reference" / f"output_0_{i}.npy")
        for i in range(len(program.output_specs))
    ]
    capture = tmp_path / "uart.log"
    capture.write_bytes(b"".join(transcript(1000, outputs, passed=True)))
    return capture


@pytest.mark.parametrize(
    "array, problem",
    [
        (
            np.array([{"a": 1}, None], dtype=object),
            "is not a host reference output (Object arrays cannot be loaded when "
            "allow_pickle=False)",
        ),
        (np.array(["x", "y"]), "holds <U1 (2,), not the output's "),
    ],
)
def test_a_reference_output_that_is_not_numbers_is_one_line(
    tmp_path, capsys, program, array, problem
):
    copy = tmp_path / "fused"
    shutil.copytree(program.out_dir, copy)
    reference = copy / "reference" / "output_0_0.npy"
    np.save(reference, array, allow_pickle=True)
    capture = _capture(tmp_path, program)
    assert main(["log", str(capture), "--program", str(copy)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"etk: error: {reference} {problem}")


def test_a_reader_that_stops_early_is_one_line(tmp_path, program):
    capture = tmp_path / "uart.log"  # enough printed values for more JSON than a pipe holds
    capture.write_bytes(b"".join(transcript(1000, [np.zeros(30_000, np.int8)], passed=True)))
    process = subprocess.Popen(
        [sys.executable, "-m", "toolkit.cli", "log", str(capture), "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    head = process.stdout.read(100)  # `| head -c 100`
    process.stdout.close()
    err = process.stderr.read().decode()
    assert process.wait(timeout=60) == 2
    assert head.startswith(b"{")
    assert err == (
        "etk: error: the output was closed before etk finished writing it (a pipe's reader "
        "ended, as `| head` does): nothing else is wrong\n"
    )
