"""etk bench on a labgrid farm of stand-in boards (issue 50's farm goals), from one run.

A real labgrid coordinator and one real exporter per place on 127.0.0.1, each place a stand-in
board (tests/stand_ins/labgrid_farm.py) that charges --boot-s per start and --inference-s per
sample. Prints:
  1. a suite of 24 runs (6 tiny zoo models x fused/unfused x 2 Vela option sets, 2 samples
     each) on one place and on 4 places, with the ratio (goal: at most 0.35); the compile cache
     is warmed first, so what is timed is the runs, as in a CI that compiled before;
  2. the same suite while one place goes away after its first flash: every run recorded ok,
     the lost one retried on another place;
  3. two suites started at once on the same places: which suite held each place, sampled from
     the coordinator every 0.2 s (goal: never two at once), and both suites' results.
Stand-in boards: their times say how the farm scales, nothing about real boards.

python scripts/bench_farm.py [--boot-s 6] [--inference-s 0.5] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "stand_ins"))
sys.path.insert(0, str(REPO / "tests"))

MODELS = ["linear_relu", "linear_relu6", "conv1d_relu", "conv1d_relu6", "depthwise_relu",
          "conv2d_relu"]  # fmt: skip


def write_suite(path: Path, target: Path, models: list[str]) -> Path:
    text = (
        f'name = "farm"\nmodels = {json.dumps([f"zoo:{m}" for m in models])}\n'
        f'targets = [{json.dumps(str(target))}]\nfusion = ["on", "off"]\nrunners = ["farm"]\n'
        "[settings]\neval_samples = 2\n"
        '[[vela]]\nname = "performance"\noptimise = "Performance"\n'
        '[[vela]]\nname = "size"\noptimise = "Size"\n'
    )
    path.write_text(text)
    return path


def bench(suite: Path, out: Path, address: str, *places: str) -> tuple[float, list[dict]]:
    argv = [sys.executable, "-m", "toolkit.cli", "bench", str(suite), "--out", str(out),
            "--coordinator", address]  # fmt: skip
    for place in places:
        argv += ["--place", place]
    start = time.monotonic()
    subprocess.run(argv, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.monotonic() - start
    return wall, [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def place_of(record: dict) -> str:
    match = re.search(r"labgrid place (\S+)", (record.get("runner") or {}).get("note", ""))
    return match[1] if match else "-"


def summary(records: list[dict]) -> str:
    ok = sum(r["status"] == "ok" for r in records)
    places = Counter(place_of(r) for r in records if r["status"] == "ok")
    return f"{ok} of {len(records)} ok, runs per place {dict(sorted(places.items()))}"


def scaling(farm, suite: Path, root: Path) -> None:
    warm, records = bench(suite, root / "warm", farm.address)
    print(f"warm-up (compiles into the cache), 4 places: {warm:.1f} s, {summary(records)}")
    one, records = bench(suite, root / "one", farm.address, "board-0")
    print(f"24 runs on 1 place: {one:.1f} s, {summary(records)}")
    four, records = bench(suite, root / "four", farm.address)
    print(f"24 runs on 4 places: {four:.1f} s, {summary(records)}")
    print(f"  4 places / 1 place: {four / one:.3f} (goal <= 0.35)")


def place_goes_away(farm, suite: Path, root: Path) -> None:
    flashed = root / "farm" / "board-1" / "flash" / "image.bpte"
    flashed.unlink(missing_ok=True)

    def remove_after_first_flash() -> None:
        while not flashed.exists():
            time.sleep(0.05)
        farm.remove(1)

    watcher = threading.Thread(target=remove_after_first_flash, daemon=True)
    watcher.start()
    wall, records = bench(suite, root / "gone", farm.address)
    keys = Counter(r["key"] for r in records)
    print(f"board-1 taken away after its first flash: {wall:.1f} s, {summary(records)}, "
          f"{len(keys)} runs recorded once each: {max(keys.values()) == 1}")  # fmt: skip


def two_suites(farm, suite: Path, root: Path) -> None:
    from labgrid_farm import StandInFarm  # noqa: F401 - the farm is running already

    holders: dict[str, set] = {}
    stop = threading.Event()

    def watch() -> None:
        from toolkit.farm.session import FarmSession

        session = FarmSession(farm.address)
        try:
            while not stop.is_set():
                session.pump()
                for name, place in session.session.places.items():
                    if place.acquired:
                        holders.setdefault(name, set()).add(place.acquired)
                time.sleep(0.2)
        finally:
            session.close()

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    results: dict[str, tuple[float, list[dict]]] = {}

    def run(name: str) -> None:
        results[name] = bench(suite, root / name, farm.address)

    suites = [threading.Thread(target=run, args=(n,)) for n in ("suite-a", "suite-b")]
    for thread in suites:
        thread.start()
    for thread in suites:
        thread.join()
    stop.set()
    watcher.join()
    for name, (wall, records) in sorted(results.items()):
        print(f"{name}: {wall:.1f} s, {summary(records)}")
    owners = {p: len(h) for p, h in sorted(holders.items())}
    print(f"  suites seen holding each place over the run (coordinator, every 0.2 s): {owners}")
    clash = _shared(results["suite-a"][1], results["suite-b"][1])
    print(f"  runs of the two suites on one place at the same time: {clash or 'none'}")


def _shared(first: list[dict], second: list[dict]) -> list[str]:
    """Pairs of runs, one per suite, on the same place with overlapping times (1 s slack: the
    records' start times are whole seconds)."""
    from datetime import datetime

    def spans(records):
        for r in records:
            start = datetime.fromisoformat(r["started"]).timestamp()
            yield place_of(r), start, start + r["duration_s"], r["key"][:8]

    return [
        f"{pa} {ka}/{kb}"
        for pa, sa, ea, ka in spans(first)
        for pb, sb, eb, kb in spans(second)
        if pa == pb and sa < eb - 1 and sb < ea - 1
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--boot-s", type=float, default=6.0, help="charged per board start")
    parser.add_argument("--inference-s", type=float, default=0.5, help="charged per sample")
    parser.add_argument("--out", type=Path, help="keep the results here (default: temporary)")
    args = parser.parse_args()
    from farm.helpers import TAGS, write_board_target
    from labgrid_farm import StandInFarm

    with tempfile.TemporaryDirectory(prefix="etk-bench-farm-") as tmp:
        root = args.out or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        os.environ.setdefault("ETK_CACHE_DIR", str(root / "cache"))
        target = write_board_target(root)
        suite = write_suite(root / "suite.toml", target, MODELS)
        small = write_suite(root / "small.toml", target, MODELS[:2])
        board = {"boot_s": args.boot_s, "inference_s": args.inference_s}
        with StandInFarm(root / "farm", 4, TAGS, **board) as farm:
            scaling(farm, suite, root)
            two_suites(farm, small, root)
            place_goes_away(farm, small, root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
