"""Seeded fuzzing of the files the simulator reads, run in a child process (a slip would be a
signal there): mutated Vela-compiled .tflite files loaded and run. Each mutant runs, or ends in
a SimError (the CLI's one line and exit 2); anything else fails the test with its traceback."""

from __future__ import annotations

import subprocess
import sys
import traceback
from pathlib import Path

import numpy as np
import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
ACC = "ethos-u55-128"
TFLITE_MUTANTS = 120


def vela_compiled_kws(folder: Path) -> Path:
    """KWS compiled by Vela's own command line for ACC: its .tflite in folder."""
    subprocess.run(
        [
            sys.executable,
            "-c",
            "from ethosu.vela.vela import main; main()",
            str(FIXTURES / "kws_ref_model.tflite"),
            "--accelerator-config",
            ACC,
            "--output-dir",
            str(folder),
        ],
        check=True,
        capture_output=True,
    )
    return folder / "kws_ref_model_vela.tflite"


def _outcome(run) -> str:
    from toolkit.sim.errors import SimError

    try:
        run()
    except SimError:
        return "refused"
    except Exception:  # noqa: BLE001 (what the test is for: nothing else may escape)
        traceback.print_exc()
        return "crashed"
    return "ran"


def _run_tflite(path: Path, x) -> None:
    from toolkit.sim import forget_programs, simulate
    from toolkit.sim.vela_tflite import load_compiled_tflite, run_graph

    forget_programs()
    graph = load_compiled_tflite(path)
    run_graph(graph, [x], lambda program, ins: list(simulate(program, ins, ACC).outputs))


def fuzz(folder: str, seed: int) -> None:
    work = Path(folder)
    source = vela_compiled_kws(work)
    data = source.read_bytes()
    x = np.random.default_rng(seed).integers(-128, 128, (1, 49, 10, 1), np.int8)
    rng = np.random.default_rng(seed)
    counts = {"ran": 0, "refused": 0, "crashed": 0}
    # the command stream and weights lie in the file's last buffers: mutate there mostly
    for k in range(TFLITE_MUTANTS):
        mutated = bytearray(data)
        for _ in range(int(rng.integers(1, 4))):
            at = int(rng.integers(len(data) // 2, len(data)))
            mutated[at] = int(rng.integers(0, 256))
        path = work / f"m{k}_vela.tflite"
        path.write_bytes(bytes(mutated))
        counts[_outcome(lambda path=path: _run_tflite(path, x))] += 1
    print(counts["ran"], counts["refused"], counts["crashed"])


if __name__ == "fuzz":
    fuzz(sys.argv[1], int(sys.argv[2]))


# 225 and 227 set a LUT operation's ACTIVATION_MAX below the table (an IndexError before)
@pytest.mark.parametrize("seed", [5, 225, 227])
def test_mutated_tflite_files_run_or_are_refused(tmp_path, seed):
    from .test_native_trust_boundary import run_fuzz_child  # here: the child runs no package

    done = run_fuzz_child(__file__, tmp_path, seed)
    assert done.returncode == 0, done.stderr[-3000:]
    ran, refused, crashed = (int(v) for v in done.stdout.split()[-3:])
    assert crashed == 0, done.stderr[-3000:]
    assert ran + refused == TFLITE_MUTANTS and ran > 0 and refused > 0
