"""A .tflite model in a suite (one run, simulator only, no accuracy figures) and run keys that
cover a file model's contents."""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import replace

import numpy as np
import pytest

from toolkit.bench.report import md_text
from toolkit.bench.results import decode_codes, encode_codes, run_key
from toolkit.bench.runs import execute_run
from toolkit.bench.suite import load_suite
from toolkit.cli import main
from toolkit.errors import UserError

from .helpers import REPO, records, write_suite

AD01 = REPO / "tests/fixtures/ad01_int8.tflite"
# Vela 5.1.0's estimate of ad01_int8.tflite on ethos-u55-128, Shared_Sram
AD01_NPU_CYCLES, AD01_TOTAL_CYCLES, AD01_NPU_OPS = 41_404, 201_184, 10


@pytest.fixture(scope="module")
def tflite_bench(tmp_path_factory):
    """`etk bench` of ad01_int8.tflite with fusion on and off, on the simulator and tosa-ref."""
    root = tmp_path_factory.mktemp("tflite_bench")
    suite = write_suite(root / "tflite.toml", models=[str(AD01)], npus=["ethos-u55-128"])
    suite.write_text(
        suite.read_text().replace('runners = ["sim"]', 'runners = ["sim", "tosa-ref"]')
    )
    out = root / "out"
    code = main(["bench", str(suite), "--out", str(out)])
    return suite, out, code


def _by_runner(out) -> dict[str, dict]:
    return {r["spec"]["runner"]: r for r in records(out)}


def test_tflite_model_is_one_run_per_config_whatever_the_fusion(tmp_path):
    suite = load_suite(
        write_suite(
            tmp_path / "s.toml",
            models=[str(AD01), "zoo:linear_relu6"],
            npus=["ethos-u55-128", "ethos-u65-256"],
        )
    )
    runs = [r for r in suite.runs() if r.model == str(AD01)]
    assert [r.variant for r in runs] == ["tflite", "tflite"]  # one per NPU, not one per fusion
    assert {r.npu for r in runs} == {"ethos-u55-128", "ethos-u65-256"}
    assert {r.model_sha256 for r in runs} == {hashlib.sha256(AD01.read_bytes()).hexdigest()}
    zoo = [r for r in suite.runs() if r.model == "zoo:linear_relu6"]
    assert sorted(r.variant for r in zoo) == ["fused", "fused", "unfused", "unfused"]
    assert all(r.model_sha256 is None for r in zoo)


def test_tflite_run_on_the_simulator_records_the_estimate(tflite_bench):
    suite, out, code = tflite_bench
    assert code == 1  # the tosa-ref run fails (test below): bench says so in its exit code
    assert len(load_suite(suite).runs()) == 2 and len(records(out)) == 2  # sim and tosa-ref
    r = _by_runner(out)["sim"]
    assert r["status"] == "ok", r["reason"]
    assert r["spec"]["variant"] == "tflite" and r["runner"]["name"] == "sim"
    assert r["cycles"]["estimate"] == {
        "kind": "estimate",
        "source": "Vela",
        "npu_cycles": AD01_NPU_CYCLES,
        "total_cycles": AD01_TOTAL_CYCLES,
    }
    assert r["npu_ops"] == AD01_NPU_OPS
    assert r["vela"]["memory_mode"] == "Shared_Sram"
    assert sum(row["npu_cycles"] for row in r["layers"]["rows"]) == AD01_NPU_CYCLES
    assert r["cycles"]["run"]["kind"] == "simulated" and r["cycles"]["run"]["npu_cycles"] > 0
    # no float model: no accuracy keys, and nothing to compare the outputs with
    assert "sqnr_db" not in r["outputs"] and "cosine" not in r["outputs"]
    assert r["outputs"]["outputs_match_reference"] is None
    assert r["outputs"]["max_diff_lsb"] is None and r["outputs"]["exact_match_rate"] is None
    # the output codes are the simulator's int8 outputs as they are
    (output,) = r["outputs"]["quantized"]
    saved = np.stack([np.load(f"{r['out_dir']}/tflite/run_sim/output_{k}_0.npy") for k in range(2)])
    assert output["shape"] == list(saved.shape) == [2, 1, 640]
    assert np.array_equal(decode_codes(output["codes"]), saved.ravel())


def test_tflite_on_another_runner_is_a_failed_record_with_the_reason(tflite_bench):
    _, out, _ = tflite_bench
    r = _by_runner(out)["tosa-ref"]
    assert r["status"] == "failed" and r["spec"]["variant"] == "tflite"
    assert "a .tflite model runs on the simulator only" in r["reason"]
    assert "tosa-ref" in r["reason"]


def test_report_with_a_tflite_record(tflite_bench, tiny_bench, tmp_path, capsys):
    """Next to zoo runs: the tflite run is a row of its own, the fused/unfused pairs are intact."""
    _, out, _ = tflite_bench
    _, zoo_out, _ = tiny_bench
    folder = tmp_path / "mixed"
    folder.mkdir()
    zoo = (zoo_out / "results.jsonl").read_text()
    (folder / "results.jsonl").write_text(zoo + (out / "results.jsonl").read_text())
    assert main(["report", str(folder), "--html"]) == 0
    text = (folder / "report.md").read_text()
    ad01 = md_text(AD01)  # a results field in Markdown: its _ escaped
    total = len(zoo.splitlines()) + 2
    assert f"{total} runs, {total - 1} ok, 1 failed" in text
    runs = [
        line
        for line in text.split("## Runs")[1].split("## Fused")[0].splitlines()
        if line.startswith(f"| {ad01} ")
    ]
    assert runs == [
        f"| {ad01} | corstone-300 | ethos-u55-128 | tflite | int8 | default | sim | ok | "
        f"{AD01_NPU_CYCLES} | {_by_runner(out)['sim']['cycles']['run']['npu_cycles']} | "
        "simulated | - | - | - |",
        f"| {ad01} | corstone-300 | ethos-u55-128 | tflite | int8 | default | tosa-ref | failed | "
        "- | - | - | - | - | - |",
    ]
    pairs = text.split("## Fused vs unfused")[1].split("## Failed")[0]
    assert ad01 not in pairs and pairs.count("| zoo:") == 4
    assert f"{ad01} tflite ethos-u55-128 default tosa-ref: " in text.split("## Failed runs")[1]
    page = (folder / "report.html").read_text()
    assert page.count("<img ") == 4 and f"<td>{AD01_NPU_CYCLES}</td>" in page
    # on its own: no pairs to plot, only its estimated vs simulated point
    assert main(["report", str(out), "--html"]) == 0
    assert "2 runs, 1 ok, 1 failed" in (out / "report.md").read_text()
    assert (out / "report.html").read_text().count("<img ") == 1


def test_baseline_of_a_tflite_run(tflite_bench, tmp_path, capsys):
    suite, out, _ = tflite_bench
    baseline = json.loads((out / "baseline.json").read_text())
    ok_key = _by_runner(out)["sim"]["key"]
    assert list(baseline["runs"]) == [ok_key]
    (run,) = baseline["runs"].values()
    codes = decode_codes(run["outputs"][0]["codes"]).copy()
    codes[0] += 2
    run["outputs"][0]["codes"] = encode_codes(codes)
    doctored = tmp_path / "BASELINE.json"
    doctored.write_text(json.dumps(baseline))
    folder = tmp_path / "again"  # a copy: --resume runs the failed tosa-ref run again
    shutil.copytree(out, folder)
    args = ["bench", str(suite), "--out", str(folder), "--resume"]
    # exit 1: the tosa-ref run fails again (a .tflite runs on the simulator only)
    assert main(args + ["--baseline", str(out / "baseline.json")]) == 1
    err = capsys.readouterr().err
    assert "no regression" in err and "etk: 1 runs failed" in err
    assert main(args + ["--baseline", str(doctored), "--tolerance-lsb", "1"]) == 1
    assert "2 LSB" in capsys.readouterr().out
    assert len([r for r in records(folder) if r["status"] == "ok"]) == 1  # never re-run


MODEL_PY = """import torch

def example_inputs():
    return (torch.randn(1, 16),)

def net():
    return torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU{act})
"""


def _keys(suite_path) -> list[str]:
    return [run_key(r) for r in load_suite(suite_path).runs()]


def _contents(kind: str, version: int) -> bytes:
    if kind == "py":
        return MODEL_PY.format(act="6()" if version else "()").encode()
    return bytes([version]) * 64


@pytest.mark.parametrize("kind", ["py", "pt2", "tflite"])
def test_run_key_covers_the_file_models_bytes(tmp_path, kind):
    path = tmp_path / f"model.{kind}"
    model = f"{path}:net" if kind == "py" else str(path)
    path.write_bytes(_contents(kind, 0))
    suite = write_suite(
        tmp_path / "s.toml",
        models=[model, "zoo:linear_relu6"],
        npus=["ethos-u55-128"],
        fusion=["on"],
    )
    before = _keys(suite)
    assert _keys(suite) == before  # same bytes, same keys
    path.write_bytes(_contents(kind, 1))
    after = _keys(suite)
    assert after[0] != before[0]  # the edited model runs again under --resume
    assert after[1] == before[1]  # a zoo model is keyed by its name
    path.write_bytes(_contents(kind, 0))
    assert _keys(suite) == before


def test_relative_model_paths_are_hashed_from_the_current_directory(tmp_path, monkeypatch):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "m.tflite").write_bytes(b"a")
    (tmp_path / "b" / "m.tflite").write_bytes(b"b")
    suite = write_suite(tmp_path / "s.toml", models=["m.tflite"], npus=["ethos-u55-128"])
    keys = {}
    for sub in ("a", "b"):
        monkeypatch.chdir(tmp_path / sub)
        (run,) = load_suite(suite).runs()
        keys[sub] = run_key(run)
    assert keys["a"] != keys["b"]


def test_missing_model_file_is_a_suite_error_or_fails_the_run(tmp_path):
    gone = tmp_path / "gone.tflite"
    suite = write_suite(tmp_path / "s.toml", models=[str(gone)], npus=["ethos-u55-128"])
    with pytest.raises(UserError, match=f"key 'models' names '{gone}', but {gone} is not a file"):
        load_suite(suite)
    shutil.copyfile(AD01, gone)
    (run,) = load_suite(suite).runs()
    gone.unlink()  # after the suite was expanded
    record = execute_run(run, str(tmp_path / "out"))
    assert record.status == "failed"
    assert f"model file {tmp_path / 'gone.tflite'} not found" in record.reason


def test_model_edited_after_expansion_fails_rather_than_mislabel(tmp_path):
    path = tmp_path / "m.tflite"
    path.write_bytes(b"old")
    suite = write_suite(tmp_path / "s.toml", models=[str(path)], npus=["ethos-u55-128"])
    (run,) = load_suite(suite).runs()
    path.write_bytes(b"new")
    record = execute_run(run, str(tmp_path / "out"))
    assert record.status == "failed" and record.key == run_key(run)
    assert "changed after the suite started" in record.reason
    assert run_key(replace(run, model_sha256=None)) != run_key(run)


def test_a_run_of_a_program_vela_compiled_wrongly_fails_with_the_problem(tmp_path, monkeypatch):
    """Its cycles are of a program that computes wrong results: the record says so, not figures
    (the problem here is planted: the suites' default rewrites avoid the ones known)."""
    from toolkit import pipeline
    from toolkit.lower.vela_check import VelaProblem

    planted = VelaProblem(0, 0x120, "conv", "reads an IFM of 4x1 with IFM_PAD_BOTTOM 12")
    monkeypatch.setattr(pipeline, "program_problems", lambda program: (planted,))
    suite = write_suite(
        tmp_path / "s.toml", models=["zoo:conv2d_relu"], npus=["ethos-u55-128"], fusion=("off",)
    )
    (run,) = load_suite(suite).runs()
    record = execute_run(run, str(tmp_path / "out"))
    assert record.status == "failed"
    assert record.reason == planted.describe()
    assert record.cycles is None
