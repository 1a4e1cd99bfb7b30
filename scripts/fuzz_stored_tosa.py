"""Mutate the .tosa file of a stored program N times, re-seal program.json's checksums as an attacker
with write access to a shared ETK_CACHE_DIR would, and do what etk does with the entry: load it
(`load_stored_program`, which probes each .tosa in a child) and, if accepted, run every delegate on
the TOSA reference model in this process. The figure that matters is how many mutations kill the
process with a signal: it must be 0 (issue 45's goal: "no signal, each one line or derived again").

    python scripts/fuzz_stored_tosa.py --mutations 500 --seed 7

Mutations run in a worker process; if one dies, the next worker resumes after it, so a crash is
counted, named and does not end the run.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

MODEL = "zoo:conv2d_relu"


def compile_once(folder: Path) -> Path:
    from toolkit.lower.build_variant import compile_variant
    from toolkit.models.loader import load_model
    from toolkit.quantize.calibration import random_calibration
    from toolkit.targets import load_target

    model = load_model(MODEL)
    npu = load_target("corstone-300").npu()
    compile_variant(model, random_calibration(model.example_inputs, 4, 0), "fused", npu, folder)
    return folder / "fused"


def mutate(stored: Path, into: Path, rng: random.Random) -> None:
    from toolkit.lower.program_store import PROGRAM_FILE, _checksums

    shutil.rmtree(into, ignore_errors=True)
    shutil.copytree(stored, into)
    for tosa in sorted(into.glob("*.tosa")):
        data = bytearray(tosa.read_bytes())
        for _ in range(rng.choice((1, 1, 2, 4))):
            pos = rng.randrange(len(data))
            data[pos] = rng.choice((0, 1, 4, 0x7F, 0x80, 0xFF, rng.randrange(256)))
        tosa.write_bytes(bytes(data))
    program = json.loads((into / PROGRAM_FILE).read_text())
    program["files"] = _checksums(into)
    (into / PROGRAM_FILE).write_text(json.dumps(program))


def outcome(folder: Path) -> str:
    """What etk makes of the entry: 'damaged' (derived again), 'ran' or 'error' (a ToolError)."""
    import numpy as np

    from toolkit.errors import ToolError
    from toolkit.lower.program_store import StoreDamaged, load_stored_program
    from toolkit.lower.tosa_probe import _input_arrays
    from toolkit.runners.tosa_ref import run_tosa_delegate

    try:
        program = load_stored_program(folder)
    except StoreDamaged:
        return "damaged"
    assert program is not None
    rng = np.random.default_rng(0)
    try:
        for delegate in program.delegates:
            assert delegate.tosa_path is not None
            shapes = _input_arrays(delegate.tosa_path.read_bytes())
            inputs = [rng.integers(-128, 128, a.shape).astype(a.dtype) for a in shapes]
            run_tosa_delegate(delegate, inputs)
    except ToolError:
        return "error"
    return "ran"


def worker(stored: Path, scratch: Path, seed: int, start: int, count: int) -> None:
    rng = random.Random(seed)
    for index in range(count):
        folder = scratch / "entry"
        mutate(stored, folder, rng)  # the generator advances for skipped ones too: same mutations
        if index < start:
            continue
        print(f"start {index}", flush=True)
        print(f"done {index} {outcome(folder)}", flush=True)


def run(mutations: int, seed: int) -> Counter:
    counts: Counter = Counter()
    with tempfile.TemporaryDirectory(prefix="etk-fuzz-") as tmp:
        scratch = Path(tmp)
        stored = compile_once(scratch / "compiled")
        start = 0
        while start < mutations:
            child = subprocess.run(
                [sys.executable, __file__, "--worker", str(stored), str(scratch)]
                + ["--seed", str(seed), "--start", str(start), "--mutations", str(mutations)],
                capture_output=True,
                text=True,
            )
            last = start
            for line in child.stdout.splitlines():
                word, index, *rest = line.split(maxsplit=2)
                last = int(index)
                if word == "done":
                    counts[rest[0]] += 1
            if child.returncode != 0:
                counts[f"signal/exit {child.returncode}"] += 1
                print(f"mutation {last}: worker ended with {child.returncode}", flush=True)
                start = last + 1
            else:
                start = mutations
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mutations", type=int, default=500)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--worker", nargs=2, metavar=("STORED", "SCRATCH"))
    args = parser.parse_args()
    if args.worker:
        worker(Path(args.worker[0]), Path(args.worker[1]), args.seed, args.start, args.mutations)
        return
    counts = run(args.mutations, args.seed)
    for what, number in sorted(counts.items()):
        print(f"{what:>24}: {number}")
    crashes = sum(n for what, n in counts.items() if what.startswith("signal"))
    print(f"{'killed by a signal':>24}: {crashes} of {args.mutations}")


if __name__ == "__main__":
    main()
