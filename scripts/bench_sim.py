"""Simulator vs TOSA reference model: time per inference on zoo networks, and their ratio.

Lowers each network once (ExecuTorch Ethos-U chain, same helpers as tests/sim), compiles it with
Vela, checks the simulator's output against the reference model bit for bit, then times both.
Usage: python scripts/bench_sim.py [--accelerator ethos-u55-128] [--repeat 5] [zoo names...]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "sim"))
from conftest import lower_to_tosa, tosa_reference, vela_compile  # noqa: E402

from toolkit.models.zoo import build_zoo_model  # noqa: E402
from toolkit.sim import load_payload, simulate  # noqa: E402


def _best(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=["mobilenet_v1_025", "ds_cnn"])
    parser.add_argument("--accelerator", default="ethos-u55-128")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(f"{'model':<16}{'NPU ops':>8}{'sim ms':>10}{'tosa-ref ms':>13}{'ratio':>8}  bit-exact")
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models:
            module, example = build_zoo_model(name)
            shape = tuple(example[0].shape)
            out = Path(tmp) / name
            out.mkdir()
            tosa = lower_to_tosa(module, shape, out)
            program = load_payload(vela_compile(tosa, args.accelerator, out / "vela"))
            # A delegate may start after CPU ops: feed it its own input (TOSA rank 4, NCHW).
            delegate_shape = program.inputs[0].shape[-4:]
            x = np.random.default_rng(0).integers(-128, 128, size=delegate_shape).astype(np.int8)
            result = simulate(program, [x], args.accelerator)
            expected = tosa_reference(tosa, [x])[0]
            exact = np.array_equal(result.outputs[0], expected.reshape(result.outputs[0].shape))
            sim_s = _best(lambda: simulate(program, [x], args.accelerator), args.repeat)
            ref_s = _best(lambda: tosa_reference(tosa, [x]), args.repeat)
            worst = max(worst, sim_s / ref_s)
            print(f"{name:<16}{len(result.operations):>8}{sim_s * 1e3:>10.1f}{ref_s * 1e3:>13.1f}"
                  f"{sim_s / ref_s:>8.2f}  {'yes' if exact else 'NO'}")
    print(f"worst ratio {worst:.2f} (goal <= 1.0)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
