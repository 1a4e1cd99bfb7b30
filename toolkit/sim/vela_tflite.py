"""A Vela-compiled .tflite file, as the ML Embedded Evaluation Kit, Himax and Alif flows ship it.

Vela's TFLite writer replaces each NPU subgraph by one CUSTOM operator "ethos-u" whose inputs are
(command stream, flash, scratch, scratch_fast, IFM...) and whose outputs are the OFMs. The command
stream buffer holds the COP1 driver payload; flash is region 0; scratch (region 1) and scratch_fast
(region 2) have no data, only a size (their shape). Where feature maps live in the arena is in the
"OfflineMemoryAllocation" metadata (version, subgraphs, tensor count, one arena offset per tensor,
-1 for tensors outside the arena); TFLite Micro plans the arena from it, so the scratch tensor's
offset is region 1's base, and a scratch_fast tensor planned at the same offset aliases region 1.
The other operators run on the CPU; `run_graph` runs them on the host.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np
from ethosu.vela.tflite.BuiltinOperator import BuiltinOperator
from ethosu.vela.tflite.Model import Model
from ethosu.vela.tflite.TensorType import TensorType

from .errors import PayloadError, SimError, UnsupportedError
from .payload import IOTensor, NpuProgram, _strip_driver_header

NPU_CUSTOM_CODE = "ethos-u"
_OFFLINE_PLAN = b"OfflineMemoryAllocation"
_DTYPES = {
    TensorType.INT8: np.int8,
    TensorType.UINT8: np.uint8,
    TensorType.INT16: np.int16,
    TensorType.INT32: np.int32,
    TensorType.FLOAT32: np.float32,
}
_BUILTIN_NAMES = {v: k for k, v in vars(BuiltinOperator).items() if not k.startswith("_")}
HOST_OPS = ("QUANTIZE", "DEQUANTIZE", "RESHAPE", "SQUEEZE")


class GraphTensor(NamedTuple):
    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    scale: float | None  # per-tensor quantization, None if float or unquantized
    zero_point: int


class GraphOp(NamedTuple):
    op: str  # "ethos-u" for an NPU operator, else the TFLite builtin name
    inputs: tuple[int, ...]  # tensor indices (for ethos-u: the IFMs only)
    outputs: tuple[int, ...]
    program: NpuProgram | None = None


class TfliteGraph(NamedTuple):
    """The operators of a compiled .tflite's main subgraph, in execution order."""

    tensors: tuple[GraphTensor, ...]
    ops: tuple[GraphOp, ...]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    source: str

    @property
    def npu_programs(self) -> tuple[NpuProgram, ...]:
        return tuple(op.program for op in self.ops if op.program is not None)

    @property
    def cpu_ops(self) -> tuple[GraphOp, ...]:
        return tuple(op for op in self.ops if op.program is None)


def _opcode_name(model: Model, index: int) -> str:
    code = model.OperatorCodes(index)
    builtin = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
    if builtin == BuiltinOperator.CUSTOM:
        return (code.CustomCode() or b"").decode("ascii", "replace")
    return _BUILTIN_NAMES.get(builtin, f"builtin {builtin}")


def is_vela_compiled(path: str | Path) -> bool:
    """True if the .tflite file holds an ethos-u custom operator (Vela already compiled it)."""
    model = Model.GetRootAs(Path(path).read_bytes(), 0)
    return any(
        _opcode_name(model, i) == NPU_CUSTOM_CODE for i in range(model.OperatorCodesLength())
    )


def _offline_plan(model: Model, source: str) -> np.ndarray:
    for i in range(model.MetadataLength()):
        meta = model.Metadata(i)
        if meta.Name() == _OFFLINE_PLAN:
            words = model.Buffers(meta.Buffer()).DataAsNumpy().view("<i4")
            count = int(words[2])
            if len(words) != 3 + count:
                raise PayloadError(
                    f"{source}: OfflineMemoryAllocation holds {len(words) - 3} "
                    f"offsets for {count} tensors"
                )
            return words[3:]
    raise PayloadError(
        f"{source}: no OfflineMemoryAllocation metadata: the arena offsets of the "
        "NPU's feature maps are unknown (was the file written by Vela?)"
    )


def _buffer(model: Model, graph, tensor: int) -> bytes:
    buf = model.Buffers(graph.Tensors(tensor).Buffer())
    return buf.DataAsNumpy().tobytes() if buf.DataLength() else b""


def _tensor(graph, index: int) -> GraphTensor:
    t = graph.Tensors(index)
    dtype = _DTYPES.get(t.Type())
    if dtype is None:
        raise UnsupportedError(
            f"tensor '{t.Name().decode()}' has TFLite type {t.Type()}, which "
            "the host side does not run"
        )
    q = t.Quantization()
    scale = zero_point = None
    if q is not None and q.ScaleLength():
        scale, zero_point = float(q.Scale(0)), int(q.ZeroPoint(0)) if q.ZeroPointLength() else 0
    shape = tuple(int(s) for s in t.ShapeAsNumpy()) if t.ShapeLength() else ()
    return GraphTensor(t.Name().decode(), shape, np.dtype(dtype), scale, zero_point or 0)


def _io(tensor: GraphTensor, offset: int, base: int, where: str) -> IOTensor:
    if offset < 0:
        raise PayloadError(
            f"{where}: tensor '{tensor.name}' has no arena offset in the "
            "OfflineMemoryAllocation metadata"
        )
    shape = (1,) * (6 - len(tensor.shape)) + tensor.shape
    return IOTensor.of(shape, tensor.dtype.itemsize, int(offset) - base, 1)


def _npu_program(model: Model, graph, op, plan: np.ndarray, tensors, source: str) -> NpuProgram:
    ins = [op.Inputs(j) for j in range(op.InputsLength())]
    outs = [op.Outputs(j) for j in range(op.OutputsLength())]
    if len(ins) < 4:
        raise PayloadError(
            f"{source}: ethos-u operator has {len(ins)} inputs; Vela writes "
            "command stream, flash, scratch, scratch_fast, then the IFMs"
        )
    for j, index in enumerate((*ins, *outs)):
        optional = j in (1, 3) and index == -1  # no flash, no scratch_fast
        if not (0 <= index < len(tensors) or optional):
            raise PayloadError(
                f"{source}: ethos-u operator names tensor {index}, which does not exist "
                f"(the graph has {len(tensors)})"
            )
    cmd, flash, scratch, fast = ins[:4]
    stream, config = _strip_driver_header(_buffer(model, graph, cmd), source)
    base = int(plan[scratch])

    def size(index: int) -> int:
        return (
            int(np.prod(tensors[index].shape)) * tensors[index].dtype.itemsize if index >= 0 else 0
        )

    fast_size = size(fast)
    aliased = fast >= 0 and int(plan[fast]) == base
    return NpuProgram(
        stream,
        _buffer(model, graph, flash) if flash >= 0 else b"",
        size(scratch),
        0 if aliased else fast_size,
        tuple(_io(tensors[i], plan[i], base, source) for i in ins[4:]),
        tuple(_io(tensors[i], plan[i], base, source) for i in outs),
        config,
        source,
        fast_scratch_aliases_scratch=aliased,
    )


# A flatbuffer whose offsets or lengths point outside the file fails in the generated reader
# with one of these; the file is then damaged, whatever field it was.
_FLATBUFFER_ERRORS = (
    struct.error,
    IndexError,
    ValueError,
    TypeError,
    OverflowError,
    AttributeError,
)
_TENSOR_BYTES = 1 << 31  # a tensor larger than this is no Ethos-U model's (its arena is 32-bit)


def load_compiled_tflite(path: str | Path) -> TfliteGraph:
    """The graph of a Vela-compiled .tflite; PayloadError (one line) for a file whose fields
    do not hold together: tensor indices outside the graph, a tensor no operator produces
    read before it is made, dimensions below 1 or a tensor past 2 GiB, a damaged flatbuffer."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise PayloadError(f"cannot read {path}: {exc.strerror}") from None
    try:
        graph = _read_graph(data, path.name)
    except _FLATBUFFER_ERRORS as exc:
        raise PayloadError(
            f"{path.name} is damaged: its flatbuffer does not hold together "
            f"({type(exc).__name__}: {exc})"
        ) from None
    _check_graph(graph)
    return graph


def _check_graph(graph: TfliteGraph) -> None:
    """PayloadError naming the first tensor or reference a hostile file got wrong."""
    _check_tensors(graph)
    count = len(graph.tensors)
    made = set(graph.inputs)
    for where, indices in (("graph input", graph.inputs), ("graph output", graph.outputs)):
        for i in indices:
            if not 0 <= i < count:
                raise PayloadError(f"{graph.source}: {where} {i} names no tensor ({count})")
    for k, op in enumerate(graph.ops):
        for i in (*op.inputs, *op.outputs):
            if not 0 <= i < count:
                raise PayloadError(
                    f"{graph.source}: operator {k} ({op.op}) names tensor {i}, "
                    f"which does not exist (the graph has {count})"
                )
        for i in op.inputs[:1] if op.program is None else op.inputs:
            if i not in made:
                raise PayloadError(
                    f"{graph.source}: operator {k} ({op.op}) reads tensor {i} "
                    f"('{graph.tensors[i].name}'), which no earlier operator or input makes"
                )
        made.update(op.outputs)
    for i in graph.outputs:
        if i not in made:
            raise PayloadError(f"{graph.source}: graph output {i} is made by no operator")


def _check_tensors(graph: TfliteGraph) -> None:
    for t in graph.tensors:
        # an empty 1-D buffer is allowed: Vela 3.x's flash tensor of a program without weights
        if any(d < 1 for d in t.shape) and t.shape != (0,):
            raise PayloadError(f"{graph.source}: tensor '{t.name}' has shape {t.shape}")
        if math.prod(t.shape) * t.dtype.itemsize > _TENSOR_BYTES:
            raise PayloadError(
                f"{graph.source}: tensor '{t.name}' of shape {t.shape} is larger than 2 GiB"
            )


def _read_graph(data: bytes, source: str) -> TfliteGraph:
    model = Model.GetRootAs(data, 0)
    if model.SubgraphsLength() != 1:
        raise UnsupportedError(
            f"{source} has {model.SubgraphsLength()} subgraphs; only single-subgraph models run"
        )
    graph = model.Subgraphs(0)
    plan = _offline_plan(model, source)
    tensors = tuple(_tensor(graph, i) for i in range(graph.TensorsLength()))
    ops = []
    for i in range(graph.OperatorsLength()):
        op = graph.Operators(i)
        name = _opcode_name(model, op.OpcodeIndex())
        outs = tuple(op.Outputs(j) for j in range(op.OutputsLength()))
        if name == NPU_CUSTOM_CODE:
            ins = tuple(op.Inputs(j) for j in range(4, op.InputsLength()))
            ops.append(
                GraphOp(
                    name,
                    ins,
                    outs,
                    _npu_program(model, graph, op, plan, tensors, f"{source} operator {i}"),
                )
            )
        else:
            ops.append(GraphOp(name, tuple(op.Inputs(j) for j in range(op.InputsLength())), outs))
    return TfliteGraph(
        tensors,
        tuple(ops),
        tuple(graph.Inputs(j) for j in range(graph.InputsLength())),
        tuple(graph.Outputs(j) for j in range(graph.OutputsLength())),
        source,
    )


def _quantize(x: np.ndarray, t: GraphTensor) -> np.ndarray:
    info = np.iinfo(t.dtype)
    if np.issubdtype(x.dtype, np.integer):  # requantize (TFLite QUANTIZE int -> int)
        raise UnsupportedError("QUANTIZE between two integer types does not run on the host")
    q = np.round(x.astype(np.float32) / np.float32(t.scale)) + t.zero_point
    return np.clip(q, info.min, info.max).astype(t.dtype)


def _host_op(op: GraphOp, tensors: Sequence[GraphTensor], values: dict) -> np.ndarray:
    x = values[op.inputs[0]]
    out = tensors[op.outputs[0]]
    if op.op == "QUANTIZE":
        return _quantize(x, out)
    if op.op == "DEQUANTIZE":
        src = tensors[op.inputs[0]]
        return ((x.astype(np.int32) - src.zero_point) * np.float32(src.scale)).astype(np.float32)
    if op.op in ("RESHAPE", "SQUEEZE"):
        return x.reshape(out.shape)
    raise UnsupportedError(
        f"CPU operator {op.op} does not run on the host (runs: {', '.join(HOST_OPS)})"
    )


RunNpu = Callable[[NpuProgram, list[np.ndarray]], list[np.ndarray]]


def run_graph(
    graph: TfliteGraph, inputs: Sequence[np.ndarray], run_npu: RunNpu
) -> tuple[np.ndarray, ...]:
    """Execute the graph: ethos-u operators through `run_npu`, the rest on the host."""
    if len(inputs) != len(graph.inputs):
        raise SimError(f"{graph.source} takes {len(graph.inputs)} inputs, got {len(inputs)}")
    values = {}
    for index, value in zip(graph.inputs, inputs):
        t = graph.tensors[index]
        values[index] = np.asarray(value).astype(t.dtype, copy=False).reshape(t.shape)
    for op in graph.ops:
        if op.program is not None:
            results = run_npu(op.program, [values[i] for i in op.inputs])
            for index, value in zip(op.outputs, results):
                values[index] = np.asarray(value).reshape(graph.tensors[index].shape)
        else:
            values[op.outputs[0]] = _host_op(op, graph.tensors, values)
    return tuple(values[i] for i in graph.outputs)
