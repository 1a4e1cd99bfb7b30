"""`etk compare MODEL` end to end, cold (a fresh process, empty output folder), split by stage,
with and without lower/upstream_speedups.py; wall and CPU seconds (this process and its
children: the variant compiled in a forked child counts once it is joined).

python scripts/bench_compile.py [MODEL [INPUT_SHAPE]] [--only on|off]
default MODEL: tests/collection/mobilenet.py:mobilenet_v2_035 at 1,3,96,96

python scripts/bench_compile.py --ratio [--fusion on|off] [--profile FILE]
times `etk compile zoo:ds_cnn` and `etk compile` of the 49-step GRU keyword net (issue 33), one
cold process each (a fresh output folder, ETK_CACHE_DIR unset), in the same run, and prints the
seconds and the GRU / DS-CNN ratio; --profile writes a cProfile of the GRU compile to FILE.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DEFAULT_MODEL = "tests/collection/mobilenet.py:mobilenet_v2_035"
DEFAULT_SHAPE = "1,3,96,96"
GRU_MODEL = "tests/collection/held_out_kinds.py:gru_keyword_49"
GRU_SHAPE = "1,49,10"


def _cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _child(model: str, shape: str, speedups: bool) -> None:
    """One cold `etk compare` in this process; prints the stage marks as JSON."""
    marks = [("start", time.perf_counter(), _cpu())]
    from toolkit.job import Job  # noqa: I001 - imports are part of what is measured
    from toolkit.lower import build_variant
    from toolkit.pipeline import run_job

    if not speedups:
        import contextlib

        build_variant.upstream_speedups = contextlib.nullcontext  # type: ignore[assignment]
    marks.append(("import", time.perf_counter(), _cpu()))
    with tempfile.TemporaryDirectory() as out:
        job = Job(model=model, input_shape=shape, out_dir=Path(out), parallel_variants=True)
        result = run_job(job, lambda message: marks.append((message, time.perf_counter(), _cpu())))
        marks.append(("report", time.perf_counter(), _cpu()))
    print(json.dumps({"marks": marks, "variants": sorted(result.variants)}))


def _stage_name(message: str) -> str:
    for prefix, name in (
        ("start", "import torch, ExecuTorch, toolkit"),
        ("import", "job setup"),
        ("loading", "load, calibration, float run"),
        ("compiling", "compile both variants"),
        ("host reference run of fused", "host reference fused"),
        ("host reference run of unfused", "host reference unfused"),
        ("report", "report"),
    ):
        if message.startswith(prefix):
            return name
    return message


def _stages(marks) -> list[tuple[str, float, float]]:
    """(stage, wall, cpu): from each mark to the next, named by the mark that opens it."""
    rows = []
    for (message, wall, cpu), (_, next_wall, next_cpu) in zip(marks, marks[1:]):
        rows.append((_stage_name(message), next_wall - wall, next_cpu - cpu))
    return rows


def _run(model: str, shape: str, speedups: bool) -> list[tuple[str, float, float]]:
    command = [sys.executable, __file__, "--child", "on" if speedups else "off", model, shape]
    env = {k: v for k, v in os.environ.items() if k != "ETK_CACHE_DIR"}  # cold: compile it
    done = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
    if done.returncode != 0:
        sys.exit(f"bench child failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return _stages(json.loads(done.stdout.strip().splitlines()[-1])["marks"])


def _etk_compile(arguments: list[str], fusion: str, profile: str | None = None) -> float:
    """Wall seconds of one cold `etk compile` in a fresh process (imports included)."""
    with tempfile.TemporaryDirectory() as out:
        etk = [sys.executable, "-m", "toolkit.cli"]
        if profile:
            etk = [sys.executable, "-m", "cProfile", "-o", profile, "-m", "toolkit.cli"]
        command = [*etk, "compile", *arguments, "--fusion", fusion, "-o", out]
        env = {k: v for k, v in os.environ.items() if k != "ETK_CACHE_DIR"}  # cold: compile it
        start = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
        seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"etk compile failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return seconds


def _ratio(fusion: str, profile: str | None) -> None:
    ds_cnn = _etk_compile(["zoo:ds_cnn"], fusion)
    gru = _etk_compile([GRU_MODEL, "--input-shape", GRU_SHAPE], fusion, profile)
    print(f"etk compile --fusion {fusion} (cold, one process each), seconds")
    print(f"{'zoo:ds_cnn':44}{ds_cnn:8.1f}")
    print(f"{GRU_MODEL + (' (profiled)' if profile else ''):44}{gru:8.1f}")
    print(f"GRU / DS-CNN ratio {gru / ds_cnn:.1f}x")
    load = os.getloadavg()[0]
    print(f"load average at the end {load:.1f} on {os.cpu_count()} CPUs (wall is noisy under load)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", default=DEFAULT_MODEL)
    parser.add_argument("input_shape", nargs="?", default=DEFAULT_SHAPE)
    parser.add_argument("--only", choices=("on", "off"), help="one run, speedups on or off")
    parser.add_argument("--child", choices=("on", "off"), help=argparse.SUPPRESS)
    parser.add_argument("--ratio", action="store_true", help="etk compile GRU vs DS-CNN")
    parser.add_argument("--fusion", choices=("on", "off"), default="on", help="with --ratio")
    parser.add_argument("--profile", metavar="FILE", help="with --ratio: cProfile the GRU")
    args = parser.parse_args()
    if args.ratio:
        _ratio(args.fusion, args.profile)
        return
    if args.child:
        _child(args.model, args.input_shape, args.child == "on")
        return
    modes = (args.only,) if args.only else ("off", "on")
    runs = {mode: _run(args.model, args.input_shape, mode == "on") for mode in modes}
    print(f"etk compare {args.model} --input-shape {args.input_shape} (cold), seconds")
    print(f"{'stage':34}" + "".join(f"{'wall ' + m:>11}{'cpu ' + m:>10}" for m in modes))
    for index, (stage, *_rest) in enumerate(runs[modes[0]]):
        cells = "".join(f"{runs[m][index][1]:11.1f}{runs[m][index][2]:10.1f}" for m in modes)
        print(f"{stage:34}{cells}")
    totals = {m: (sum(r[1] for r in runs[m]), sum(r[2] for r in runs[m])) for m in modes}
    print(f"{'total':34}" + "".join(f"{totals[m][0]:11.1f}{totals[m][1]:10.1f}" for m in modes))
    if len(modes) == 2:
        (wall_off, cpu_off), (wall_on, cpu_on) = totals["off"], totals["on"]
        print(
            f"speedups on/off: wall ratio {wall_on / wall_off:.2f}, cpu ratio {cpu_on / cpu_off:.2f}"
        )
    load = os.getloadavg()[0]
    print(f"load average at the end {load:.1f} on {os.cpu_count()} CPUs (wall is noisy under load)")


if __name__ == "__main__":
    main()
