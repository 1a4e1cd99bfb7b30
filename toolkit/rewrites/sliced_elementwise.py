"""Give an elementwise ADD, SUB or MUL of two slices each slice as a tensor of its own.

`q, k, v = x.chunk(3, -1); q + k`, or the sum of two heads after an attention's qkv permute and
split, lowers through ExecuTorch 1.5.1 to ADD(RESCALE(SLICE(x)), RESCALE(SLICE(x))). Vela 5.2.0
compiles each RESCALE of a slice as operations over the whole sliced tensor that write past the
RESCALE's output: the second slice's RESCALE then reads a tensor the first one overwrote, and the
operation takes the first slice where the graph has the second (500 of 512 values wrong in the
reduced case of tests/lower/test_sliced_elementwise.py; Vela 5.1.0 compiled them right). A slice
read by a RESCALE alone (`k * 0.5`) or next to a whole tensor (`a * sigmoid(b)`) compiles right.

A CLAMP to the full range of a slice's type is the identity: Vela runs it as one NPU operation
that writes the slice into a tensor of its own, and the RESCALE reads that. Same values, and
Vela's estimate drops (it no longer rescales the whole sliced tensor per slice).

Runs in ExecuTorch's Arm pass pipeline after RewritePadPass, where the RESCALEs exist
(tosa.RESCALE) and slices are still aten.slice_copy, registered only while we lower.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch
from executorch.backends.arm._passes import ArmPass, RewritePadPass
from executorch.backends.arm._passes.arm_pass_utils import create_node, get_first_fake_tensor
from executorch.exir.dialects._ops import ops as exir_ops
from executorch.exir.pass_base import ExportPass, PassResult
from torch.fx import GraphModule, Node

from ..artifacts import RewriteRecord
from ..rewrite_names import SLICED_ELEMENTWISE
from .pass_insertion import inserted_after

_ELEMENTWISE = {
    exir_ops.edge.aten.add.Tensor: "add",
    exir_ops.edge.aten.sub.Tensor: "sub",
    exir_ops.edge.aten.mul.Tensor: "mul",
}
_SLICE = exir_ops.edge.aten.slice_copy.Tensor
_VIEW = exir_ops.edge.aten.view_copy.default
_RESCALE = exir_ops.backend.tosa.RESCALE.default
_CLAMP = exir_ops.edge.aten.clamp.default


def sliced_read(operand: object) -> tuple[Node, Node] | None:
    """(slice, the node that reads it) when an operand is an integer slice seen through a
    RESCALE and reshapes; else None."""
    reader: object = None
    source = operand
    while isinstance(source, Node) and source.target in (_RESCALE, _VIEW):
        reader, source = source, source.args[0]
    if not isinstance(source, Node) or source.target != _SLICE or not isinstance(reader, Node):
        return None
    if get_first_fake_tensor(source).dtype.is_floating_point:
        return None
    return source, reader


class SlicedElementwisePass(ArmPass):
    """OP(RESCALE(SLICE(a)), RESCALE(SLICE(b))) -> OP(RESCALE(CLAMP(SLICE(a))), ...)."""

    _passes_required_after: set[type[ExportPass]] = set()

    def __init__(self) -> None:
        super().__init__()
        self.copied: list[tuple[str, str, int]] = []  # (operation, kind, slices copied)

    def call(self, graph_module: GraphModule) -> PassResult:
        graph = graph_module.graph
        for node in list(graph.nodes):
            kind = _ELEMENTWISE.get(node.target) if node.op == "call_function" else None
            if kind is None or len(node.args) < 2:
                continue
            reads = [sliced_read(operand) for operand in node.args[:2]]
            if any(read is None for read in reads):
                continue
            for read in reads:
                assert read is not None
                self._copy(graph, *read)
            self.copied.append((node.name, kind, len(reads)))
        if not self.copied:
            return PassResult(graph_module, False)
        graph.lint()
        # retrace: each CLAMP gets its value (shape, dtype) from its input
        return PassResult(super().call(graph_module).graph_module, True)

    @staticmethod
    def _copy(graph, sliced: Node, reader: Node) -> None:
        limits = torch.iinfo(get_first_fake_tensor(sliced).dtype)
        with graph.inserting_before(reader):
            copy = create_node(graph, _CLAMP, (sliced, limits.min, limits.max))
        reader.replace_input_with(sliced, copy)


@contextmanager
def sliced_elementwise_rewrite() -> Iterator[Callable[[], tuple[RewriteRecord, ...]]]:
    """copy-sliced-elementwise-inputs for the length of a lowering; yields what gives its
    records."""
    ours = SlicedElementwisePass()
    with inserted_after(RewritePadPass, ours):
        yield lambda: tuple(
            RewriteRecord(
                SLICED_ELEMENTWISE,
                operation,
                "TOSA lowering",
                f"both operands of an elementwise {kind.upper()}, slices of a tensor, copied "
                "into tensors of their own by full-range clamps: Vela 5.2.0 otherwise writes "
                "each slice's rescale past its output (same result)",
            )
            for operation, kind, _ in ours.copied
        )
