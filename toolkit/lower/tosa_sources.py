"""Which call of the user's model each TOSA tensor came from, recorded while ExecuTorch writes
the TOSA graphs.

ExecuTorch's Arm backend turns each FX node of a delegate (after its own passes, which keep the
node's `nn_module_stack`, `stack_trace` and `torch_fn`) into one or more TOSA operators. While
lowering we wrap the two calls that do it: `TOSABackend._preprocess` (one TOSA graph per
delegate) and `process_call_function` (one FX node), and note the output tensors of the TOSA
operators each node added. The TOSA graph's bytes say afterwards which delegate a record is of.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

from ..artifacts import LayerSource
from ..graph_info import CALL_META, nearby_call, nearby_line, node_layer, take_call
from .patching import patched
from .upstream_speedups import WRITTEN_FOR, installed_versions


@dataclass
class TosaSources:
    """The calls of one TOSA graph's operators, by output tensor name."""

    tensors: dict[str, LayerSource] = field(default_factory=dict)
    digest: str = ""  # SHA-256 of the TOSA flatbuffer ExecuTorch wrote


def tosa_digest(flatbuffer: bytes) -> str:
    return hashlib.sha256(bytes(flatbuffer)).hexdigest()


def _fill_lines(
    tensors: dict[str, LayerSource], nearby: dict[str, tuple[str, int]]
) -> dict[str, LayerSource]:
    """A node some pass made without a stack trace (a grouped conv's SLICEs) takes the source
    line of another node of the same call; failing that (an attention's matmuls, made from
    bmm by a pass that keeps no trace), the line of the nearest node around it that has one."""
    located = {s.call_id: s for s in tensors.values() if s.line}
    # a module's call (nn.MultiheadAttention's decomposed matmuls and softmax): its line
    in_module = {s.module: s for s in tensors.values() if s.line and s.module}
    filled = {}
    for name, source in tensors.items():
        known = located.get(source.call_id) or in_module.get(source.module or "\0")
        if not source.line and known is not None:
            source = replace(source, file=known.file, line=known.line)
        elif not source.line and name in nearby:
            source = replace(source, file=nearby[name][0], line=nearby[name][1])
        filled[name] = source
    return filled


@contextmanager
def _table_nodes_keep_their_call() -> Iterator[None]:
    """ExecuTorch 1.5's InsertTableOpsPass makes each TABLE without its node's metadata: a
    sigmoid's TABLE that Vela cannot fuse into the conv before it (a reshape between them, as
    at batch 2) ran with no module path. The TABLE's constant is named after the node it
    replaced (b_NAME_table_constant): the TABLE takes that node's call. Written for ExecuTorch
    1.5.1's pass: on another version the pass runs as it is (only attribution could lose a name)."""
    if installed_versions()["executorch"] != WRITTEN_FOR["executorch"]:
        yield
        return
    from executorch.backends.arm._passes.insert_table_ops import InsertTableOpsPass
    from executorch.exir.dialects._ops import ops as exir_ops

    original_call = InsertTableOpsPass.call

    def call(self, graph_module):
        replaced = {
            node.name: {k: node.meta[k] for k in CALL_META if k in node.meta}
            for node in graph_module.graph.nodes
            if node.op == "call_function" and node in self.table_ops
        }
        result = original_call(self, graph_module)
        for node in result.graph_module.graph.nodes:
            if node.target != exir_ops.backend.tosa.TABLE.default or "nn_module_stack" in node.meta:
                continue
            name = str(node.args[1]).removeprefix("b_").removesuffix("_table_constant")
            take_call(node, replaced.get(name, {}))
        return result

    with patched((InsertTableOpsPass, "call", call)):
        yield


@contextmanager
def recorded_tosa_sources() -> Iterator[list[TosaSources]]:
    """Yields the list of TosaSources, one per TOSA graph ExecuTorch serialises, filled as it
    lowers."""
    import tosa_serializer as ts
    from executorch.backends.arm.tosa import backend

    graphs: list[TosaSources] = []
    nearby: dict[str, tuple[str, int]] = {}  # tensor -> the line near its node, when it has none
    # the outputs of the operators the node being visited added: noted as they are added (the
    # block's operator list is a new Python list on each read, so reading it around every node
    # cost the 49-step GRU's compile ~8 s)
    added: list[str] = []
    original_preprocess = backend.TOSABackend._preprocess
    original_visit = backend.process_call_function
    original_add_operator = ts.TosaSerializer.addOperator

    def preprocess(edge_program, compile_spec):
        graphs.append(TosaSources())
        result = original_preprocess(edge_program, compile_spec)
        graphs[-1].tensors = _fill_lines(graphs[-1].tensors, nearby)
        nearby.clear()
        graphs[-1].digest = tosa_digest(result.processed_bytes)
        return result

    def add_operator(tosa_graph, *args, **kwargs):
        operator = original_add_operator(tosa_graph, *args, **kwargs)
        added.extend(str(name) for name in operator.outputs)
        return operator

    def visit(node, *args, **kwargs):
        added.clear()
        result = original_visit(node, *args, **kwargs)
        if graphs and added:
            source = node_layer(node)
            owner = nearby_call(node) if not source.module_type else None
            source = node_layer(owner) if owner is not None else source
            near = nearby_line(node) if not source.line else None
            for name in added:
                graphs[-1].tensors[name] = source
                if near is not None:
                    nearby[name] = near
        return result

    with (
        patched(
            (backend.TOSABackend, "_preprocess", staticmethod(preprocess)),
            (backend, "process_call_function", visit),
            (ts.TosaSerializer, "addOperator", add_operator),
        ),
        _table_nodes_keep_their_call(),
    ):
        yield graphs
