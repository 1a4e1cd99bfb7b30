"""Vela's estimate of every zoo net, fused and unfused, with a digest of what runs: run it in a
venv with each Vela to compare them (equal digests: the same command streams and weights).

    python scripts/bench_vela_estimates.py [zoo names...]

corstone-300 (ethos-u55-128), random calibration (4 samples, seed 0).
"""

from __future__ import annotations

import hashlib
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path

from toolkit.lower.build_variant import compile_variant
from toolkit.models.loader import load_model
from toolkit.models.zoo import zoo_names
from toolkit.quantize.calibration import random_calibration
from toolkit.sim.payload import load_payload
from toolkit.targets import load_target


def _digest(program) -> str:
    """The first 10 hex digits of SHA-1 over every delegate's command stream and weights."""
    payloads = (load_payload(d.payload) for d in program.delegates)
    return hashlib.sha1(
        b"".join(p.command_stream + bytes(p.weights) for p in payloads)
    ).hexdigest()[:10]


def main(names: list[str]) -> None:
    npu = load_target("corstone-300").npu()
    print(f"Vela {version('ethos-u-vela')}, {npu.accelerator}\n")
    print("| zoo net | NPU ops | Vela estimate, NPU cycles: fused / unfused | digests |")
    print("|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name in names or zoo_names():
            loaded = load_model(f"zoo:{name}")
            calibration = random_calibration(loaded.example_inputs, 4, 0)
            programs = [
                compile_variant(loaded, calibration, v, npu, Path(tmp) / name / v)
                for v in ("fused", "unfused")
            ]
            cycles = " / ".join(
                f"{sum(d.estimate.npu_cycles for d in p.delegates):,}" for p in programs
            )
            digests = " / ".join(_digest(p) for p in programs)
            print(f"| {name} | {programs[0].npu_ops} | {cycles} | {digests} |", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
