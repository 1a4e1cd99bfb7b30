"""`etk compare MODEL` end to end, cold (a fresh process, empty output folder), split by stage,
with and without lower/upstream_speedups.py; wall and CPU seconds (this process and its
children: the variant compiled in a forked child counts once it is joined).

python scripts/bench_compile.py [MODEL [INPUT_SHAPE]] [--only on|off]
default MODEL: tests/collection/mobilenet.py:mobilenet_v2_035 at 1,3,96,96

python scripts/bench_compile.py --ratio [--fusion on|off] [--profile FILE]
times `etk compile zoo:ds_cnn` and `etk compile` of the 49-step GRU keyword net (issue 33), one
cold process each (a fresh output folder, ETK_CACHE_DIR unset), in the same run, and prints the
seconds and the GRU / DS-CNN ratio; --profile writes a cProfile of the GRU compile to FILE.

python scripts/bench_compile.py --per-patch [--repeats N] [--models ds_cnn,gru]
each upstream speedup alone: cold compiles of the fused variant with every speedup on, with all
but that one, and with none, interleaved (one round runs each setting once, in a shuffled
order); prints per speedup the median CPU seconds of the compile stage it saves, and checks that
the .pte bytes are the same in every setting. --in-process: all compiles in one process after a
warm-up compile (no import per setting: fits a loaded machine; one-time costs are not counted).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DEFAULT_MODEL = "tests/collection/mobilenet.py:mobilenet_v2_035"
DEFAULT_SHAPE = "1,3,96,96"
GRU_MODEL = "tests/collection/held_out_kinds.py:gru_keyword_49"
GRU_SHAPE = "1,49,10"
PER_PATCH_MODELS = {"ds_cnn": ("zoo:ds_cnn", ""), "gru": (GRU_MODEL, GRU_SHAPE)}


def _cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _child(model: str, shape: str, fused_only: bool = False) -> None:
    """One cold `etk compare` (fused_only: compile) in this process, with the speedups the
    parent named in ETK_UPSTREAM_SPEEDUPS; prints the stage marks and .pte hashes as JSON."""
    marks = [("start", time.perf_counter(), _cpu())]
    from toolkit.job import Job  # noqa: I001 - imports are part of what is measured
    from toolkit.pipeline import run_job

    marks.append(("import", time.perf_counter(), _cpu()))
    variants = ("fused",) if fused_only else ("fused", "unfused")
    with tempfile.TemporaryDirectory() as out:
        job = Job(
            model=model,
            input_shape=shape or None,
            out_dir=Path(out),
            parallel_variants=not fused_only,
            variants=variants,
            eval_samples=1 if fused_only else 8,
        )
        result = run_job(job, lambda message: marks.append((message, time.perf_counter(), _cpu())))
        marks.append(("report", time.perf_counter(), _cpu()))
        hashes = {
            name: hashlib.sha256(v.program.pte_path.read_bytes()).hexdigest()
            for name, v in result.variants.items()
        }
    print(json.dumps({"marks": marks, "variants": sorted(result.variants), "pte": hashes}))


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


def _child_report(model: str, shape: str, speedups: str, fused_only: bool = False) -> dict:
    command = [sys.executable, __file__, "--child", speedups, model, shape]
    command += ["--fused-only"] if fused_only else []
    env = {k: v for k, v in os.environ.items() if k != "ETK_CACHE_DIR"}  # cold: compile it
    # the child's speedups: read by lower/upstream_speedups.py (it imports torch: not here)
    env["ETK_UPSTREAM_SPEEDUPS"] = {"off": "none"}.get(speedups, speedups)
    if speedups == "on":
        del env["ETK_UPSTREAM_SPEEDUPS"]
    done = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
    if done.returncode != 0:
        sys.exit(f"bench child failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _run(model: str, shape: str, speedups: bool) -> list[tuple[str, float, float]]:
    return _stages(_child_report(model, shape, "on" if speedups else "off")["marks"])


def _compile_seconds(report: dict) -> tuple[float, float]:
    """(wall, cpu) of the compile stage."""
    for stage, wall, cpu in _stages(report["marks"]):
        if stage == "compile both variants":
            return wall, cpu
    raise SystemExit("no compile stage in the child's marks")


def _per_patch(models: list[str], repeats: int) -> None:
    """Each speedup alone: all on, all but one, none; rounds interleaved, medians printed."""
    from toolkit.lower.upstream_speedups import SPEEDUPS

    names = list(SPEEDUPS)
    settings = {"all": "on", "none": "off"}
    settings.update({f"-{n}": ",".join(m for m in names if m != n) or "none" for n in names})
    for key in models:
        model, shape = PER_PATCH_MODELS[key]
        cpu: dict[str, list[float]] = {label: [] for label in settings}
        wall: dict[str, list[float]] = {label: [] for label in settings}
        hashes: set[str] = set()
        for round_ in range(repeats):
            order = list(settings)
            random.Random(round_).shuffle(order)
            for label in order:
                report = _child_report(model, shape, settings[label], fused_only=True)
                seconds = _compile_seconds(report)
                wall[label].append(seconds[0])
                cpu[label].append(seconds[1])
                hashes.add(report["pte"]["fused"])
                print(f"# {key} round {round_} {label}: cpu {seconds[1]:.1f} s", flush=True)
        _print_per_patch(key, names, cpu, wall, hashes, repeats)


def _per_patch_in_process(models: list[str], repeats: int) -> None:
    """_per_patch, every compile of a model in this process (CPU seconds of this process)."""
    from toolkit.job import Job  # torch loads here, not at the script's import
    from toolkit.lower import build_variant
    from toolkit.lower.build_variant import compile_variant
    from toolkit.lower.upstream_speedups import SPEEDUPS, SPEEDUPS_ENV
    from toolkit.models.loader import load_model
    from toolkit.quantize.calibration import random_calibration
    from toolkit.resolved_job import resolve_job

    os.environ.pop("ETK_CACHE_DIR", None)
    names = list(SPEEDUPS)
    settings = {"all": ",".join(names), "none": "none"}
    settings.update({f"-{n}": ",".join(m for m in names if m != n) or "none" for n in names})
    for key in models:
        model_spec, shape = PER_PATCH_MODELS[key]
        model = load_model(model_spec, shape or None)
        npu = resolve_job(Job(model=model_spec)).npu
        calibration = random_calibration(model.example_inputs, 8, 0)
        cpu: dict[str, list[float]] = {label: [] for label in settings}
        wall: dict[str, list[float]] = {label: [] for label in settings}
        hashes: set[str] = set()
        with tempfile.TemporaryDirectory() as out:
            rounds = [["all"]] + [list(settings) for _ in range(repeats)]  # a warm-up first
            for round_, order in enumerate(rounds):
                random.Random(round_).shuffle(order)
                for label in order:
                    os.environ[SPEEDUPS_ENV] = settings[label]
                    build_variant._CACHE.clear()
                    start, start_cpu = time.perf_counter(), time.process_time()
                    folder = Path(out) / f"{round_}_{label}"
                    program = compile_variant(model, calibration, "fused", npu, folder)
                    seconds = (time.perf_counter() - start, time.process_time() - start_cpu)
                    hashes.add(hashlib.sha256(program.pte_path.read_bytes()).hexdigest())
                    if round_:
                        wall[label].append(seconds[0])
                        cpu[label].append(seconds[1])
                    print(f"# {key} round {round_} {label}: cpu {seconds[1]:.1f} s", flush=True)
        os.environ.pop(SPEEDUPS_ENV, None)
        _print_per_patch(key, names, cpu, wall, hashes, repeats)


def _print_per_patch(key, names, cpu, wall, hashes, repeats) -> None:
    base = statistics.median(cpu["all"])
    print(f"{key}: compile stage of the fused variant, cold, median of {repeats} (CPU s)")
    print(f"{'all speedups':34}{base:8.1f}   wall {statistics.median(wall['all']):.1f}")
    print(f"{'no speedups':34}{statistics.median(cpu['none']):8.1f}")
    for name in names:
        without = statistics.median(cpu[f"-{name}"])
        print(f"{'saves ' + name:34}{without - base:8.1f}   (all but it: {without:.1f})")
    same = "the same" if len(hashes) == 1 else f"DIFFERENT ({len(hashes)} distinct)"
    print(f".pte bytes in every setting: {same}")
    load = os.getloadavg()[0]
    print(f"load average at the end {load:.1f} on {os.cpu_count()} CPUs", flush=True)


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
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--fused-only", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--per-patch", action="store_true", help="each speedup alone")
    parser.add_argument("--repeats", type=int, default=3, help="with --per-patch: rounds")
    parser.add_argument("--models", default="ds_cnn,gru", help="with --per-patch")
    parser.add_argument("--in-process", action="store_true", help="with --per-patch")
    parser.add_argument("--ratio", action="store_true", help="etk compile GRU vs DS-CNN")
    parser.add_argument("--fusion", choices=("on", "off"), default="on", help="with --ratio")
    parser.add_argument("--profile", metavar="FILE", help="with --ratio: cProfile the GRU")
    args = parser.parse_args()
    if args.ratio:
        _ratio(args.fusion, args.profile)
        return
    if args.child:
        _child(args.model, args.input_shape, args.fused_only)
        return
    if args.per_patch:
        per_patch = _per_patch_in_process if args.in_process else _per_patch
        per_patch(args.models.split(","), args.repeats)
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
