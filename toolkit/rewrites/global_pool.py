"""global-pool-stride: a pool whose window covers its whole input gets stride 1.

AvgPool2d((25, 5)) on a 25x5 map (DS-CNN) has stride (25, 5); Ethos-U pools take strides up to 3,
so ExecuTorch leaves the pool on the CPU and splits the graph into two delegates. With one output
position the stride is never used: stride 1 gives the same single value, and the pool runs on
the NPU as one AVG_POOL2D.
"""

from __future__ import annotations

import torch
from torch.fx import GraphModule

from ..artifacts import RewriteRecord
from ..graph_info import node_source

aten = torch.ops.aten
_POOLS = {aten.avg_pool2d.default: 4, aten.max_pool2d.default: 4}  # index of the padding arg


def _as_pair(value) -> tuple[int, int]:
    if isinstance(value, int):
        return value, value
    return (value[0], value[0]) if len(value) == 1 else (value[0], value[1])


def global_pool_stride_one(graph: GraphModule) -> list[RewriteRecord]:
    records = []
    for node in graph.graph.nodes:
        if node.op != "call_function" or node.target not in _POOLS:
            continue
        args = list(node.args)
        kernel = _as_pair(args[1])
        stride = _as_pair(args[2]) if len(args) > 2 and args[2] else kernel
        padding = _as_pair(args[3]) if len(args) > 3 else (0, 0)
        height, width = node.args[0].meta["val"].shape[-2:]
        if padding != (0, 0) or kernel != (height, width) or stride == (1, 1):
            continue
        while len(args) < 3:
            args.append(kernel)
        args[2] = [1, 1]
        node.args = tuple(args)
        records.append(
            RewriteRecord(
                "global-pool-stride",
                node.name,
                node_source(node),
                f"{str(node.target).split('.')[1]} over the whole {height}x{width} input: stride "
                f"{stride[0]}x{stride[1]} -> 1x1 (same output; Ethos-U pools take strides <= 3)",
            )
        )
    return records
