"""A 1-D operator replaced by its 2-D form over a height of 1: unsqueeze(-2), the 2-D operator,
squeeze(-2). Over (..., C, L) that is the same computation; the rewrites that use it
(pool-1d-as-2d, conv-transpose-1d-as-2d) exist because upstream takes only the 2-D forms."""

from __future__ import annotations

from typing import Any

import torch
from torch.fx import GraphModule, Node

aten = torch.ops.aten


def replace_over_height_one(graph: GraphModule, node: Node, op_2d: Any, arguments: tuple) -> Node:
    """Replace node, whose first argument is the (..., C, L) input, with op_2d(input viewed as
    (..., C, 1, L), *arguments) viewed back; returns the op_2d node."""
    source = node.args[0]
    assert isinstance(source, Node)
    with graph.graph.inserting_before(node):
        rows = graph.graph.call_function(aten.unsqueeze.default, (source, -2))
        operation = graph.graph.call_function(op_2d, (rows, *arguments))
        out = graph.graph.call_function(aten.squeeze.dim, (operation, -2))
    rows.meta = {**node.meta, "val": source.meta["val"].unsqueeze(-2)}
    operation.meta = {**node.meta, "val": node.meta["val"].unsqueeze(-2)}
    out.meta = dict(node.meta)
    node.replace_all_uses_with(out)
    graph.graph.erase_node(node)
    return operation


def arguments_after(node: Node, first: int, defaults: tuple) -> list:
    """node.args[first:], with the schema's defaults for those it leaves out."""
    given = list(node.args[first:])
    return given + list(defaults[len(given) :])
