"""A float interpreter of an int8 .tflite graph, for tests: the file's operators in NHWC with
weights and biases dequantized, following TFLite's definitions (TF "same" padding: the larger
half at the bottom/right), written without the importer's code so it can check it."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from ethosu.vela.tflite.AddOptions import AddOptions
from ethosu.vela.tflite.BuiltinOperator import BuiltinOperator as Op
from ethosu.vela.tflite.Conv2DOptions import Conv2DOptions
from ethosu.vela.tflite.DepthwiseConv2DOptions import DepthwiseConv2DOptions
from ethosu.vela.tflite.FullyConnectedOptions import FullyConnectedOptions
from ethosu.vela.tflite.Model import Model
from ethosu.vela.tflite.Pool2DOptions import Pool2DOptions


def _constant(model, graph, index):
    tensor = graph.Tensors(index)
    dtype = {9: np.int8, 2: np.int32}[tensor.Type()]
    q = np.frombuffer(model.Buffers(tensor.Buffer()).DataAsNumpy().tobytes(), dtype)
    q = q.reshape(tensor.ShapeAsNumpy()).astype(np.float64)
    quant = tensor.Quantization()
    scale, zero = quant.ScaleAsNumpy(), quant.ZeroPointAsNumpy()
    axis = quant.QuantizedDimension()
    shape = [1] * q.ndim
    if scale.size > 1:
        shape[axis] = scale.size
    return (q - zero.reshape(shape if zero.size > 1 else ())) * scale.reshape(
        shape if scale.size > 1 else ()
    )


def _options(op, cls):
    options, table = cls(), op.BuiltinOptions()
    options.Init(table.Bytes, table.Pos)
    return options


def _activation(x, code):
    return {0: x, 1: np.maximum(x, 0), 3: np.clip(x, 0, 6)}[code]


def _pad_same(x, kh, kw, sh, sw):
    n, h, w, c = x.shape
    th = max((math.ceil(h / sh) - 1) * sh + kh - h, 0)
    tw = max((math.ceil(w / sw) - 1) * sw + kw - w, 0)
    return np.pad(x, ((0, 0), (th // 2, th - th // 2), (tw // 2, tw - tw // 2), (0, 0)))


def _windows(x, kh, kw, sh, sw):
    n, h, w, c = x.shape
    oh, ow = (h - kh) // sh + 1, (w - kw) // sw + 1
    out = np.empty((n, oh, ow, kh, kw, c))
    for i in range(kh):
        for j in range(kw):
            out[:, :, :, i, j, :] = x[:, i : i + sh * oh : sh, j : j + sw * ow : sw, :]
    return out


def run_float(path: Path, x: np.ndarray) -> np.ndarray:
    """The float output of the last operator before a final SOFTMAX (or the graph output) for
    float NHWC input x (batch first)."""
    data = Path(path).read_bytes()
    model = Model.GetRootAs(data, 0)
    graph = model.Subgraphs(0)
    values = {int(graph.Inputs(0)): np.asarray(x, np.float64)}
    result = None
    for k in range(graph.OperatorsLength()):
        op = graph.Operators(k)
        code = model.OperatorCodes(op.OpcodeIndex())
        code = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
        ins, out = [int(i) for i in op.InputsAsNumpy()], int(op.Outputs(0))
        if code == Op.SOFTMAX:
            break
        if code in (Op.CONV_2D, Op.DEPTHWISE_CONV_2D):
            opts = _options(op, Conv2DOptions if code == Op.CONV_2D else DepthwiseConv2DOptions)
            w, b = _constant(model, graph, ins[1]), _constant(model, graph, ins[2])
            kh, kw = w.shape[1:3]
            xin = values[ins[0]]
            if opts.Padding() == 0:
                xin = _pad_same(xin, kh, kw, opts.StrideH(), opts.StrideW())
            win = _windows(xin, kh, kw, opts.StrideH(), opts.StrideW())
            if code == Op.CONV_2D:  # w: O H W I
                y = np.einsum("nhwijc,oijc->nhwo", win, w)
            else:  # w: 1 H W C
                y = np.einsum("nhwijc,ijc->nhwc", win, w[0])
            values[out] = _activation(y + b, opts.FusedActivationFunction())
        elif code == Op.FULLY_CONNECTED:
            opts = _options(op, FullyConnectedOptions)
            w, b = _constant(model, graph, ins[1]), _constant(model, graph, ins[2])
            xin = values[ins[0]].reshape(len(values[ins[0]]), -1)
            values[out] = _activation(xin @ w.T + b, opts.FusedActivationFunction())
        elif code == Op.AVERAGE_POOL_2D:
            opts = _options(op, Pool2DOptions)
            win = _windows(
                values[ins[0]],
                opts.FilterHeight(),
                opts.FilterWidth(),
                opts.StrideH(),
                opts.StrideW(),
            )
            values[out] = _activation(win.mean(axis=(3, 4)), opts.FusedActivationFunction())
        elif code == Op.ADD:
            opts = _options(op, AddOptions)
            values[out] = _activation(
                values[ins[0]] + values[ins[1]], opts.FusedActivationFunction()
            )
        elif code == Op.RESHAPE:
            values[out] = values[ins[0]].reshape(len(values[ins[0]]), -1)
        else:
            raise NotImplementedError(f"operator {code}")
        result = values[out]
    return result
