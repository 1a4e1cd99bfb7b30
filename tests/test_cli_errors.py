"""Bad input: one line naming the problem and the fix, exit code 2, no traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from toolkit.cli import main

FIXTURES = Path(__file__).parent / "fixtures"
USER = FIXTURES / "user_models.py"


def _run(capsys, *argv):
    code = main(list(argv))
    err = capsys.readouterr().err.strip()
    return code, err


@pytest.mark.parametrize("argv,expected", [
    (["compile", "missing.py:Net"], "model file missing.py not found"),
    (["compile", f"{USER}:Nope"], "has no 'Nope': it defines NeedsArgs, PoolNet, SmallNet"),
    (["compile", f"{USER}:NeedsArgs"], "needs constructor arguments (channels)"),
    (["compile", f"{USER}:SmallNet", "--input-shape", "1,5,8,8"], "does not run on inputs of shape (1, 5, 8, 8)"),
    (["compile", f"{USER}:SmallNet", "--input-shape", "1,x,8"], "is not a list of positive integers"),
    (["compile", "zoo:nope"], "unknown zoo model 'nope'"),
    (["compile", "zoo:conv2d_relu", "--target", "corstone-999"], "unknown target 'corstone-999'"),
    (["compile", "zoo:conv2d_relu", "--npu", "ethos-u55-100"], "unknown NPU configuration 'ethos-u55-100'"),
    (["compile", "zoo:conv2d_relu", "--npu", "ethos-u85-256"], "target 'corstone-300' has no ethos-u85-256"),
    (["compile", "model.onnx"], "cannot tell what model 'model.onnx' is"),
    (["compile", "zoo:conv2d_relu", "--vela-config", "missing.ini"],
     "Vela config missing.ini not found: give the path of a .ini file"),
])
def test_bad_input_is_one_line_exit_2(capsys, tmp_path, argv, expected):
    code, err = _run(capsys, *argv, "-o", str(tmp_path / "out"))
    assert code == 2
    assert expected in err
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "out" / "report.json").exists()


def test_calibration_folder_with_wrong_shapes(capsys, tmp_path):
    folder = tmp_path / "calib"
    folder.mkdir()
    np.save(folder / "a.npy", np.zeros((1, 3, 9, 9), np.float32))
    code, err = _run(capsys, "compile", "zoo:conv2d_relu", "--calibration-data", str(folder),
                     "-o", str(tmp_path / "out"))
    assert code == 2
    assert "a.npy has shape (1, 3, 9, 9), expected (1, 3, 16, 16)" in err


def test_debug_shows_traceback(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "toolkit.cli", "--debug", "compile", "zoo:nope",
                           "-o", str(tmp_path)], capture_output=True, text=True)
    assert proc.returncode != 0 and "Traceback" in proc.stderr


def test_malformed_target_file_names_file_key_and_type(capsys, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "bad"\n[npu]\ndefault = "ethos-u55-128"\nsupported = "ethos-u55-128"\n')
    code, err = _run(capsys, "compile", "zoo:conv2d_relu", "--target", str(bad))
    assert code == 2
    assert f"target file {bad}: key 'npu.supported' is str 'ethos-u55-128', expected a list of strings" in err


def test_file_model_with_factory_and_example_inputs(tmp_path, capsys):
    code = main(["compile", f"{USER}:make_small", "-o", str(tmp_path), "--eval-samples", "2"])
    assert code == 0
    assert (tmp_path / "fused" / "model.pte").is_file()
    assert (tmp_path / "report.md").read_text().startswith("# ")


def test_require_full_npu_fails_on_a_split_model_and_names_the_cpu_operator(tmp_path, capsys):
    code = main(["compile", f"{USER}:PoolNet", "--input-shape", "1,3,16,16", "--eval-samples", "1",
                 "--require-full-npu", "-o", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 1
    assert "--require-full-npu: fused: 1 delegates, 3 CPU operators" in out
    report = json.loads((tmp_path / "report.json").read_text())
    (pool,) = [op for op in report["variants"]["fused"]["cpu_ops"] if "avg_pool2d" in op["op"]]
    assert pool["reason"] == "Avgpool2d needs stride <= 3, got [8, 8]"
    assert pool["source"].startswith("pool (AvgPool2d) at user_models.py:")
