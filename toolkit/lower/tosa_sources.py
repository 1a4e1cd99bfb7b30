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
from ..graph_info import nearby_line, node_layer


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
def recorded_tosa_sources() -> Iterator[list[TosaSources]]:
    """Yields the list of TosaSources, one per TOSA graph ExecuTorch serialises, filled as it
    lowers."""
    from executorch.backends.arm.tosa import backend

    graphs: list[TosaSources] = []
    nearby: dict[str, tuple[str, int]] = {}  # tensor -> the line near its node, when it has none
    original_preprocess = backend.TOSABackend._preprocess
    original_visit = backend.process_call_function

    def preprocess(edge_program, compile_spec):
        graphs.append(TosaSources())
        result = original_preprocess(edge_program, compile_spec)
        graphs[-1].tensors = _fill_lines(graphs[-1].tensors, nearby)
        nearby.clear()
        graphs[-1].digest = tosa_digest(result.processed_bytes)
        return result

    def visit(node, tosa_graph, *args, **kwargs):
        block = tosa_graph.currRegion.currBasicBlock
        before = len(block.operators)
        result = original_visit(node, tosa_graph, *args, **kwargs)
        if graphs:
            source = node_layer(node)
            near = nearby_line(node) if not source.line else None
            operators = block.operators
            for operator in operators[before:] if len(operators) > before else ():
                for name in operator.outputs:
                    graphs[-1].tensors[str(name)] = source
                    if near is not None:
                        nearby[str(name)] = near
        return result

    backend.TOSABackend._preprocess = staticmethod(preprocess)
    backend.process_call_function = visit
    try:
        yield graphs
    finally:
        backend.TOSABackend._preprocess = staticmethod(original_preprocess)
        backend.process_call_function = original_visit
