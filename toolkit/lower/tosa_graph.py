"""Reading TOSA flatbuffers: operator histogram, RESCALE zero points, CLAMP bounds."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from tosa import DType as _DType
from tosa import Op as _Op
from tosa.ClampAttribute import ClampAttribute
from tosa.TosaGraph import TosaGraph

OP_NAMES = {v: k for k, v in vars(_Op.Op).items() if not k.startswith("_")}
_DTYPE_NAMES = {v: k for k, v in vars(_DType.DType).items() if not k.startswith("_")}
_NUMPY = {
    "INT8": np.int8,
    "INT16": np.int16,
    "INT32": np.int32,
    "INT48": None,
    "BOOL": np.bool_,
    "FP32": np.float32,
    "FP16": np.float16,
    "SHAPE": np.int64,
}
CONSTANT_OPS = {"CONST", "CONST_SHAPE"}


@dataclass(frozen=True)
class TosaOperator:
    op: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    clamp: tuple[int, int] | None = None  # CLAMP min/max as integers (int8 graphs)


@dataclass(frozen=True)
class TosaProgram:
    operators: tuple[TosaOperator, ...]
    constants: dict[str, np.ndarray]  # flat; INT48 as int64
    tensor_types: dict[str, str]
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)

    def constant(self, name: str) -> np.ndarray:
        """A constant in its tensor's shape."""
        return self.constants[name].reshape(self.shapes[name])

    def histogram(self) -> dict[str, int]:
        """Operator counts without constants."""
        counts = Counter(o.op for o in self.operators if o.op not in CONSTANT_OPS)
        return dict(sorted(counts.items()))

    def rescale_output_zero_points(self) -> list[int]:
        """Output zero point of each RESCALE, in graph order (RESCALE inputs: x, mult, shift, izp, ozp)."""
        return [
            int(self.constants[o.inputs[4]].reshape(-1)[0])
            for o in self.operators
            if o.op == "RESCALE"
        ]

    def producer(self, tensor: str) -> TosaOperator | None:
        return next((o for o in self.operators if tensor in o.outputs), None)


def _clamp_bounds(operator, dtype: str) -> tuple[int, int] | None:
    table = operator.Attribute()
    attribute = ClampAttribute()
    attribute.Init(table.Bytes, table.Pos)
    np_type = _NUMPY.get(dtype)
    if np_type is None or not np.issubdtype(np_type, np.integer):
        return None
    low = np.frombuffer(attribute.MinValAsNumpy().tobytes(), dtype=np_type)
    high = np.frombuffer(attribute.MaxValAsNumpy().tobytes(), dtype=np_type)
    return int(low[0]), int(high[0])


def read_tosa(path: Path | bytes) -> TosaProgram:
    data = path if isinstance(path, bytes) else Path(path).read_bytes()
    graph = TosaGraph.GetRootAsTosaGraph(data, 0)
    operators, constants, types, shapes = [], {}, {}, {}
    for r in range(graph.RegionsLength()):
        region = graph.Regions(r)
        for b in range(region.BlocksLength()):
            block = region.Blocks(b)
            for t in range(block.TensorsLength()):
                tensor = block.Tensors(t)
                name = tensor.Name().decode()
                dtype = _DTYPE_NAMES.get(tensor.Type(), "UNKNOWN")
                types[name] = dtype
                shapes[name] = (
                    tuple(int(d) for d in tensor.ShapeAsNumpy()) if tensor.ShapeLength() else ()
                )
                if tensor.DataLength():
                    raw = tensor.DataAsNumpy().tobytes()
                    if dtype == "INT48":
                        constants[name] = _int48(raw)
                    elif (np_type := _NUMPY.get(dtype)) is not None:
                        constants[name] = np.frombuffer(raw, dtype=np_type)
            for i in range(block.OperatorsLength()):
                op = block.Operators(i)
                inputs = tuple(op.Inputs(j).decode() for j in range(op.InputsLength()))
                outputs = tuple(op.Outputs(j).decode() for j in range(op.OutputsLength()))
                name = OP_NAMES.get(op.Op(), f"OP_{op.Op()}")
                clamp = _clamp_bounds(op, types.get(inputs[0], "")) if name == "CLAMP" else None
                operators.append(TosaOperator(name, inputs, outputs, clamp))
    return TosaProgram(tuple(operators), constants, types, shapes)


def _int48(raw: bytes) -> np.ndarray:
    """Little-endian 48-bit integers (a 16x8 convolution's bias) as int64."""
    six = np.frombuffer(raw[: len(raw) // 6 * 6], np.uint8).reshape(-1, 6)
    wide = np.zeros((len(six), 8), np.uint8)
    wide[:, :6] = six
    return (wide.view("<i8")[:, 0] << 16) >> 16
