"""Each operation of a delegate's command stream, attributed to the call of the user's model it
came from.

Command-stream offset -> Vela's scheduled operation and the TOSA operator it was made from (Vela's
debug database, vela_debug_db.py) -> that operator's output tensor -> the FX node ExecuTorch
wrote it for, with its module path and source line (tosa_sources.py). An operation Vela made that
is not the TOSA operator's own kind (the 716 transposes of a depthwise convolution with channel
multiplier 2, the SUB of a REDUCE_SUM) is marked "lowering"; a TRANSPOSE ExecuTorch put at an
NCHW<->NHWC edge of the NPU, "layout". Both stay with the call that caused them.
"""

from __future__ import annotations

from pathlib import Path

from ..artifacts import (
    DelegateAttribution,
    LayerSource,
    VelaOperation,
    VelaOperationEstimate,
)
from .tosa_graph import CONSTANT_OPS, TosaProgram, read_tosa
from .vela_debug_db import DebugDatabase

# Vela's names of the operations that run on the MAC array: one may become another (a depthwise
# convolution over one channel runs as a Conv2D) without anything being added
MAC_OPERATORS = frozenset(
    {"Conv2D", "DepthwiseConv2D", "FullyConnected", "MatMul", "TransposeConv2D", "Conv3D"}
)
# calls whose TRANSPOSE is the user's own, not a layout change ExecuTorch made
PERMUTE_CALLS = frozenset({"permute", "transpose", "t", "swapaxes", "swapdims", "movedim", "mT"})


def operator_sources(
    tosa: TosaProgram, tensors: dict[str, LayerSource]
) -> list[LayerSource | None]:
    """The call each TOSA operator came from, by its index in the graph. An operator no FX node
    claimed (ExecuTorch writes none that runs on the NPU so far) takes that of the operator that
    reads its output, else of the one that wrote its first input."""
    direct = [tensors.get(op.outputs[0]) if op.outputs else None for op in tosa.operators]
    readers: dict[str, int] = {}
    writers: dict[str, int] = {}
    for index, op in enumerate(tosa.operators):
        for name in op.inputs:
            readers.setdefault(name, index)
        for name in op.outputs:
            writers[name] = index
    found = list(direct)
    for index, op in enumerate(tosa.operators):
        if found[index] is not None or op.op in CONSTANT_OPS:
            continue
        neighbours = [readers.get(name) for name in op.outputs]
        neighbours += [writers.get(op.inputs[0])] if op.inputs else []
        found[index] = next((direct[n] for n in neighbours if n is not None and direct[n]), None)
    return found


# per-element operators that may sit between an edge TRANSPOSE and the graph's input or output
PASS_THROUGH = frozenset({"CLAMP", "RESCALE"})


def edge_transposes(tosa: TosaProgram) -> set[int]:
    """Indices of the TRANSPOSEs that read a graph input or write a graph output (possibly
    through a CLAMP or RESCALE, e.g. the unfused variant's last activation): the NCHW<->NHWC
    changes ExecuTorch puts at the NPU's edges."""
    writers = {name: op for op in tosa.operators for name in op.outputs}
    readers: dict[str, list] = {}
    for op in tosa.operators:
        for name in op.inputs:
            readers.setdefault(name, []).append(op)

    def from_input(tensor: str) -> bool:
        writer = writers.get(tensor)
        if writer is None:
            return tensor not in tosa.constants
        return writer.op in PASS_THROUGH and from_input(writer.inputs[0])

    def to_output(tensor: str) -> bool:
        after = readers.get(tensor, [])
        if not after:
            return True
        return len(after) == 1 and after[0].op in PASS_THROUGH and to_output(after[0].outputs[0])

    return {
        index
        for index, op in enumerate(tosa.operators)
        if op.op == "TRANSPOSE" and (from_input(op.inputs[0]) or to_output(op.outputs[0]))
    }


def _same_kind(a: str, b: str) -> bool:
    return a == b or {a, b} <= MAC_OPERATORS


def added_by(
    operator: str, vela_source: str, siblings: set[str], at_edge: bool, layer: LayerSource | None
) -> str:
    """What added the operation: "" (the call's own), "layout" (an edge TRANSPOSE ExecuTorch put
    for NCHW) or "lowering" (a transpose the call did not ask for, or an operation Vela put
    around the TOSA operator's own: `siblings`, the operators Vela made from that TOSA operator).
    An operator Vela runs as another kind alone (RESIZE as an AvgPool) is the call's own."""
    permutes = layer is not None and layer.call in PERMUTE_CALLS
    if at_edge and not permutes:
        return "layout"
    if operator == "Transpose" and not permutes:
        return "lowering"
    if _same_kind(operator, vela_source):
        return ""
    return "lowering" if any(_same_kind(o, vela_source) for o in siblings) else ""


def _operator(db: DebugDatabase, queued) -> str:
    """What Vela scheduled for a queued operation (its source operator if it has no estimate)."""
    perf = db.perf.get(queued.scheduled)
    if perf is not None:
        return perf.operator
    source = db.optimised_source.get(queued.optimised, -1)
    return db.source_operator.get(source, ("", -1))[0]


def attribute_delegate(
    tosa_path: Path, tensors: dict[str, LayerSource], db: DebugDatabase
) -> DelegateAttribution:
    """The delegate's command-stream operations, each with its call and what added it."""
    tosa = read_tosa(tosa_path)
    by_operator = operator_sources(tosa, tensors)
    edges = edge_transposes(tosa)
    layers: list[LayerSource] = []
    index: dict[str, int] = {}
    operations = []
    siblings: dict[int, set[str]] = {}
    for queued in db.queue:
        source = db.optimised_source.get(queued.optimised, -1)
        siblings.setdefault(source, set()).add(_operator(db, queued))
    for queued in db.queue:
        source = db.optimised_source.get(queued.optimised, -1)
        vela_source, tosa_index = db.source_operator.get(source, ("", -1))
        operator = _operator(db, queued)
        tosa_operator, layer = "", None
        if 0 <= tosa_index < len(tosa.operators):
            tosa_operator, layer = tosa.operators[tosa_index].op, by_operator[tosa_index]
        position = -1
        if layer is not None:
            position = index.setdefault(layer.key, len(layers))
            if position == len(layers):
                layers.append(layer)
        operations.append(
            VelaOperation(
                queued.offset,
                queued.scheduled,
                operator,
                tosa_operator,
                position,
                added_by(operator, vela_source, siblings[source], tosa_index in edges, layer),
            )
        )
    estimates = tuple(
        VelaOperationEstimate(p.scheduled, p.op_cycles, p.npu_cycles, p.macs, p.access_cycles)
        for p in db.perf.values()
    )
    return DelegateAttribution(tuple(layers), tuple(operations), estimates)
