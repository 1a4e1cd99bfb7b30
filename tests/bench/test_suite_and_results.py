"""Suite files, run keys and results.jsonl, without compiling anything."""

from __future__ import annotations

import json
import multiprocessing
import re
from dataclasses import replace
from pathlib import Path

import pytest

from toolkit.bench.record import BenchRecord
from toolkit.bench.results import (
    append_record,
    finished_keys,
    latest,
    new_record,
    read_records,
    run_key,
)
from toolkit.bench.suite import load_suite
from toolkit.errors import UserError
from toolkit.models.zoo import zoo_names

from .helpers import REPO, TINY_MODELS, TINY_NPUS, write_suite


def test_zoo_suite_is_the_full_cross_product():
    suite = load_suite(REPO / "examples/suites/zoo.toml")
    runs = suite.runs()
    assert len(runs) == len(zoo_names()) * 2 * 3
    assert {r.npu for r in runs} == {"ethos-u55-128", "ethos-u55-256", "ethos-u65-256"}
    assert {r.variant for r in runs} == {"fused", "unfused"}
    assert {r.runner for r in runs} == {"sim"}
    assert len({run_key(r) for r in runs}) == len(runs)


def test_run_key_is_stable_and_covers_every_option():
    run = load_suite(REPO / "examples/suites/zoo.toml").runs()[0]
    assert run_key(run) == run_key(replace(run))
    assert run_key(run) == "85fd135e16adeeb8"  # a change here invalidates everyone's --resume
    changed = [
        replace(run, npu="ethos-u55-256"),
        replace(run, variant="unfused"),
        replace(run, runner="tosa-ref"),
        replace(run, vela=replace(run.vela, optimise="Size")),
        replace(run, settings=replace(run.settings, seed=1)),
    ]
    assert len({run_key(r) for r in [run, *changed]}) == 6


def test_vela_option_sets_multiply_the_runs(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text(
        'models = ["zoo:conv2d_*"]\nnpus = ["ethos-u55-128"]\n'
        'runners = ["sim", "tosa-ref"]\n'
        '[[vela]]\nname = "perf"\noptimise = "Performance"\n'
        '[[vela]]\nname = "size"\noptimise = "Size"\nmemory_mode = "Sram_Only"\n'
    )
    suite = load_suite(path)
    assert suite.models == (
        "zoo:conv2d_bn_relu",
        "zoo:conv2d_bn_relu6",
        "zoo:conv2d_relu",
        "zoo:conv2d_relu6",
    )
    assert len(suite.runs()) == 4 * 2 * 2 * 2
    assert suite.vela[1].extra_flags() == ("--optimise=Size",)
    assert suite.vela[1].memory_mode == "Sram_Only"


@pytest.mark.parametrize(
    "text, key",
    [
        ('models = "zoo:ds_cnn"', "models"),
        ("models = []", "models"),
        ('models = ["zoo:nothing_*"]', "models"),
        ('models = ["zoo:ds_cnnn"]', "models"),
        ('models = ["missing_model.py:Net"]', "models"),
        ('models = ["missing.tflite"]', "models"),
        ('models = ["zoo:ds_cnn"]\nnpus = ["ethos-u85-256"]', "npus"),
        ('models = ["zoo:ds_cnn"]\nfusion = ["maybe"]', "fusion"),
        ('models = ["zoo:ds_cnn"]\nrunners = ["fvp", "fvp"]', "runners"),
        ('models = ["zoo:ds_cnn"]\ntargets = ["corstone-999"]', "targets"),
        ('models = ["zoo:ds_cnn"]\n[settings]\neval_samples = 0', "settings.eval_samples"),
        ('models = ["zoo:ds_cnn"]\n[[vela]]\noptimise = "Fast"', "vela[0].optimise"),
        ('models = ["zoo:ds_cnn"]\n[[vela]]\nspeed = 1', "vela[0].speed"),
        ('models = ["zoo:ds_cnn"]\nmodel = ["x"]', "model"),
    ],
)
def test_bad_suite_names_file_and_key(tmp_path, text, key):
    path = tmp_path / "bad.toml"
    path.write_text(text + "\n")
    with pytest.raises(UserError, match=re.escape(f"{path}: key '{key}'")):
        load_suite(path)


def test_suite_that_is_not_toml(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text("models = [\n")
    with pytest.raises(UserError, match="not valid TOML"):
        load_suite(path)


def _record(key: str, status: str, reason: str | None = None) -> BenchRecord:
    return BenchRecord(1, key, key, {}, status, reason)


def _append_many(path: str, worker: int) -> None:
    for i in range(50):
        append_record(Path(path), _record(f"{worker}-{i}", "failed", "x" * 5000))


def test_concurrent_appends_never_interleave(tmp_path):
    path = tmp_path / "results.jsonl"
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_append_many, args=(str(path), w)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    lines = path.read_text().splitlines()
    assert len(lines) == 200
    assert {json.loads(line)["key"] for line in lines} == {
        f"{w}-{i}" for w in range(4) for i in range(50)
    }


def test_torn_last_line_is_ignored_and_newest_record_wins(tmp_path):
    path = tmp_path / "results.jsonl"
    append_record(path, _record("a", "failed", "licence"))
    append_record(path, _record("b", "ok"))
    append_record(path, _record("a", "ok"))
    with open(path, "a") as handle:
        handle.write('{"key": "c", "sta')
    records = read_records(path)
    assert [r.key for r in records] == ["a", "b", "a"]
    assert latest(records)["a"].status == "ok"
    assert finished_keys(records[:2]) == {"b"}  # a failed run is run again by --resume
    assert finished_keys(records) == {"a", "b"}


def test_a_suite_past_the_large_limit_needs_large(tmp_path, capsys, monkeypatch):
    """A typo in an axis multiplies the runs: past LARGE_SUITE (here 3) the suite is refused in
    one line before anything runs, unless --large says it is meant."""
    import toolkit.cli.bench as bench_cli
    from toolkit.cli import main

    monkeypatch.setattr(bench_cli, "LARGE_SUITE", 3)
    suite = write_suite(tmp_path / "big.toml")
    assert load_suite(suite).size_bound == len(TINY_MODELS) * len(TINY_NPUS) * 2 == 8
    out = tmp_path / "out"
    assert main(["bench", str(suite), "--out", str(out)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"etk: error: suite {suite} expands to up to 8 runs (its axes' product), more "
        "than 3: check its axes, or pass --large to run it all"
    )
    assert not out.exists()


def test_quant_is_a_suite_axis_recorded_in_every_run(tmp_path):
    path = tmp_path / "s.toml"
    tflite = REPO / "tests/fixtures/ad01_int8.tflite"
    path.write_text(
        f'models = ["zoo:conv2d_relu", "{tflite}"]\nnpus = ["ethos-u55-128"]\n'
        'quant = ["int8", "a16w8"]\nrunners = ["sim"]\n'
    )
    runs = load_suite(path).runs()
    # conv2d_relu: 2 quantizations x 2 variants; the .tflite file: one run, int8, as it is
    assert [(r.model.split("/")[-1], r.variant, r.quant) for r in runs] == [
        ("zoo:conv2d_relu", "fused", "int8"),
        ("zoo:conv2d_relu", "unfused", "int8"),
        ("zoo:conv2d_relu", "fused", "a16w8"),
        ("zoo:conv2d_relu", "unfused", "a16w8"),
        ("ad01_int8.tflite", "tflite", "int8"),
    ]
    assert len({run_key(r) for r in runs}) == 5
    assert runs[2].label.endswith("runner=sim quant=a16w8")
    assert "quant" not in runs[0].label
    assert new_record(runs[2], "ok", None).spec["quant"] == "a16w8"


def test_an_unknown_quantization_in_a_suite_names_file_and_key(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('models = ["zoo:conv2d_relu"]\nquant = ["int4"]\n')
    with pytest.raises(UserError, match=re.escape(f"{path}: key 'quant'")):
        load_suite(path)
