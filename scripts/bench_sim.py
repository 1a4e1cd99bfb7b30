"""Simulator vs TOSA reference model: time per inference on zoo networks, and their ratio.

Each network is compiled through the project's own chain (toolkit.lower.compile.compile_variant),
so every delegate of the model runs, not just the first. Both sides run the same delegates on
the same int8 inputs (captured from one end-to-end run); the simulator's outputs are checked
against the reference model bit for bit, per delegate and end to end. Reported: the delegates
alone (the work the two engines do) and the whole model through the runners (CPU operators and
delegates, as `etk deploy` runs it).
Usage: python scripts/bench_sim.py [--accelerator ethos-u55-128] [--repeat 5] [zoo names...]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from toolkit.lower.compile import compile_variant
from toolkit.models.loader import load_model
from toolkit.npu import npu_config
from toolkit.quantize.calibration import random_calibration
from toolkit.runners.hybrid import execute
from toolkit.runners.sim import SimulatorRunner
from toolkit.runners.tosa_ref import TosaReferenceRunner, run_tosa_delegate
from toolkit.sim import load_payload, simulate


def _best(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def _delegate_inputs(program, inputs):
    """(delegate, its int8 inputs) for every delegate call of one end-to-end run."""
    calls = []

    def record(delegate, arrays):
        calls.append((delegate, [np.array(a) for a in arrays]))
        return run_tosa_delegate(delegate, arrays)

    execute(program, inputs, record)
    return calls


def bench(name: str, accelerator: str, repeat: int, out_dir: Path) -> tuple[str, float, float]:
    model = load_model(f"zoo:{name}")
    program = compile_variant(model, random_calibration(model.example_inputs, samples=4),
                              "fused", npu_config(accelerator), out_dir)
    inputs = [x.numpy() for x in model.example_inputs]
    calls = _delegate_inputs(program, inputs)
    payloads = [load_payload(d.payload) for d, _ in calls]
    exact = all(np.array_equal(s.reshape(-1), r.reshape(-1))
                for (d, arrays), p in zip(calls, payloads)
                for s, r in zip(simulate(p, arrays, accelerator).outputs,
                                run_tosa_delegate(d, arrays)))
    sim, ref = SimulatorRunner(), TosaReferenceRunner()
    end_to_end_exact = all(np.array_equal(a, b) for a, b in
                           zip(sim.run(program, inputs).outputs, ref.run(program, inputs).outputs))
    sim_s = _best(lambda: [simulate(p, arrays, accelerator)
                           for p, (_, arrays) in zip(payloads, calls)], repeat)
    ref_s = _best(lambda: [run_tosa_delegate(d, arrays) for d, arrays in calls], repeat)
    sim_e2e = _best(lambda: sim.run(program, inputs), repeat)
    ref_e2e = _best(lambda: ref.run(program, inputs), repeat)
    ops = sum(len(simulate(p, arrays, accelerator).operations)
              for p, (_, arrays) in zip(payloads, calls))
    print(f"{name:<17}{len(calls):>4}{ops:>6}{sim_s * 1e3:>9.1f}{ref_s * 1e3:>9.1f}"
          f"{sim_s / ref_s:>7.2f}{sim_e2e * 1e3:>9.1f}{ref_e2e * 1e3:>9.1f}"
          f"{sim_e2e / ref_e2e:>7.2f}  {'yes' if exact and end_to_end_exact else 'NO'}")
    return name, sim_s / ref_s, sim_e2e / ref_e2e


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=["mobilenet_v1_025", "ds_cnn"])
    parser.add_argument("--accelerator", default="ethos-u55-128")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(f"{'':<21}{'':>6}{'delegates only':^25}{'whole model (runners)':^25}")
    print(f"{'model':<17}{'dlg':>4}{'ops':>6}{'sim ms':>9}{'ref ms':>9}{'ratio':>7}"
          f"{'sim ms':>9}{'ref ms':>9}{'ratio':>7}  bit-exact")
    with tempfile.TemporaryDirectory() as tmp:
        rows = [bench(name, args.accelerator, args.repeat, Path(tmp) / name)
                for name in args.models]
    worst = max(r[1] for r in rows)
    print(f"worst delegate ratio {worst:.2f}, worst whole-model ratio "
          f"{max(r[2] for r in rows):.2f} (goal <= 1.0)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
