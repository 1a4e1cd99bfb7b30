"""etk bench (a suite's cross product, in parallel, resumable, against a baseline) and etk report."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from ..bench.baseline import compare, load_baseline, parse_percent, regression_table
from ..bench.report import write_reports
from ..bench.results import RESULTS_NAME, latest, read_records, run_key
from ..bench.suite import load_suite
from ..errors import UserError


def _lsb(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number of LSBs") from None
    if value < 0:
        raise argparse.ArgumentTypeError("an LSB tolerance cannot be negative")
    return value


LARGE_SUITE = 5000  # runs; a suite past this is started only with --large


def _bench(args) -> int:
    from ..bench.session import (
        run_suite,  # the worker pool imports torch and ExecuTorch
    )

    console = Console(stderr=True)
    if args.jobs < 1:
        raise UserError(f"-j {args.jobs}: use at least 1 worker")
    suite = load_suite(args.suite)
    if suite.size_bound > LARGE_SUITE and not args.large:
        raise UserError(
            f"suite {args.suite} expands to up to {suite.size_bound} runs (its axes' product), "
            f"more than {LARGE_SUITE}: check its axes, or pass --large to run it all"
        )
    cycle_tolerance = parse_percent(args.tolerance_cycles)
    baseline = load_baseline(args.baseline) if args.baseline else None
    try:
        outcome = run_suite(
            suite, args.out, args.jobs, args.resume, args.scheduler, console, _farm(args)
        )
    except KeyboardInterrupt:
        done = len(latest(read_records(args.out / RESULTS_NAME)))
        console.print(
            f"interrupted: {done} runs are recorded in {args.out}; continue with "
            f"etk bench {args.suite} --out {args.out} --resume",
            markup=False,
        )
        return 130
    console.print(
        f"{outcome.ran} runs made ({outcome.failed} failed), {outcome.skipped} already "
        f"recorded; results in {outcome.results}",
        markup=False,
        highlight=False,
    )
    failed = 1 if outcome.failed else 0  # each failed run's reason is in its record
    if failed:
        console.print(
            f"etk: {outcome.failed} runs failed: their reasons are in "
            f"{outcome.results}; fix them and run again with --resume",
            markup=False,
            highlight=False,
        )
    if baseline is None:
        return failed
    keys = {run_key(s) for s in suite.runs()}
    records = [r for k, r in latest(read_records(outcome.results)).items() if k in keys]
    regressions = compare(records, baseline, cycle_tolerance, args.tolerance_lsb)
    if regressions:
        out = Console()
        if not out.is_terminal:  # CI logs: no wrapping inside the table's cells
            out = Console(width=200)
        out.print(regression_table(regressions))
        return 1
    console.print(
        f"no regression against {args.baseline} (cycles +{cycle_tolerance:.1%}, "
        f"outputs {args.tolerance_lsb} LSB)",
        markup=False,
    )
    return failed


def _farm(args):
    """The labgrid farm options: --coordinator, else LG_COORDINATOR (labgrid's own variable)."""
    import os

    address = args.coordinator or os.environ.get("LG_COORDINATOR")
    if not address:
        if args.place:
            raise UserError("--place names a labgrid place: pass --coordinator HOST:PORT too")
        return None
    from ..farm.pool import FarmOptions

    if args.farm_wait <= 0:
        raise UserError(f"--farm-wait {args.farm_wait:g}: use a number of seconds above 0")
    return FarmOptions(address, tuple(args.place), args.farm_wait)


def _report(args) -> int:
    for path in write_reports(args.folder, args.html):
        print(path)
    return 0


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "bench", help="run a suite: models x targets x NPUs x fusion x Vela options x runners"
    )
    parser.add_argument("suite", type=Path, metavar="SUITE.toml")
    parser.add_argument("-j", "--jobs", type=int, default=1, help="worker processes (default 1)")
    parser.add_argument(
        "--out", type=Path, default=Path("etk-bench"), help="results folder (default etk-bench)"
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="skip runs already recorded in OUT/results.jsonl (failed ones run again)",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        metavar="BASELINE.json",
        help="exit 1 when a run regresses against this baseline "
        "(a copy of an earlier OUT/baseline.json)",
    )
    parser.add_argument(
        "--tolerance-cycles",
        default="2%",
        help="allowed relative growth of NPU cycles (default 2%%)",
    )
    parser.add_argument(
        "--tolerance-lsb",
        type=_lsb,
        default=0,
        help="allowed change of any output code, in LSB (default 0)",
    )
    parser.add_argument(
        "--large",
        action="store_true",
        help=f"run a suite of more than {LARGE_SUITE} runs (refused without it: a typo in an "
        "axis multiplies them)",
    )
    parser.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="run on a Dask distributed cluster, e.g. tcp://host:8786",
    )
    parser.add_argument(
        "--coordinator",
        metavar="HOST:PORT",
        help="labgrid coordinator of the board farm the suite's 'farm' runs go to "
        "(default: LG_COORDINATOR); one worker per place whose tags match (docs/farm.md)",
    )
    parser.add_argument(
        "--place",
        action="append",
        default=[],
        metavar="NAME",
        help="use only this labgrid place (repeatable; default: every matching place)",
    )
    parser.add_argument(
        "--farm-wait",
        type=float,
        default=600.0,
        metavar="S",
        help="how long to wait for a place other suites hold (default 600 s)",
    )
    parser.set_defaults(func=_bench)
    parser = subparsers.add_parser("report", help="report.md (and --html) from a bench folder")
    parser.add_argument("folder", type=Path, metavar="DIR")
    parser.add_argument(
        "--html", action="store_true", help="also a self-contained report.html with plots"
    )
    parser.set_defaults(func=_report)
