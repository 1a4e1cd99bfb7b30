"""Trained MLPerf Tiny ports (zoo:NAME@mlperf) and `etk import-weights`, against the reference
.tflite files run in float by an interpreter written apart from the importer
(tests/tflite_float_reference.py: the file's own operators, padding and layouts)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from toolkit.cli import main
from toolkit.models.loader import load_model

from .tflite_float_reference import run_float

FIXTURES = Path(__file__).parents[1] / "fixtures"
KWS = Path(__file__).parents[2] / "examples" / "data" / "kws-speech-commands"
KWS_INPUT_SCALE, KWS_INPUT_ZERO_POINT = 0.5847029089927673, 83  # the file's input quantization
# port -> (file, float NHWC input range, samples)
PORTS = {
    "resnet8": ("pretrainedResnet_quant.tflite", (0, 255), 4),
    "mobilenet_v1_025": ("vww_96_int8.tflite", (0, 1), 2),
    "fc_autoencoder": ("ad01_int8.tflite", (-30, 60), 8),
}


def _torch_outputs(spec: str, x_nhwc: np.ndarray) -> np.ndarray:
    x = torch.from_numpy(x_nhwc.astype(np.float32))
    with torch.no_grad():
        return load_model(spec).module(x.permute(0, 3, 1, 2) if x.dim() == 4 else x).numpy()


def test_trained_ds_cnn_matches_the_dequantized_tflite_model_on_kws_data():
    codes = np.load(KWS / "kws_x_int8.npy")[:100]
    labels = np.load(KWS / "kws_y.npy")[:100]
    x = (codes.astype(np.float32) - KWS_INPUT_ZERO_POINT) * KWS_INPUT_SCALE
    reference = run_float(FIXTURES / "kws_ref_model.tflite", x)  # logits before the softmax
    ours = _torch_outputs("zoo:ds_cnn@mlperf", x)
    assert np.abs(reference).max() > 10  # logits of a trained network, not zeros
    np.testing.assert_allclose(ours, reference, atol=1e-4, rtol=0)
    assert np.mean(ours.argmax(1) == labels) == pytest.approx(0.94)  # 94 of these 100


@pytest.mark.parametrize("name", sorted(PORTS))
def test_trained_ports_match_the_dequantized_tflite_models(name):
    file, (low, high), samples = PORTS[name]
    shape = load_model(f"zoo:{name}").example_inputs[0].shape
    nhwc = (samples, *shape[2:], shape[1]) if len(shape) == 4 else (samples, *shape[1:])
    x = np.random.default_rng(0).uniform(low, high, nhwc)
    reference = run_float(FIXTURES / file, x)
    np.testing.assert_allclose(
        _torch_outputs(f"zoo:{name}@mlperf", x),
        reference,
        atol=1e-4 * np.abs(reference).max(),
        rtol=0,
    )


def test_the_float_reference_sees_a_padding_error():
    """PyTorch's symmetric padding on DS-CNN's stride-2 conv (5 rows each side instead of TF's
    4 + 5) shifts every window by a row: the check above would fail."""
    model = load_model("zoo:ds_cnn@mlperf").module
    pad, conv = model.features[0][0], model.features[0][1]
    shifted = torch.nn.Sequential(
        torch.nn.ZeroPad2d((1, 1, 5, 5)), torch.nn.Conv2d(1, 64, (10, 4), 2, bias=True)
    )
    shifted[1].load_state_dict(conv.state_dict())
    x = np.random.default_rng(1).normal(0, 20, (2, 49, 10, 1))
    xt = torch.from_numpy(x.astype(np.float32)).permute(0, 3, 1, 2)
    with torch.no_grad():
        ours, wrong = conv(pad(xt)), shifted(xt)
    assert ours.shape == wrong.shape == (2, 64, 25, 5)
    assert torch.abs(ours - wrong).max() > 1


def test_import_weights_writes_a_pt2_with_the_trained_weights(tmp_path, capsys):
    user = tmp_path / "kws.py"
    user.write_text(
        "import torch\nfrom toolkit.models.zoo.mlperf_tiny import DSCNN\n\n"
        "def build():\n    return DSCNN(folded=True)\n\n"
        "def example_inputs():\n    return (torch.zeros(1, 1, 49, 10),)\n"
    )
    out = tmp_path / "kws.pt2"
    assert (
        main(
            [
                "import-weights",
                str(FIXTURES / "kws_ref_model.tflite"),
                "--into",
                f"{user}:build",
                "-o",
                str(out),
            ]
        )
        == 0
    )
    assert capsys.readouterr().out == (
        f"wrote {out}: {user}:build with the weights of kws_ref_model.tflite\n"
    )
    x = np.random.default_rng(2).normal(0, 20, (1, 49, 10, 1))
    module = torch.export.load(str(out)).module()
    with torch.no_grad():
        ours = module(torch.from_numpy(x.astype(np.float32)).permute(0, 3, 1, 2)).numpy()
    np.testing.assert_allclose(ours, run_float(FIXTURES / "kws_ref_model.tflite", x), atol=1e-4)


def test_import_weights_names_the_first_mismatching_layer(capsys):
    code = main(
        [
            "import-weights",
            str(FIXTURES / "kws_ref_model.tflite"),
            "--into",
            f"{FIXTURES / 'user_models.py'}:SmallNet",
            "-o",
            "/nonexistent/x.pt2",
        ]
    )
    assert code == 2
    assert capsys.readouterr().err == (
        "etk: error: first mismatching layer: layer 1 conv (Conv2d, weight (4, 3, 3, 3)) vs "
        "kws_ref_model.tflite operator 0 CONV_2D 'functional_1/conv2d/Conv2D' (weights "
        "(64, 10, 4, 1)): expected weight (64, 1, 10, 4) in PyTorch layout\n"
    )


def test_import_weights_wants_a_bias_where_batch_norm_was_folded(capsys):
    from toolkit.errors import UserError
    from toolkit.models.import_weights import load_tflite_weights
    from toolkit.models.zoo.mlperf_tiny import FCAutoencoder

    model = FCAutoencoder(folded=True)
    model.body[0] = torch.nn.Linear(640, 128, bias=False)
    with pytest.raises(
        UserError,
        match=r"^layer 1 body.0 \(Linear, weight \(128, 640\)\) vs "
        r"ad01_int8.tflite operator 0 FULLY_CONNECTED 'functional_1/dense/MatMul' "
        r"\(weights \(128, 640\)\): the file has a bias \(batch norm folded in\) "
        r"and the layer has none: build it with bias=True$",
    ):
        load_tflite_weights(
            model, (torch.zeros(1, 640),), FIXTURES / "ad01_int8.tflite", "ad01_int8.tflite"
        )
