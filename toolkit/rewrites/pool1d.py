"""1-D pools as operators upstream quantizes. ExecuTorch 1.5.1's Arm quantizer has no pattern for
aten.adaptive_avg_pool1d, max_pool1d or avg_pool1d, so such a pool stays float and runs on the CPU
between two delegates (keyword-spotting nets: Conv1d layers with MaxPool1d, AdaptiveAvgPool1d(1)
as the head).

global-pool-1d-as-mean: AdaptiveAvgPool1d(1) is exactly mean(x, -1, keepdim=True), which the
quantizer annotates with its input's quantization and the NPU runs.

pool-1d-as-2d: MaxPool1d / AvgPool1d over (C, L) is exactly the 2-D pool over (C, 1, L) with a
window of height 1 (no padding in height, so an average counts the same elements), between an
unsqueeze and a squeeze of that axis.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.fx import GraphModule, Node

from ..artifacts import RewriteRecord
from ..graph_info import node_source
from .height_one import arguments_after, replace_over_height_one

aten = torch.ops.aten


def global_pool_1d_as_mean(graph: GraphModule) -> list[RewriteRecord]:
    records = []
    for node in list(graph.graph.nodes):
        if node.op != "call_function" or node.target != aten.adaptive_avg_pool1d.default:
            continue
        if list(node.args[1]) != [1]:
            continue
        length = node.args[0].meta["val"].shape[-1]
        with graph.graph.inserting_before(node):
            mean = graph.graph.call_function(aten.mean.dim, (node.args[0], [-1], True))
        mean.meta = dict(node.meta)
        node.replace_all_uses_with(mean)
        graph.graph.erase_node(node)
        records.append(
            RewriteRecord(
                "global-pool-1d-as-mean",
                mean.name,
                node_source(mean),
                f"adaptive_avg_pool1d to 1 over {length} steps -> mean over the last axis (same "
                "output; upstream's quantizer has no adaptive_avg_pool1d pattern, so it ran on the CPU)",
            )
        )
    return records


def _as_2d(node: Node) -> tuple[Any, tuple] | None:
    """(2-D pool, its arguments after the input) for a 1-D max or average pool node."""
    if node.target == aten.max_pool1d.default:
        kernel, stride, padding, dilation, ceil_mode = arguments_after(
            node,
            1,
            (None, [], [0], [1], False),  # the kernel has no default
        )
        return aten.max_pool2d.default, (
            [1, kernel[0]],
            [1, (stride or kernel)[0]],
            [0, padding[0]],
            [1, dilation[0]],
            ceil_mode,
        )
    if node.target == aten.avg_pool1d.default:
        kernel, stride, padding, ceil_mode, count_include_pad = arguments_after(
            node, 1, (None, [], [0], False, True)
        )
        return aten.avg_pool2d.default, (
            [1, kernel[0]],
            [1, (stride or kernel)[0]],
            [0, padding[0]],
            ceil_mode,
            count_include_pad,
        )
    return None


def pool_1d_as_2d(graph: GraphModule) -> list[RewriteRecord]:
    records = []
    for node in list(graph.graph.nodes):
        if node.op != "call_function":
            continue
        converted = _as_2d(node)
        if converted is None or node.kwargs:
            continue
        pool_2d, arguments = converted
        pooled = replace_over_height_one(graph, node, pool_2d, arguments)
        kind = "max" if pool_2d == aten.max_pool2d.default else "avg"
        records.append(
            RewriteRecord(
                "pool-1d-as-2d",
                pooled.name,
                node_source(pooled),
                f"{kind}_pool1d (window {arguments[0][1]}, stride {arguments[1][1]}) -> {kind}_pool2d "
                "over a height of 1 (same output; upstream's quantizer has no 1-D pool pattern, "
                "so it ran on the CPU)",
            )
        )
    return records
