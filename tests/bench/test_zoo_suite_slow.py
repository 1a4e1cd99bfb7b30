"""The issue's suite in full: the zoo x {fused, unfused} x {ethos-u55-128, ethos-u55-256,
ethos-u65-256} on the simulator, -j 2, with its reports. The default path runs a slice of it
(tests/bench/conftest.py)."""

from __future__ import annotations

import re

import pytest

from toolkit.bench.results import run_key
from toolkit.bench.suite import load_suite
from toolkit.cli import main

from .helpers import REPO, records


@pytest.mark.slow
def test_full_zoo_suite(tmp_path):
    suite = REPO / "examples/suites/zoo.toml"
    out = tmp_path / "zoo"
    assert main(["bench", str(suite), "-j", "2", "--out", str(out)]) == 0
    assert main(["report", str(out), "--html"]) == 0
    recs = records(out)
    assert sorted(r["key"] for r in recs) == sorted(run_key(s) for s in load_suite(suite).runs())
    failed = [(r["label"], r["reason"]) for r in recs if r["status"] != "ok"]
    assert not failed
    assert all(r["outputs"]["outputs_match_reference"] for r in recs)
    markdown = (out / "report.md").read_text()
    assert f"{len(recs)} runs, {len(recs)} ok, 0 failed" in markdown
    for r in recs:
        row = (f"| {r['spec']['model']} | corstone-300 | {r['spec']['npu']} | "
               f"{r['spec']['variant']} | default | sim | ok | "
               f"{r['cycles']['estimate']['npu_cycles']} | {r['cycles']['run']['npu_cycles']} |")
        assert row in markdown
    page = (out / "report.html").read_text()
    assert len(re.findall(r'src="data:image/png;base64,', page)) == 4
