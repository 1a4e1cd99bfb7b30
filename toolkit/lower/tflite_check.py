"""A .tflite file checked before Vela reads it: Vela's reader trusts the flatbuffer, and a
truncated or damaged file crashes the process (SIGSEGV) instead of raising."""

from __future__ import annotations

import struct
from pathlib import Path

from ethosu.vela.tflite.BuiltinOperator import BuiltinOperator
from ethosu.vela.tflite.Model import Model
from ethosu.vela.tflite.TensorType import TensorType

from ..errors import UserError

_TYPE_NAMES = {v: k for k, v in vars(TensorType).items() if not k.startswith("_")}
IO_TYPES = (TensorType.INT8, TensorType.INT16, TensorType.UINT8)
_BUFFER_DATA, _BUFFER_OFFSET, _BUFFER_SIZE = 4, 6, 8  # Buffer's vtable slots (TFLite schema)


class _Damaged(Exception):
    pass


def _check_buffers(model: Model, size: int) -> None:
    for index in range(model.BuffersLength()):
        tab = model.Buffers(index)._tab
        slot = tab.Offset(_BUFFER_DATA)
        if slot:
            start, length = tab.Vector(slot), tab.VectorLen(slot)
            if start < 0 or start + length > size:
                raise _Damaged(f"buffer {index} runs past the end of the file")
        offset, extent = tab.Offset(_BUFFER_OFFSET), tab.Offset(_BUFFER_SIZE)
        if offset and extent:
            start = tab.Get(struct.Struct("<Q"), tab.Pos + offset)
            length = tab.Get(struct.Struct("<Q"), tab.Pos + extent)
            if start + length > size:
                raise _Damaged(
                    f"buffer {index} (stored after the flatbuffer) runs past the end of the file"
                )


def _check_graphs(model: Model) -> None:
    buffers, codes = model.BuffersLength(), model.OperatorCodesLength()
    for c in range(codes):
        code = model.OperatorCodes(c)
        code.BuiltinCode(), code.DeprecatedBuiltinCode(), code.Version(), code.CustomCode()
    for m in range(model.MetadataLength()):
        model.Metadata(m).Name()
    for g in range(model.SubgraphsLength()):
        graph = model.Subgraphs(g)
        graph.Name(), graph.InputsAsNumpy(), graph.OutputsAsNumpy()
        tensors = graph.TensorsLength()
        for t in range(tensors):
            tensor = graph.Tensors(t)
            tensor.ShapeAsNumpy(), tensor.Name(), tensor.Type()
            quant = tensor.Quantization()
            if quant is not None:
                quant.ScaleAsNumpy(), quant.ZeroPointAsNumpy()
            if not 0 <= tensor.Buffer() < max(buffers, 1):
                raise _Damaged(f"tensor {t} names buffer {tensor.Buffer()} of {buffers}")
        for o in range(graph.OperatorsLength()):
            op = graph.Operators(o)
            op.BuiltinOptionsType(), op.BuiltinOptions()
            if not 0 <= op.OpcodeIndex() < codes:
                raise _Damaged(f"operator {o} names operator code {op.OpcodeIndex()} of {codes}")
            for i in (*op.InputsAsNumpy().tolist(), *op.OutputsAsNumpy().tolist()):
                if not -1 <= int(i) < tensors:
                    raise _Damaged(f"operator {o} names tensor {i} of {tensors}")


def _op_code(model: Model, op) -> int:
    code = model.OperatorCodes(op.OpcodeIndex())
    return max(code.BuiltinCode(), code.DeprecatedBuiltinCode())


def _float_edge(model: Model, graph, kind: str, tensor: int) -> bool:
    """A float input read only by QUANTIZE, or a float output written by DEQUANTIZE: the host
    runs those operators and the NPU part stays quantized."""
    if graph.Tensors(tensor).Type() != TensorType.FLOAT32:
        return False
    ops = [graph.Operators(k) for k in range(graph.OperatorsLength())]
    if kind == "input":
        readers = [op for op in ops if tensor in op.InputsAsNumpy().tolist()]
        return bool(readers) and all(
            _op_code(model, op) == BuiltinOperator.QUANTIZE for op in readers
        )
    writers = [op for op in ops if tensor in op.OutputsAsNumpy().tolist()]
    return len(writers) == 1 and _op_code(model, writers[0]) == BuiltinOperator.DEQUANTIZE


def _io_types(model: Model) -> list[tuple[str, int, str]]:
    graph = model.Subgraphs(0)
    io = [("input", int(i)) for i in graph.InputsAsNumpy().tolist()]
    io += [("output", int(i)) for i in graph.OutputsAsNumpy().tolist()]
    return [
        (kind, i, _TYPE_NAMES.get(graph.Tensors(i).Type(), "unknown"))
        for kind, i in io
        if graph.Tensors(i).Type() not in IO_TYPES and not _float_edge(model, graph, kind, i)
    ]


def check_tflite(path: Path) -> None:
    """UserError unless path is a whole TFLite flatbuffer with integer inputs and outputs (or
    float edges that QUANTIZE/DEQUANTIZE operators convert)."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror}") from None
    if len(data) < 8 or data[4:8] != b"TFL3":
        raise UserError(
            f"{path} is not a TFLite file (no TFL3 flatbuffer identifier): give an "
            "int8 .tflite file"
        )
    try:
        model = Model.GetRootAs(data, 0)
        if model.SubgraphsLength() < 1:
            raise _Damaged("it has no subgraph")
        _check_buffers(model, len(data))
        _check_graphs(model)
        wrong = _io_types(model)
    except (_Damaged, struct.error, IndexError, ValueError, TypeError, OverflowError) as exc:
        raise UserError(
            f"{path} is truncated or damaged ({exc or type(exc).__name__}): export it again"
        ) from None
    if wrong:
        kind, index, name = wrong[0]
        raise UserError(
            f"{path} is not an int8 model: {kind} tensor {index} is {name} (Vela "
            "compiles int8/int16 models: quantize it fully, or give a float edge its own "
            "QUANTIZE/DEQUANTIZE operator)"
        )
