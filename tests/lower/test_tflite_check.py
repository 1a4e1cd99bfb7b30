"""A damaged, truncated, float or non-TFLite .tflite: one line and exit 2 before Vela reads it
(Vela's reader crashes the process on a truncated file)."""

from __future__ import annotations

from pathlib import Path

import pytest
from ethosu.vela.tflite.Model import Model

from toolkit.cli import main

KWS = Path(__file__).parents[1] / "fixtures" / "kws_ref_model.tflite"
_TENSOR_TYPE_SLOT = 6


def _float_input(data: bytes) -> bytes:
    """kws_ref_model with its input tensor's type set to FLOAT32 (0)."""
    graph = Model.GetRootAs(data, 0).Subgraphs(0)
    tensor = graph.Tensors(int(graph.InputsAsNumpy()[0]))
    position = tensor._tab.Pos + tensor._tab.Offset(_TENSOR_TYPE_SLOT)
    return data[:position] + b"\x00" + data[position + 1 :]


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda d: d[: len(d) * 6 // 10], "is truncated or damaged ("),
        (lambda d: d[:-1], "is truncated or damaged ("),
        (
            lambda d: b"",
            "is not a TFLite file (no TFL3 flatbuffer identifier): give an int8 .tflite",
        ),
        (
            lambda d: b"PK\x03\x04" + bytes(200),
            "is not a TFLite file (no TFL3 flatbuffer identifier)",
        ),
        (
            _float_input,
            "is not an int8 model: input tensor 0 is FLOAT32 (Vela compiles int8/int16 "
            "models: quantize it fully, or give a float edge its own QUANTIZE/DEQUANTIZE "
            "operator)",
        ),
    ],
)
def test_bad_tflite_is_one_line_exit_2(tmp_path, capsys, make, message):
    path = tmp_path / "model.tflite"
    path.write_bytes(make(KWS.read_bytes()))
    code = main(["compile", str(path), "-o", str(tmp_path / "out"), "--eval-samples", "1"])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err.startswith(f"etk: error: {path} ") and message in err
    assert len(err.splitlines()) == 1
    assert not (tmp_path / "out" / "tflite").exists()
