"""Fused vs unfused SQNR against the float model, over calibration seeds (issue 18 item 5).

    python scripts/bench_fusion_accuracy.py [--seeds 0,1,2] [--eval-samples 8] [MODEL ...]

MODEL defaults to every zoo model. Per model and variant: mean and spread (min..max) of the SQNR
over the calibration seeds (8 seeded random calibration inputs each), on the host reference (TOSA
reference model) with the same evaluation inputs for every seed. Where fused is below unfused, the
fused blocks are listed with the range each was given (decisions: qmax's real value and whether it
is the activation's bound or the calibrated maximum).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from toolkit.console_capture import COMPILER_SIDE, quiet_torch_import

quiet_torch_import(
    COMPILER_SIDE
)  # torchao's import-time chatter, as etk does; before the imports below

from toolkit.evaluation.evaluate import evaluate_on_host, evaluation_inputs, float_outputs  # noqa: E402
from toolkit.lower.build_variant import compile_variant  # noqa: E402
from toolkit.models.loader import load_model  # noqa: E402
from toolkit.models.zoo import zoo_names  # noqa: E402
from toolkit.quantize.calibration import random_calibration  # noqa: E402
from toolkit.runners.tosa_ref import TosaReferenceRunner  # noqa: E402
from toolkit.targets import load_target  # noqa: E402

VARIANTS = ("fused", "unfused")


def measure(spec: str, seeds: list[int], eval_samples: int, out: Path) -> dict:
    npu = load_target("corstone-300").npu()
    model = load_model(spec)
    inputs = evaluation_inputs(model, eval_samples, 0)
    floats = float_outputs(model, inputs)
    sqnr = {v: [] for v in VARIANTS}
    blocks = {}
    for seed in seeds:
        calibration = random_calibration(model.example_inputs, 8, seed)
        for variant in VARIANTS:
            program = compile_variant(model, calibration, variant, npu, out / f"{seed}")
            sqnr[variant].append(
                evaluate_on_host(program, TosaReferenceRunner(), inputs, floats).accuracy.sqnr_db
            )
            if variant == "fused":
                blocks[seed] = [d for d in program.decisions if d.fused]
    return {"sqnr": sqnr, "blocks": blocks}


def spread(values: list[float]) -> str:
    return f"{statistics.mean(values):6.2f} ({min(values):.2f}..{max(values):.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--eval-samples", type=int, default=8)
    args = parser.parse_args()
    models = args.models or [f"zoo:{name}" for name in zoo_names()]
    seeds = [int(s) for s in args.seeds.split(",")]
    print(
        f"SQNR vs float, dB: mean (min..max) over calibration seeds {seeds}, "
        f"{args.eval_samples} evaluation inputs, host reference, corstone-300 ethos-u55-128"
    )
    print(f"{'model':28} {'fused':>22} {'unfused':>22} {'fused-unfused':>14}")
    below = 0
    with tempfile.TemporaryDirectory() as tmp:
        for index, spec in enumerate(models):
            result = measure(spec, seeds, args.eval_samples, Path(tmp) / str(index))
            fused, unfused = result["sqnr"]["fused"], result["sqnr"]["unfused"]
            delta = statistics.mean(fused) - statistics.mean(unfused)
            print(f"{spec:28} {spread(fused):>22} {spread(unfused):>22} {delta:+14.2f}", flush=True)
            if delta < 0:
                below += 1
                for d in result["blocks"][seeds[0]]:
                    print(
                        f"    block {d.parent} + {d.activation} ({d.source}): range [0, "
                        f"{d.upper_bound:.4g}] ({d.upper_bound_from})",
                        flush=True,
                    )
    print(f"fused below unfused on {below} of {len(models)} models")


if __name__ == "__main__":
    main()
