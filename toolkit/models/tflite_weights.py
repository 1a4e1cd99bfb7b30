"""The weighted layers of an int8 .tflite file, dequantized into PyTorch layouts.

Weights are int8 with one scale per output channel (or one per tensor); biases are int32 with
scale input_scale * weight_scale. Both dequantize as scale * (q - zero_point). Layouts: CONV_2D
weights are OHWI (PyTorch: OIHW), DEPTHWISE_CONV_2D 1HW(C*M) (PyTorch: (C*M)1HW), FULLY_CONNECTED
(out, in) as in PyTorch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from ethosu.vela.tflite.BuiltinOperator import BuiltinOperator
from ethosu.vela.tflite.Conv2DOptions import Conv2DOptions
from ethosu.vela.tflite.DepthwiseConv2DOptions import DepthwiseConv2DOptions
from ethosu.vela.tflite.FullyConnectedOptions import FullyConnectedOptions
from ethosu.vela.tflite.Model import Model

from ..errors import UserError

_KINDS = {
    BuiltinOperator.CONV_2D: "conv2d",
    BuiltinOperator.DEPTHWISE_CONV_2D: "depthwise",
    BuiltinOperator.FULLY_CONNECTED: "linear",
}
_ACTIVATIONS = {0: None, 1: "relu", 2: "relu_n1_to_1", 3: "relu6"}
_PADDING = {0: "same", 1: "valid"}


@dataclass(frozen=True)
class TfliteLayer:
    """One CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED operator of the file."""

    index: int  # operator index in the subgraph
    kind: str  # "conv2d", "depthwise", "linear"
    name: str  # the weight tensor's name
    weight: np.ndarray = field(repr=False)  # float32, PyTorch layout
    bias: np.ndarray | None = field(repr=False)  # float32, or None without a bias input
    stride: tuple[int, int] = (1, 1)
    padding: str = "valid"  # TF padding: "same" pads the extra row/column at the bottom/right
    activation: str | None = None  # the fused activation

    @property
    def tflite_shape(self) -> tuple[int, ...]:
        if self.kind == "conv2d":
            return tuple(self.weight.transpose(0, 2, 3, 1).shape)
        if self.kind == "depthwise":
            return (1, *self.weight.shape[2:], self.weight.shape[0])
        return tuple(self.weight.shape)

    def describe(self) -> str:
        kind = {"conv2d": "CONV_2D", "depthwise": "DEPTHWISE_CONV_2D", "linear": "FULLY_CONNECTED"}[
            self.kind
        ]
        return f"operator {self.index} {kind} '{self.name}' (weights {self.tflite_shape})"


def _dequantize(graph, tensor_index: int, data: Model, axis: int) -> np.ndarray:
    tensor = graph.Tensors(tensor_index)
    raw = data.Buffers(tensor.Buffer()).DataAsNumpy()
    dtype = {9: np.int8, 2: np.int32, 0: np.float32}.get(tensor.Type())
    if dtype is None or isinstance(raw, int):
        raise UserError(
            f"tensor '{tensor.Name().decode()}' is not a constant int8/int32/float32 "
            "tensor: only int8 .tflite files with constant weights can be imported"
        )
    values = np.frombuffer(raw.tobytes(), dtype).reshape(tensor.ShapeAsNumpy())
    if dtype == np.float32:
        return values.copy()
    quant = tensor.Quantization()
    scale = quant.ScaleAsNumpy().astype(np.float64)
    zero = quant.ZeroPointAsNumpy().astype(np.float64) if quant.ZeroPointLength() else 0.0
    if scale.size > 1:  # per channel along `axis`
        shape = [1] * values.ndim
        shape[axis] = scale.size
        scale, zero = scale.reshape(shape), np.reshape(zero, shape if np.size(zero) > 1 else ())
    return ((values.astype(np.float64) - zero) * scale).astype(np.float32)


def _options(op, kind: str):
    table = op.BuiltinOptions()
    options = {
        "conv2d": Conv2DOptions,
        "depthwise": DepthwiseConv2DOptions,
        "linear": FullyConnectedOptions,
    }[kind]()
    options.Init(table.Bytes, table.Pos)
    return options


def read_layers(path: Path) -> tuple[TfliteLayer, ...]:
    """The file's weighted layers in operator order, dequantized to float32."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"model file {path} not found")
    data = path.read_bytes()
    try:
        model = Model.GetRootAs(data, 0)
        graph = model.Subgraphs(0)
        count = graph.OperatorsLength()
    except Exception as exc:  # the flatbuffer library raises whatever it hits
        raise UserError(f"{path} is not a TFLite flatbuffer: {exc}") from None
    layers = []
    for index in range(count):
        op = graph.Operators(index)
        code = model.OperatorCodes(op.OpcodeIndex())
        kind = _KINDS.get(max(code.BuiltinCode(), code.DeprecatedBuiltinCode()))
        if kind is None:
            continue
        inputs = [int(i) for i in op.InputsAsNumpy()]
        options = _options(op, kind)
        if kind == "depthwise":  # 1 x H x W x C*M, per-channel scales on the last axis
            weight = _dequantize(graph, inputs[1], model, 3).transpose(3, 0, 1, 2)
        elif kind == "conv2d":  # O x H x W x I
            weight = _dequantize(graph, inputs[1], model, 0).transpose(0, 3, 1, 2)
        else:
            weight = _dequantize(graph, inputs[1], model, 0)
        bias = (
            _dequantize(graph, inputs[2], model, 0) if len(inputs) > 2 and inputs[2] >= 0 else None
        )
        stride = (options.StrideH(), options.StrideW()) if kind != "linear" else (1, 1)
        padding = _PADDING[options.Padding()] if kind != "linear" else "valid"
        layers.append(
            TfliteLayer(
                index,
                kind,
                graph.Tensors(inputs[1]).Name().decode(),
                np.ascontiguousarray(weight),
                bias,
                stride,
                padding,
                _ACTIVATIONS.get(options.FusedActivationFunction(), "other"),
            )
        )
    return tuple(layers)
