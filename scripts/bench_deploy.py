"""Where the time of an `etk deploy` goes, cached and uncached: imports, loading the model,
compiling (or finding the programs in the compile cache), the host reference, the runner, the
evaluation on labelled data, the reports. Each run is a fresh process, as a user's command is.

uncached: a fresh ETK_CACHE_DIR and output folder; cached: the same command again, every program
found in the cache. Figures are wall seconds per stage, the median of --repeat runs (the stages
are the deploy's own progress messages, timed as they arrive).

python scripts/bench_deploy.py [MODEL] [--runner sim] [--calibration-data C --eval-data E]
                               [--repeat 3]
default MODEL: zoo:ds_cnn@mlperf; with the KWS folders of scripts/kws_eval_data.py this is the
deploy the simulator design note (docs/simulator.md) measures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# progress message prefix -> stage
STAGES = (
    ("loading", "load model"),
    ("compiling", "compile"),
    ("host reference run", "host reference"),
    ("running", "runner"),
    ("float model on", "evaluation"),
    ("evaluating", "evaluation"),
    ("fused below unfused", "evaluation"),
)
ORDER = (
    "imports",
    "load model",
    "compile",
    "host reference",
    "runner",
    "evaluation",
    "reports",
    "total",
)


def _child(argv: list[str]) -> None:
    """One deploy in this process; prints its stage times as JSON."""
    start = time.perf_counter()
    from toolkit.cli import build_parser
    from toolkit.cli.__init__ import _before_the_verb
    from toolkit.console_capture import quiet_third_party_warnings

    args = build_parser().parse_args(["deploy", *argv])
    quiet_third_party_warnings()
    _before_the_verb(args)  # imports the pipeline, as etk does before the verb runs
    from toolkit.cli.common import job_from_args, show
    from toolkit.pipeline import run_job
    from toolkit.resolve import fusion_variants, resolve_runner, resolve_target

    times: dict[str, float] = {"imports": time.perf_counter() - start}
    mark = [time.perf_counter(), "load model"]

    def progress(message: str) -> None:
        now = time.perf_counter()
        times[mark[1]] = times.get(mark[1], 0.0) + now - mark[0]
        stage = next((s for p, s in STAGES if message.startswith(p)), mark[1])
        mark[:] = [now, stage]

    target, npu = resolve_target(args.target, args.npu)
    runner, note = resolve_runner(args.model, args.runner, target, npu)
    result = run_job(job_from_args(args, fusion_variants("on", True)), progress, runner, note)
    progress("reports")
    with open(os.devnull, "w") as sink:
        stdout, sys.stdout = sys.stdout, sink
        try:
            show(result)
        finally:
            sys.stdout = stdout
    times["reports"] = times.get("reports", 0.0) + time.perf_counter() - mark[0]
    times["total"] = time.perf_counter() - start
    print(json.dumps(times))


def _run(argv: list[str], cache: Path, out: Path) -> dict[str, float]:
    env = {**os.environ, "ETK_CACHE_DIR": str(cache)}
    done = subprocess.run(
        [sys.executable, __file__, "--child", *argv, "-o", str(out)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        _child(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", nargs="?", default="zoo:ds_cnn@mlperf")
    parser.add_argument("--runner", default="sim")
    parser.add_argument("--calibration-data")
    parser.add_argument("--eval-data")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    argv = [args.model, "--runner", args.runner]
    for flag, value in (
        ("--calibration-data", args.calibration_data),
        ("--eval-data", args.eval_data),
    ):
        if value:
            argv += [flag, value]
    figures: dict[str, list[dict[str, float]]] = {"uncached": [], "cached": []}
    with tempfile.TemporaryDirectory(prefix="etk-bench-deploy-") as tmp:
        for k in range(args.repeat):
            cache = Path(tmp) / f"cache{k}"
            figures["uncached"].append(_run(argv, cache, Path(tmp) / f"out{k}a"))
            figures["cached"].append(_run(argv, cache, Path(tmp) / f"out{k}b"))
    print(f"etk deploy {' '.join(argv)}: wall seconds per stage, median of {args.repeat}")
    print(f"{'stage':16} {'uncached':>9} {'cached':>9}")
    for stage in ORDER:
        row = [statistics.median(r.get(stage, 0.0) for r in figures[m]) for m in figures]
        print(f"{stage:16} {row[0]:9.2f} {row[1]:9.2f}")


if __name__ == "__main__":
    main()
