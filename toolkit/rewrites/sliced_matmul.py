"""Give a MATMUL whose first operand is a slice that operand as a tensor of its own.

An attention's `q @ k` reads q as a slice of the qkv tensor: after the qkv permute and split,
ExecuTorch 1.5.1 lowers it to TOSA MATMUL(RESHAPE(SLICE(TRANSPOSE(x))), ...); after a split of
the channels (`qkv.chunk(3, -1)`), to MATMUL(SLICE(x), ...). Ethos-U55 and U65 have no matrix
multiply: Vela (5.1.0 and 5.2.0) runs MATMUL as, for each column of B, an elementwise MUL of
A's rows by that column broadcast, then a channel-sum POOL; on a whole tensor it runs every
batch at once (the batches as IFM rows). When A is a SLICE Vela reads in place, it gets this wrong two ways:
- a slice along the batches: it runs the batches one at a time and gives every batch's MUL batch
  0's address (IFM_BASE0 0 while batch 1 of A is at 256): every head gets head 0's queries;
- a slice of the channels: the MUL reads the whole row's depth (48 channels of q, k and v where
  q has 16) and the POOL sums them all.
lower/vela_check.py names both at compile time.

A CLAMP to the full range of A's type is the identity, so MATMUL(CLAMP(A), B) == MATMUL(A, B)
exactly. Vela runs the CLAMP as one NPU operation that writes A into a tensor of its own, and
the MATMUL on that tensor in its all-batches form again: right, and for the batch slice fewer
NPU operations than before (the keyword transformer block 445 -> 414 on ethos-u55-128). A
one-batch MATMUL on a batch slice, which Vela compiles right, pays one NPU operation for it.

Runs in ExecuTorch's Arm pass pipeline after RewritePadPass, where matmuls are tosa.MATMUL and
slices still aten.slice_copy, registered only while we lower (sliced_matmul_rewrite).
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
from ..rewrite_names import SLICED_MATMUL
from .pass_insertion import inserted_after

_MATMUL = exir_ops.backend.tosa.MATMUL.default
_SLICE = exir_ops.edge.aten.slice_copy.Tensor
_VIEW = exir_ops.edge.aten.view_copy.default
_CLAMP = exir_ops.edge.aten.clamp.default


def sliced_operand(matmul: Node) -> Node | None:
    """The slice a tosa.MATMUL's first operand is (through reshapes), when that operand is an
    integer tensor; else None."""
    operand = matmul.args[0]
    if not isinstance(operand, Node):
        return None
    value = get_first_fake_tensor(operand)
    if value.dim() != 3 or value.dtype.is_floating_point:
        return None
    source: object = operand
    while isinstance(source, Node) and source.target == _VIEW:
        source = source.args[0]
    return source if isinstance(source, Node) and source.target == _SLICE else None


class SlicedMatmulOperandPass(ArmPass):
    """MATMUL(A, B) with A a slice becomes MATMUL(CLAMP(A, type min, type max), B)."""

    _passes_required_after: set[type[ExportPass]] = set()

    def __init__(self) -> None:
        super().__init__()
        self.copied: list[tuple[str, tuple[int, ...]]] = []  # (matmul, its first operand's shape)

    def call(self, graph_module: GraphModule) -> PassResult:
        graph = graph_module.graph
        for node in list(graph.nodes):
            if node.op != "call_function" or node.target != _MATMUL:
                continue
            if sliced_operand(node) is None:
                continue
            operand = node.args[0]
            assert isinstance(operand, Node)
            value = get_first_fake_tensor(operand)
            limits = torch.iinfo(value.dtype)
            with graph.inserting_before(node):
                copy = create_node(graph, _CLAMP, (operand, limits.min, limits.max))
            # the copy is the matmul's: per-layer attribution books it to the matmul's call
            for key in ("stack_trace", "nn_module_stack", "torch_fn", "from_node"):
                if key in node.meta:
                    copy.meta[key] = node.meta[key]
            node.replace_input_with(operand, copy)
            self.copied.append((node.name, tuple(int(d) for d in value.shape)))
        if not self.copied:
            return PassResult(graph_module, False)
        graph.lint()
        # retrace: the CLAMP gets its value (shape, dtype) from its input
        return PassResult(super().call(graph_module).graph_module, True)


@contextmanager
def sliced_matmul_rewrite() -> Iterator[Callable[[], tuple[RewriteRecord, ...]]]:
    """copy-sliced-matmul-input for the length of a lowering; yields what gives its records."""
    ours = SlicedMatmulOperandPass()
    with inserted_after(RewritePadPass, ours):
        yield lambda: tuple(
            RewriteRecord(
                SLICED_MATMUL,
                matmul,
                "TOSA lowering",
                f"first operand of a matmul over {n} batch(es) of {h}x{c}, a slice, copied into "
                "its own tensor by a full-range clamp: Vela 5.1.0 and 5.2.0 otherwise read batch "
                "0's rows for every batch, or the whole row of a channel slice (same result)",
            )
            for matmul, (n, h, c) in ours.copied
        )
