"""How much of each program's simulated NPU cycles etk attributes to a layer of the user's model
(module path and source line): the zoo and the collection, fused and unfused, ethos-u55-128.

    ETK_CACHE_DIR=... python scripts/layer_coverage.py [NAME ...] [--out DIR]

Compiles as tests/report/test_layer_cases.py does (the zoo with the default calibration, the
collection as tests/models/test_collection_sweep.py), so with the same ETK_CACHE_DIR it reads their
programs from the cache. Prints per net the lowest share over its variants, each variant's share
of its simulated NPU cycles (and the operations left unattributed), and its costliest layer;
ends with the lowest share of all.
"""

from __future__ import annotations

import argparse
import tempfile
import tomllib
from pathlib import Path

from toolkit.console_capture import COMPILER_SIDE, quiet_torch_import

quiet_torch_import(COMPILER_SIDE)  # torchao's import-time chatter, as etk does

from toolkit.job import Job  # noqa: E402
from toolkit.models.zoo import zoo_names  # noqa: E402
from toolkit.pipeline import run_job  # noqa: E402

COLLECTION = Path(__file__).resolve().parents[1] / "tests" / "collection"


def jobs(out: Path) -> dict[str, Job]:
    """Every net, as the per-layer tests compile it."""
    nets = {
        f"zoo:{name}": Job(model=f"zoo:{name}", eval_samples=2, out_dir=out / name)
        for name in zoo_names()
    }
    for name, (spec, shape) in tomllib.loads((COLLECTION / "nets.toml").read_text()).items():
        nets[name] = Job(
            model=str(COLLECTION / spec),
            input_shape=shape,
            npu="ethos-u55-128",
            calibration_samples=4,
            eval_samples=2,
            out_dir=out / name,
            parallel_variants=True,
        )
    return nets


def _row(name: str, job: Job) -> tuple[str, float]:
    """One net's table row and its lowest attributed share over its variants."""
    shares, cells, top = [], [], "-"
    for variant, vr in run_job(job).variants.items():
        profile = vr.layers
        if profile is None:  # no per-layer record (a .tflite model): nothing attributed
            cells.append(f"{variant}: no record")
            shares.append(0.0)
            continue
        shares.append(profile.coverage)
        unattributed = f", {profile.unattributed_ops} ops not" if profile.unattributed_ops else ""
        cells.append(
            f"{variant} {100 * profile.coverage:.2f}% of {profile.total_cycles:,}"
            f" ({profile.kind}{unattributed})"
        )
        if variant == "fused" and profile.ranked():
            top = profile.ranked()[0].source.describe()
    lowest = min(shares, default=0.0)
    return f"| {name} | {100 * lowest:.2f}% | {'; '.join(cells)} | {top} |", lowest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", metavar="NAME", help="zoo:NAME or a collection net")
    parser.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help="keep the compiled programs here (default: a temporary folder, removed at the end)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temporary:
        every = jobs(args.out or Path(temporary))
        unknown = [name for name in args.names if name not in every]
        if unknown:
            parser.error(f"unknown net {', '.join(unknown)}: use one of {', '.join(every)}")
        lowest: dict[str, float] = {}
        print(
            "| net | lowest share | per variant: share of simulated NPU cycles | costliest layer |"
        )
        print("|---|---|---|---|")
        for name in args.names or every:
            job = every[name]
            try:
                row, lowest[name] = _row(name, job)
            except Exception as exc:  # one net that fails to compile is a row, not the end
                row, lowest[name] = f"| {name} | failed | {type(exc).__name__}: {exc} | - |", 0.0
            print(row, flush=True)
        worst = min(lowest, key=lowest.__getitem__)
        print(
            f"lowest attributed share: {100 * lowest[worst]:.2f}% ({worst}), over {len(lowest)} nets"
        )


if __name__ == "__main__":
    main()
