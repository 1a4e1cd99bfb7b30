"""Tiny TFLite flatbuffers for the simulator's tests: a chain of unary quantized operators.

Built with the flatbuffer bindings Vela ships (ethosu.vela.tflite), so no TensorFlow is needed.
"""

from __future__ import annotations

import flatbuffers
import numpy as np
from ethosu.vela.tflite import (
    Buffer,
    Model,
    Operator,
    OperatorCode,
    QuantizationParameters,
    SubGraph,
    Tensor,
)
from ethosu.vela.tflite.BuiltinOperator import BuiltinOperator
from ethosu.vela.tflite.TensorType import TensorType

from toolkit.sim import simulate

# Operator versions the TFLite 2.14 reference resolver registers for 8-bit tensors
_VERSIONS = {"TANH": 2, "LOGISTIC": 2}


def _ints(b: flatbuffers.Builder, start, values) -> int:
    start(b, len(values))
    for v in reversed(values):
        b.PrependInt32(v)
    return b.EndVector()


def _offsets(b: flatbuffers.Builder, start, offsets) -> int:
    start(b, len(offsets))
    for o in reversed(offsets):
        b.PrependUOffsetTRelative(o)
    return b.EndVector()


def _quantization(b: flatbuffers.Builder, scale: float, zero_point: int) -> int:
    QuantizationParameters.StartScaleVector(b, 1)
    b.PrependFloat32(scale)
    scales = b.EndVector()
    QuantizationParameters.StartZeroPointVector(b, 1)
    b.PrependInt64(zero_point)
    zero_points = b.EndVector()
    QuantizationParameters.Start(b)
    QuantizationParameters.AddScale(b, scales)
    QuantizationParameters.AddZeroPoint(b, zero_points)
    return QuantizationParameters.End(b)


def unary_chain(
    ops: list[tuple[str, tuple[float, int]]],
    shape: tuple[int, ...],
    input_quant: tuple[float, int],
    uint8: bool = False,
    float_edges: bool = False,
) -> bytes:
    """input -> ops[0] -> ops[1] -> ... -> output; each op is (BuiltinOperator name, its output's
    (scale, zero point)); every tensor has `shape` and is int8 (or uint8). `float_edges`: the
    first and last tensors are float32 (ops[0] a QUANTIZE, ops[-1] a DEQUANTIZE)."""
    b = flatbuffers.Builder(1024)
    tensors = []
    for i, quant in enumerate([input_quant] + [q for _, q in ops]):
        dtype = TensorType.UINT8 if uint8 else TensorType.INT8
        if float_edges and i in (0, len(ops)):
            dtype = TensorType.FLOAT32
        name = b.CreateString(f"t{i}")
        dims = _ints(b, Tensor.StartShapeVector, list(shape))
        q = _quantization(b, *quant)
        Tensor.Start(b)
        Tensor.AddShape(b, dims)
        Tensor.AddType(b, dtype)
        Tensor.AddBuffer(b, i + 1)
        Tensor.AddName(b, name)
        Tensor.AddQuantization(b, q)
        tensors.append(Tensor.End(b))
    names = sorted({op for op, _ in ops})
    operators = []
    for i, (op, _) in enumerate(ops):
        inputs = _ints(b, Operator.StartInputsVector, [i])
        outputs = _ints(b, Operator.StartOutputsVector, [i + 1])
        Operator.Start(b)
        Operator.AddOpcodeIndex(b, names.index(op))
        Operator.AddInputs(b, inputs)
        Operator.AddOutputs(b, outputs)
        operators.append(Operator.End(b))
    graph = subgraph(b, tensors, operators, len(ops))
    codes = []
    for op in names:
        code = getattr(BuiltinOperator, op)
        OperatorCode.Start(b)
        OperatorCode.AddBuiltinCode(b, code)
        OperatorCode.AddDeprecatedBuiltinCode(b, min(code, 127))
        OperatorCode.AddVersion(b, _VERSIONS.get(op, 1))
        codes.append(OperatorCode.End(b))
    return finish_model(b, graph, codes, len(tensors))


def subgraph(b: flatbuffers.Builder, tensors: list[int], operators: list[int], output: int) -> int:
    """A SubGraph table: tensor 0 is the input, tensor `output` the output."""
    tensor_vec = _offsets(b, SubGraph.StartTensorsVector, tensors)
    operator_vec = _offsets(b, SubGraph.StartOperatorsVector, operators)
    graph_inputs = _ints(b, SubGraph.StartInputsVector, [0])
    graph_outputs = _ints(b, SubGraph.StartOutputsVector, [output])
    SubGraph.Start(b)
    SubGraph.AddTensors(b, tensor_vec)
    SubGraph.AddInputs(b, graph_inputs)
    SubGraph.AddOutputs(b, graph_outputs)
    SubGraph.AddOperators(b, operator_vec)
    return SubGraph.End(b)


def finish_model(b: flatbuffers.Builder, graph: int, codes: list[int], tensors: int) -> bytes:
    """The Model table around one subgraph, one empty buffer per tensor, as .tflite bytes."""
    buffers = []
    for _ in range(tensors + 1):  # buffer 0 is the empty sentinel
        Buffer.Start(b)
        buffers.append(Buffer.End(b))
    buffer_vec = _offsets(b, Model.StartBuffersVector, buffers)
    code_vec = _offsets(b, Model.StartOperatorCodesVector, codes)
    graph_vec = _offsets(b, Model.StartSubgraphsVector, [graph])
    Model.Start(b)
    Model.AddVersion(b, 3)
    Model.AddOperatorCodes(b, code_vec)
    Model.AddSubgraphs(b, graph_vec)
    Model.AddBuffers(b, buffer_vec)
    b.Finish(Model.End(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def linear_feature_maps(put, fms) -> None:
    """Registers of 1x1xN feature maps in NHWC, region 1: (name, base, element size, depth,
    zero point) each; `put(register, value, data=None)` writes one register."""
    for fm, base, elem, depth, zp in fms:
        put(f"{fm}_REGION", 1)
        for i in range(4):
            put(f"{fm}_BASE{i}", 0, base)
        put(f"{fm}_HEIGHT0_M1", 0)
        put(f"{fm}_HEIGHT1_M1", 0)
        put(f"{fm}_WIDTH0_M1", 0)
        put(f"{fm}_STRIDE_Y", 0, depth * elem)
        put(f"{fm}_STRIDE_X", 0, depth * elem)
        put(f"{fm}_STRIDE_C", 0, elem)
        put(f"{fm}_ZERO_POINT", zp & 0xFFFF)


def seeded_outputs(payload, shape, count: int, accelerator: str) -> list[list[int]]:
    """The simulator's outputs for inputs default_rng(seed).integers(-128, 128), seed 0..count-1:
    the inputs the stored TFLite reference outputs were produced from."""
    return [
        simulate(
            payload,
            [np.random.default_rng(seed).integers(-128, 128, shape, dtype=np.int8)],
            accelerator,
        )
        .outputs[0]
        .ravel()
        .tolist()
        for seed in range(count)
    ]
