"""A torn last line in results.jsonl (a run killed while writing it) loses nothing on --resume."""

from __future__ import annotations

import json

from toolkit.bench.record import BenchRecord
from toolkit.bench.results import append_record, read_records, repair_torn_tail
from toolkit.cli import main

from .helpers import records, write_suite


def test_repair_moves_the_torn_line_aside_and_the_next_record_is_whole(tmp_path):
    path = tmp_path / "results.jsonl"
    append_record(path, BenchRecord(1, "a", "a", {}, "ok", None))
    with open(path, "a") as handle:
        handle.write('{"key": "b", "sta')
    assert repair_torn_tail(path) == len('{"key": "b", "sta')
    assert (tmp_path / "results.jsonl.torn").read_text() == '{"key": "b", "sta\n'
    append_record(path, BenchRecord(1, "b", "b", {}, "ok", None))
    assert [r.key for r in read_records(path)] == ["a", "b"]
    assert repair_torn_tail(path) == 0


def test_resume_after_a_torn_line_records_the_run_once(tmp_path, capsys):
    suite = write_suite(
        tmp_path / "s.toml", models=["zoo:linear_relu6"], npus=["ethos-u55-128"], fusion=["on"]
    )
    out = tmp_path / "out"
    assert main(["bench", str(suite), "--out", str(out)]) == 0
    whole = (out / "results.jsonl").read_text()
    (out / "results.jsonl").write_text(whole[: len(whole) // 2])  # killed mid-write
    capsys.readouterr()
    assert main(["bench", str(suite), "--out", str(out), "--resume"]) == 0
    err = capsys.readouterr().err
    assert "ended in a torn line" in err and "1 runs made (0 failed)" in err
    again = records(out)
    assert len(again) == 1 and again[0]["status"] == "ok"
    assert json.loads(whole)["key"] == again[0]["key"]
    assert main(["bench", str(suite), "--out", str(out), "--resume"]) == 0
    assert "0 runs made (0 failed), 1 already recorded" in capsys.readouterr().err
