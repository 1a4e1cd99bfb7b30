"""A .tflite file as MODEL: Vela compiles it as it is; same reports; runs on the simulator."""

from __future__ import annotations

import json
from pathlib import Path

from toolkit.cli import main

TFLITE = Path(__file__).parent / "fixtures" / "ad01_int8.tflite"


def test_compile_tflite_reports_vela_figures(tmp_path):
    assert main(["compile", str(TFLITE), "--eval-samples", "1", "-o", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "report.json").read_text())
    entry = report["variants"]["tflite"]
    assert entry["delegates"] == 1 and entry["cpu_ops"] == [] and entry["npu_ops"] == 10
    # the figures in the reference models' README (Vela 5.1.0, ethos-u55-128, Shared_Sram)
    assert (entry["estimate"]["npu_cycles"], entry["estimate"]["total_cycles"]) == (41_404, 201_184)
    assert entry["io"]["inputs"][0]["dtype"] == "int8"
    assert "accuracy" not in entry  # no float model to compare against


def test_deploy_tflite_on_the_simulator(tmp_path):
    assert main(["deploy", str(TFLITE), "--eval-samples", "1", "-o", str(tmp_path)]) == 0
    run = json.loads((tmp_path / "report.json").read_text())["variants"]["tflite"]["run"]
    assert run["runner"] == "sim" and run["cycles"]["kind"] == "simulated"
    assert run["outputs_match_reference"] is None  # nothing to compare a .tflite run with
    assert len(list((tmp_path / "tflite" / "run_sim").glob("output_0_*.npy"))) == 1


def test_tflite_on_another_runner_is_refused(tmp_path, capsys):
    assert main(["deploy", str(TFLITE), "--runner", "tosa-ref", "-o", str(tmp_path)]) == 2
    assert "a .tflite model runs on the simulator only" in capsys.readouterr().err
