"""etk bench on the stand-in labgrid farm: runs fanned out over places, a run retried on another
place when its place goes away, two suites at once never on one place. Long: marked slow
(scripts/bench_farm.py times the same on 24 runs)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from datetime import datetime

import pytest

from toolkit.cli import main
from toolkit.farm.session import FarmSession

from .helpers import write_board_target, write_farm_suite

pytestmark = pytest.mark.slow


def _records(out):
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def _place(record) -> str:
    return re.search(r"labgrid place (\S+)", record["runner"]["note"])[1]


def _nothing_held(address: str) -> bool:
    session = FarmSession(address)
    try:
        session.pump()
        places = session.session.places.values()
        return not any(p.acquired or p.reservation for p in places)
    finally:
        session.close()


def test_a_run_whose_place_goes_away_runs_on_another(tmp_path, make_farm):
    farm = make_farm(2, boot_s=2.0)
    target = write_board_target(tmp_path)
    suite = write_farm_suite(tmp_path / "suite.toml", target, ["zoo:conv2d_relu"], vela=2)
    flashed = farm.root / "board-1" / "flash" / "image.bpte"

    def take_board_1_away():
        while not flashed.exists():
            time.sleep(0.05)
        farm.remove(1)  # mid-run: it boots for 2 s after its flash

    threading.Thread(target=take_board_1_away, daemon=True).start()
    out = tmp_path / "out"
    assert main(["bench", str(suite), "--out", str(out), "--coordinator", farm.address]) == 0
    records = _records(out)
    assert len(records) == 4 and all(r["status"] == "ok" for r in records)
    assert max(Counter(r["key"] for r in records).values()) == 1  # nothing lost, nothing twice
    assert {_place(r) for r in records} == {"board-0"}  # board-1's run went to board-0
    assert _nothing_held(farm.address)  # released, reservations cancelled


def test_two_suites_at_once_never_share_a_place(tmp_path, make_farm):
    farm = make_farm(2, boot_s=1.0)
    target = write_board_target(tmp_path)
    suite = write_farm_suite(tmp_path / "suite.toml", target, ["zoo:conv2d_relu"])
    argv = [sys.executable, "-m", "toolkit.cli", "bench", str(suite), "--coordinator", farm.address]
    runs = [
        subprocess.Popen([*argv, "--out", str(tmp_path / name)], stdout=subprocess.DEVNULL)
        for name in ("a", "b")
    ]
    assert [run.wait(timeout=900) for run in runs] == [0, 0]
    spans = {}
    for name in ("a", "b"):
        for r in _records(tmp_path / name):
            start = datetime.fromisoformat(r["started"]).timestamp()
            spans.setdefault(_place(r), []).append((name, start, start + r["duration_s"]))
    for place, held in spans.items():
        for suite_a, start_a, end_a in held:
            for suite_b, start_b, end_b in held:
                if suite_a != suite_b:  # whole seconds in the records: 1 s of slack
                    assert not (start_a < end_b - 1 and start_b < end_a - 1), place
    assert _nothing_held(farm.address)
