"""residual-branch-order: the longer branch into an add becomes its last operand.

Vela schedules an elementwise operation's inputs last operand first. For a residual block written
`conv2(conv1(x)) + shortcut(x)` it runs the shortcut first, and the shortcut's output then stays
in SRAM through conv1 and conv2. With less SRAM free, Vela splits conv1's weights into more and
narrower double-buffered stripes (ResNet-8's last block: three NPU operations of 16/32/16
channels instead of two of 32). Swapping the operands of the add, which is commutative, makes the
longer branch run first and the shortcut last, as in the TFLite reference. Results are unchanged:
each operand keeps its own rescale.
"""

from __future__ import annotations

import torch
from torch.fx import GraphModule, Node

from ..artifacts import RewriteRecord
from ..graph_info import node_source

aten = torch.ops.aten
_COMMUTATIVE = (aten.add.Tensor, aten.add_.Tensor)


def _ancestors(node: Node, cache: dict[Node, frozenset[Node]]) -> frozenset[Node]:
    """Every operation node `node` depends on, itself included (iterative: graphs can be deep)."""
    stack = [node]
    while stack:
        current = stack[-1]
        if current in cache:
            stack.pop()
            continue
        pending = [n for n in current.all_input_nodes if n not in cache]
        if pending:
            stack.extend(pending)
            continue
        stack.pop()
        own = frozenset((current,)) if current.op == "call_function" else frozenset()
        cache[current] = own.union(*(cache[n] for n in current.all_input_nodes))
    return cache[node]


def longer_branch_last(graph: GraphModule) -> list[RewriteRecord]:
    records = []
    cache: dict[Node, frozenset[Node]] = {}
    for node in graph.graph.nodes:
        if node.op != "call_function" or node.target not in _COMMUTATIVE or node.kwargs:
            continue
        if len(node.args) != 2 or not all(isinstance(a, Node) for a in node.args):
            continue
        first, second = node.args
        if first.meta.get("val") is None or second.meta.get("val") is None:
            continue
        if first.meta["val"].shape != second.meta["val"].shape:
            continue  # broadcasting: leave the operand roles alone
        first_ops, second_ops = _ancestors(first, cache), _ancestors(second, cache)
        first_only, second_only = len(first_ops - second_ops), len(second_ops - first_ops)
        if first_only <= second_only:
            continue
        node.args = (second, first)
        records.append(
            RewriteRecord(
                "residual-branch-order",
                node.name,
                node_source(node),
                f"add operands swapped: the {first_only}-op branch ({first.name}) now runs before "
                f"the {second_only}-op one ({second.name}), whose output is no longer held in SRAM "
                "meanwhile (same result)",
            )
        )
    return records
