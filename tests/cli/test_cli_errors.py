"""Bad input: one line naming the problem and the fix, exit code 2, no traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from toolkit.cli import main

FIXTURES = Path(__file__).parents[1] / "fixtures"
USER = FIXTURES / "user_models.py"


def _run(capsys, *argv):
    code = main(list(argv))
    err = capsys.readouterr().err.strip()
    return code, err


@pytest.mark.parametrize(
    "argv,expected",
    [
        (["compile", "missing.py:Net"], "model file missing.py not found"),
        (
            ["compile", f"{USER}:Nope"],
            "has no 'Nope': it defines NeedsArgs, PoolNet, ScaledInputPrelu, SmallNet",
        ),
        (["compile", f"{USER}:NeedsArgs"], "needs constructor arguments (channels)"),
        (
            ["compile", f"{USER}:SmallNet", "--input-shape", "1,5,8,8"],
            "does not run on inputs of shape (1, 5, 8, 8)",
        ),
        (
            ["compile", f"{FIXTURES / 'token_models.py'}:token_classifier", "--input-shape", "1,8"],
            "wants integer inputs (Expected tensor for argument #1 'indices'",
        ),
        (
            ["compile", f"{USER}:SmallNet", "--input-shape", "1,x,8"],
            "is not a list of positive integers",
        ),
        (["compile", "zoo:nope"], "unknown zoo model 'nope'"),
        (
            ["compile", "zoo:conv2d_relu", "--target", "corstone-999"],
            "unknown target 'corstone-999'",
        ),
        (
            ["compile", "zoo:conv2d_relu", "--npu", "ethos-u55-100"],
            "unknown NPU configuration 'ethos-u55-100'",
        ),
        (
            ["compile", "zoo:conv2d_relu", "--npu", "ethos-u85-256"],
            "target 'corstone-300' has no ethos-u85-256",
        ),
        (["compile", "model.onnx"], "cannot tell what model 'model.onnx' is"),
        (["compile", "zoo:conv2d_relu@mlperf"], "unknown zoo model 'conv2d_relu@mlperf'"),
        (
            ["compare", "zoo:conv2d_relu", "--seeds", "2"],
            "--seeds repeats calibration to measure accuracy: pass --eval-data DIR too",
        ),
        (["compare", "zoo:conv2d_relu", "--seeds", "0"], "--seeds must be at least 1, got 0"),
        (["compile", "zoo:conv2d_relu", "--eval-data", "nowhere"], "nowhere holds no x.npy"),
        (
            ["compile", "zoo:conv2d_relu", "--quant", "int4"],
            "--quant 'int4' is not one of int8, a16w8",
        ),
        (
            ["compile", str(FIXTURES / "ad01_int8.tflite"), "--quant", "a16w8"],
            "--quant a16w8 quantizes a PyTorch model: a .tflite file runs as it is (int8)",
        ),
    ],
)
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
    code, err = _run(
        capsys,
        "compile",
        "zoo:conv2d_relu",
        "--calibration-data",
        str(folder),
        "-o",
        str(tmp_path / "out"),
    )
    assert code == 2
    assert "a.npy has shape (1, 3, 9, 9), expected (1, 3, 16, 16)" in err


def test_debug_shows_traceback(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "toolkit.cli",
            "--debug",
            "compile",
            "zoo:nope",
            "-o",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode != 0 and "Traceback" in proc.stderr


def test_malformed_target_file_names_file_key_and_type(capsys, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "bad"\n[npu]\ndefault = "ethos-u55-128"\nsupported = "ethos-u55-128"\n')
    code, err = _run(capsys, "compile", "zoo:conv2d_relu", "--target", str(bad))
    assert code == 2
    assert (
        f"target file {bad}: key 'npu.supported' is str 'ethos-u55-128', expected a list of strings"
        in err
    )


def test_file_model_with_factory_and_example_inputs(tmp_path, capsys):
    code = main(["compile", f"{USER}:make_small", "-o", str(tmp_path), "--eval-samples", "2"])
    assert code == 0
    assert (tmp_path / "fused" / "model.pte").is_file()
    assert (tmp_path / "report.md").read_text().startswith("# ")


def test_require_full_npu_fails_on_a_split_model_and_names_the_cpu_operator(tmp_path, capsys):
    code = main(
        [
            "compile",
            f"{USER}:PoolNet",
            "--input-shape",
            "1,3,16,16",
            "--eval-samples",
            "1",
            "--require-full-npu",
            "-o",
            str(tmp_path),
        ]
    )
    out = capsys.readouterr().out
    assert code == 1
    assert "--require-full-npu: fused: 1 delegates, 3 CPU operators" in out
    report = json.loads((tmp_path / "report.json").read_text())
    (pool,) = [op for op in report["variants"]["fused"]["cpu_ops"] if "avg_pool2d" in op["op"]]
    assert pool["reason"] == "Avgpool2d needs stride <= 3, got [8, 8]"
    assert pool["source"].startswith("pool (AvgPool2d) at user_models.py:")


# --- hostile-but-fair inputs (issue 13): each one line naming the problem, exit 2, up front ---

EMBEDDING = """
import torch
from torch import nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(10, 4)

    def forward(self, x):
        return self.embed(x)

def example_inputs():
    return (torch.zeros(1, 3, dtype=torch.long),)
"""

DICT_OUT = """
import torch
from torch import nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 1)

    def forward(self, x):
        return {"out": self.conv(x)}

def example_inputs():
    return (torch.randn(1, 3, 8, 8),)
"""


def _file(tmp_path, name, data):
    path = tmp_path / name
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return path


def _calibration(tmp_path, array):
    folder = tmp_path / "calib"
    folder.mkdir()
    np.save(folder / "a.npy", array)
    return ["compile", "zoo:conv2d_relu", "--calibration-data", str(folder)]


def _nan(tmp_path):
    array = np.zeros((1, 3, 16, 16), np.float32)
    array[0, 1, 2, 3] = np.nan
    return _calibration(tmp_path, array)


def _baseline(tmp_path, content):
    suite = _file(tmp_path, "suite.toml", 'models = ["zoo:conv2d_relu"]\n')
    base = _file(
        tmp_path, "base.json", content if isinstance(content, bytes) else json.dumps(content)
    )
    return ["bench", str(suite), "--baseline", str(base), "--out", str(tmp_path / "bench")]


_RUN = {
    "label": "r",
    "cycles": {
        "run": {"npu_cycles": 1, "kind": "simulated"},
        "estimate": {"npu_cycles": 1, "kind": "estimate"},
    },
    "outputs": [{"index": 0, "shape": [1], "codes": "eJxjYGBgAAAABAAB"}],
}


@pytest.mark.parametrize(
    "make, expected",
    [
        (
            lambda t: ["compile", str(_file(t, "empty.pt2", b""))],
            "empty.pt2 is not a torch.export .pt2 file (not a zip archive): save it with torch.export.save",
        ),
        (
            lambda t: [
                "compile",
                str(_file(t, "random.pt2", np.random.default_rng(0).bytes(4096))),
            ],
            "random.pt2 is not a torch.export .pt2 file (not a zip archive)",
        ),
        (
            _nan,
            "calibration file a.npy holds 1 NaN or infinite values: calibration needs finite inputs",
        ),
        (
            lambda t: _calibration(t, np.full((1, 3, 16, 16), "abc")),
            "calibration file a.npy holds <U3 data: give numbers",
        ),
        (
            lambda t: ["compile", f"{_file(t, 'embed.py', EMBEDDING)}:Net"],
            "embed.py:Net: input 0 is int64: etk quantizes float inputs to int8; an integer input (such "
            "as an embedding's indices) is not supported",
        ),
        (
            lambda t: ["compile", f"{_file(t, 'dict_out.py', DICT_OUT)}:Net"],
            "dict_out.py:Net: forward returns a dict; return a tensor or a tuple of tensors",
        ),
        (
            lambda t: ["compile", "zoo:conv2d_relu", "--eval-samples", "0"],
            "--eval-samples must be at least 1, got 0",
        ),
        (
            lambda t: ["compile", "zoo:conv2d_relu", "-o", "/sys/etk-read-only"],
            "output folder /sys/etk-read-only cannot be created: Operation not permitted; choose a "
            "writable folder",
        ),
        (
            lambda t: ["compile", "zoo:conv2d_relu", "-o", str(_file(t, "a_file", "x"))],
            "a_file is a file: choose a folder (-o/--out)",
        ),
        (
            lambda t: ["compile", "zoo:conv2d_relu", "-o", str(_file(t, "a_file", "x") / "out")],
            "a_file/out cannot be created: part of its path is a file; choose another folder",
        ),
        (
            lambda t: [
                "bench",
                str(_file(t, "s.toml", 'models = ["zoo:conv2d_relu"]\n')),
                "--out",
                str(_file(t, "a_file", "x") / "out"),
            ],
            "a_file/out cannot be created: part of its path is a file; choose another folder",
        ),
        (
            lambda t: [
                "compile",
                "zoo:conv2d_relu",
                "--target",
                str(_file(t, "t.toml", b'name = "caf\xe9"\n')),
            ],
            "t.toml is not UTF-8 text (byte 11): save it as UTF-8",
        ),
        (lambda t: _baseline(t, bytes(range(256))), "base.json is not JSON"),
        (
            lambda t: _baseline(t, {"schema": 1, "runs": {"k": {"label": "r"}}}),
            "base.json: run k has no label or cycles: make the baseline again with etk bench",
        ),
        (
            lambda t: _baseline(
                t, {"schema": 1, "runs": {"k": {**_RUN, "outputs": [{"codes": 7}]}}}
            ),
            "base.json: run k has an output without its codes (a base64 string)",
        ),
        (
            lambda t: _baseline(
                t, {"schema": 1, "runs": {"k": {**_RUN, "outputs": [{"codes": "@@"}]}}}
            ),
            "base.json: run k has output codes that do not decode",
        ),
        (
            lambda t: ["compile", "zoo:conv2d_relu", "--system-config", "Bogus"],
            "--system-config 'Bogus' is not in the Vela config file Arm/vela.ini: use one of "
            "Ethos_U55_Deep_Embedded, Ethos_U55_High_End_Embedded, ",
        ),
        (
            lambda t: ["compile", "zoo:conv2d_relu", "--memory-mode", "Fast_Sram"],
            "--memory-mode 'Fast_Sram' is not in the Vela config file Arm/vela.ini: use one of "
            "Dedicated_Sram, Dedicated_Sram_256KB, Dedicated_Sram_384KB, Dedicated_Sram_512KB, "
            "Shared_Sram, Sram_Only",
        ),
        (
            lambda t: ["compile", "zoo:conv2d_relu", "--vela-option=--optimise=Fast"],
            "--vela-option --optimise=Fast: Vela rejects it: invalid value 'Fast' (see vela --help)",
        ),
        (
            lambda t: ["compile", "zoo:conv2d_relu", "--vela-option=--no-such-flag"],
            "Vela rejects it: unrecognized arguments: --no-such-flag",
        ),
        (
            lambda t: ["compile", "zoo:conv2d_relu", "--vela-option=--system-config=X"],
            "--vela-option=--system-config=X: etk sets --system-config itself; use --system-config",
        ),
        (
            lambda t: ["compile", str(_file(t, "junk.tflite", b"\x00" * 64))],
            "junk.tflite is not a TFLite file (no TFL3 flatbuffer identifier)",
        ),
    ],
    ids=[
        "empty-pt2",
        "random-pt2",
        "nan-calibration",
        "string-calibration",
        "int64-input",
        "dict-output",
        "eval-samples-0",
        "read-only-out",
        "out-is-file",
        "out-under-file",
        "bench-out-under-file",
        "non-utf8-target",
        "binary-baseline",
        "hollow-baseline",
        "baseline-codes-type",
        "baseline-codes-garbage",
        "system-config",
        "memory-mode",
        "vela-value",
        "vela-flag",
        "vela-own-flag",
        "non-tflite",
    ],
)
def test_hostile_input_is_one_line_exit_2(capsys, tmp_path, make, expected):
    argv = make(tmp_path)
    if argv[0] == "compile" and "-o" not in argv:
        argv += ["-o", str(tmp_path / "out")]
    code = main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert err.startswith("etk: error: ") and expected in err
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "out" / "report.json").exists()


def test_version_is_the_packages():
    import subprocess
    import sys

    import toolkit

    done = subprocess.run(
        [sys.executable, "-m", "toolkit.cli", "--version"], capture_output=True, text=True
    )
    assert (done.returncode, done.stdout) == (0, f"etk {toolkit.__version__}\n")


def test_the_help_says_how_to_give_several_inputs():
    from toolkit.cli import build_parser

    deploy = build_parser()._subparsers._group_actions[0].choices["deploy"]
    (action,) = [a for a in deploy._actions if "--input-shape" in a.option_strings]
    assert "several inputs separated by ';'" in action.help and "'1,3,16,16;1,8'" in action.help


@pytest.mark.parametrize(
    "model, message",
    [
        ("/nonexistent/model.py", "cannot tell what model '/nonexistent/model.py' is"),
        ("/nonexistent/m.py:Net", "model file /nonexistent/m.py not found"),
        ("missing.pt2", "model file missing.pt2 not found"),
    ],
)
def test_a_model_that_cannot_load_is_refused_before_torch_is_imported(model, message):
    """The spec is checked before torch's import (6-10 s): the refusal comes without it."""
    import subprocess
    import sys

    code = (
        "import sys; from toolkit.cli import main; rc = main(sys.argv[1:]); "
        "print('torch' in sys.modules); sys.exit(rc)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, "deploy", model], capture_output=True, text=True
    )
    assert (done.returncode, done.stdout.strip()) == (2, "False")
    assert done.stderr.startswith(f"etk: error: {message}")
