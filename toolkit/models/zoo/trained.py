"""zoo:NAME@mlperf: the MLPerf Tiny ports with the trained weights of the reference .tflite files.

The files (weights/, Apache-2.0, from mlcommons/tiny) hold int8 weights with batch norm folded
in; they are dequantized (per-channel scales) into the ports built with folded=True. The PyTorch
interface stays NCHW float: the file's int8 input is real = scale * (q - zero_point), so a float
input of the port is what the file's input dequantizes to (KWS: MFCC features; ResNet-8: pixel
values 0..255; VWW: pixels 0..1).
"""

from __future__ import annotations

from pathlib import Path

from torch import nn

from ..import_weights import load_tflite_weights
from .mlperf_tiny import DSCNN, FCAutoencoder, MobileNetV1, ResNet8

WEIGHTS = Path(__file__).parent / "weights"
TRAINED_FILES = {
    "ds_cnn": "kws_ref_model.tflite",
    "mobilenet_v1_025": "vww_96_int8.tflite",
    "resnet8": "pretrainedResnet_quant.tflite",
    "fc_autoencoder": "ad01_int8.tflite",
}
_CLASSES = {
    "ds_cnn": DSCNN,
    "mobilenet_v1_025": MobileNetV1,
    "resnet8": ResNet8,
    "fc_autoencoder": FCAutoencoder,
}


def trained_file(name: str) -> Path:
    return WEIGHTS / TRAINED_FILES[name]


def trained_model(name: str, example_inputs: tuple) -> nn.Module:
    model = _CLASSES[name](folded=True).eval()
    load_tflite_weights(model, example_inputs, trained_file(name), TRAINED_FILES[name])
    return model
