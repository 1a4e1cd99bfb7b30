"""A .tflite file as MODEL: Vela compiles it as it is; same reports; runs on the simulator."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tflite_edit import without_final_softmax

from toolkit.cli import main
from toolkit.errors import UserError
from toolkit.lower.tflite import compile_tflite
from toolkit.targets import load_target

TFLITE = Path(__file__).parents[1] / "fixtures" / "ad01_int8.tflite"


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


KWS = Path(__file__).parents[1] / "fixtures" / "kws_ref_model.tflite"


def test_reference_without_its_softmax_is_the_network_body(tmp_path):
    npu = load_target("corstone-300").npu("ethos-u55-128")
    full = compile_tflite(KWS, npu, tmp_path / "full")
    body_path = tmp_path / "kws_body.tflite"
    body_path.write_bytes(without_final_softmax(KWS.read_bytes(), KWS.name))
    body = compile_tflite(body_path, npu, tmp_path / "body")
    # the softmax is 28 small NPU operations (Vela 5.1.0: 27; 5.2.0 adds an elementwise one,
    # and the full model stays bit-exact with TFLite's reference kernels: test_tflite_softmax.py)
    assert (full.npu_ops, body.npu_ops) == (40, 12)
    assert body.output_specs[0].shape == (1, 12) and body.output_quant[0].zero_point == 14
    # Vela 5.2.0 estimates (5.1.0: 88,889 and 88,103 for a body stream byte-identical to 5.2.0's)
    assert (full.delegates[0].estimate.npu_cycles, body.delegates[0].estimate.npu_cycles) == (
        88_902,
        88_095,
    )


def test_dropping_a_softmax_that_is_not_there_is_refused():
    with pytest.raises(UserError, match="ad01_int8.tflite does not end in a SOFTMAX operator"):
        without_final_softmax(TFLITE.read_bytes(), TFLITE.name)
