"""Editing a .tflite file in place: the network without its final softmax.

Our zoo models end at the classifier's logits; the MLPerf Tiny reference files end in a softmax
(about 30 small NPU operations on Ethos-U55). Comparing like with like needs the reference's body
alone. The edit changes two numbers in the flatbuffer, no rebuild: the subgraph's output becomes
the softmax's input, and the operator list is one shorter.
"""

from __future__ import annotations

import struct
from pathlib import Path

from ethosu.vela.tflite.BuiltinOperator import BuiltinOperator
from ethosu.vela.tflite.Model import Model

from toolkit.artifacts import Program
from toolkit.errors import UserError
from toolkit.lower.tflite import compile_tflite
from toolkit.npu import NpuConfig

_OUTPUTS_FIELD, _OPERATORS_FIELD = 8, 10  # vtable offsets in SubGraph


def _opcode(model: Model, index: int) -> int:
    code = model.OperatorCodes(index)
    return max(code.BuiltinCode(), code.DeprecatedBuiltinCode())


def without_final_softmax(data: bytes, source: str = "model") -> bytes:
    """The model with its last operator, a SOFTMAX producing the only output, removed."""
    model = Model.GetRootAs(data, 0)
    if model.SubgraphsLength() != 1:
        raise UserError(
            f"{source} has {model.SubgraphsLength()} subgraphs: only single-subgraph "
            "models can drop their softmax"
        )
    graph = model.Subgraphs(0)
    count = graph.OperatorsLength()
    last = graph.Operators(count - 1) if count else None
    if last is None or _opcode(model, last.OpcodeIndex()) != BuiltinOperator.SOFTMAX:
        raise UserError(f"{source} does not end in a SOFTMAX operator: nothing to drop")
    if graph.OutputsLength() != 1 or graph.Outputs(0) != last.Outputs(0):
        raise UserError(f"{source}: the softmax's result is not the model's only output")
    edited = bytearray(data)
    outputs_at = graph._tab.Vector(graph._tab.Offset(_OUTPUTS_FIELD))
    struct.pack_into("<i", edited, outputs_at, last.Inputs(0))
    operators_at = graph._tab.Vector(graph._tab.Offset(_OPERATORS_FIELD))
    struct.pack_into("<I", edited, operators_at - 4, count - 1)
    return bytes(edited)


def compile_without_softmax(
    path: Path, npu: NpuConfig, out_dir: Path, extra_vela: tuple[str, ...] = ()
) -> Program | None:
    """Vela's compile of `path` with its final softmax dropped; None if it has none."""
    try:
        body = without_final_softmax(path.read_bytes(), path.name)
    except UserError:
        return None
    out_dir.mkdir(parents=True, exist_ok=True)
    body_path = out_dir / f"{path.stem}_body.tflite"
    body_path.write_bytes(body)
    return compile_tflite(body_path, npu, out_dir, extra_vela)
