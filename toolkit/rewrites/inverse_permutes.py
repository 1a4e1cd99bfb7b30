"""Read x where a graph transposes x and transposes it straight back.

At a delegate boundary ExecuTorch's Arm backend transposes a tensor to NCHW for its reader
outside the delegate and, when a reader inside also needs it, transposes it back to NHWC:
x -> TRANSPOSE -> (delegate output) and -> TRANSPOSE back -> the next convolution. Vela 5.1.0
merges the two inverse transposes and drops the first one's result as a delegate output
(seen: MobileNetV3-small and TinyUNet at batch size 2): the command stream writes fewer outputs
than the TOSA graph has, and the next delegate reads a buffer nothing wrote (lower/vela_check.py
names it). permute(permute(x, p), q) with q undoing p is x, exactly; so the readers of the second
permute read x, and the first permute stays only for the readers that need it.

Runs in ExecuTorch's Arm pass pipeline after RewritePadPass (before DecomposePermuteForU55Pass
splits permutes), registered only while we lower.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from executorch.backends.arm._passes import ArmPass, RewritePadPass
from executorch.exir.dialects._ops import ops as exir_ops
from executorch.exir.pass_base import ExportPass, PassResult
from torch.fx import GraphModule, Node

from ..artifacts import RewriteRecord
from .fold_pad import static_ints
from .pass_insertion import inserted_after

_PERMUTE = exir_ops.edge.aten.permute_copy.default


def _undoes(first: list[int], second: list[int]) -> bool:
    """Whether permuting by `second` after `first` gives back the original order."""
    return len(first) == len(second) and [first[d] for d in second] == list(range(len(first)))


class CancelInversePermutesPass(ArmPass):
    _passes_required_after: set[type[ExportPass]] = set()

    def __init__(self) -> None:
        super().__init__()
        self.cancelled: list[str] = []  # the second permute of each pair

    def call(self, graph_module: GraphModule) -> PassResult:
        graph = graph_module.graph
        for node in list(graph.nodes):
            if node.op != "call_function" or node.target != _PERMUTE:
                continue
            first = node.args[0]
            if not isinstance(first, Node) or first.target != _PERMUTE:
                continue
            source = first.args[0]
            order, back = static_ints(first.args[1]), static_ints(node.args[1])
            if not isinstance(source, Node) or order is None or back is None:
                continue
            if not _undoes(order, back):
                continue
            node.replace_all_uses_with(source)
            graph.erase_node(node)
            self.cancelled.append(node.name)
            if not first.users:
                graph.erase_node(first)
        if not self.cancelled:
            return PassResult(graph_module, False)
        graph.lint()
        graph_module.recompile()
        return PassResult(graph_module, True)


@contextmanager
def inverse_permutes_rewrite() -> Iterator[Callable[[], tuple[RewriteRecord, ...]]]:
    """cancel-inverse-permutes for the length of a lowering; yields what gives its records."""
    ours = CancelInversePermutesPass()
    with inserted_after(RewritePadPass, ours):
        yield lambda: tuple(
            RewriteRecord(
                "cancel-inverse-permutes",
                name,
                "TOSA lowering",
                "a transpose that undoes the one before it dropped: its readers read the "
                "untransposed tensor (Vela 5.1.0 and 5.2.0 otherwise drop the first transpose's "
                "delegate output; same result)",
            )
            for name in ours.cancelled
        )
