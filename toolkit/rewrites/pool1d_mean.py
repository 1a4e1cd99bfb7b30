"""global-pool-1d-as-mean: AdaptiveAvgPool1d(1) becomes a mean over the last axis.

ExecuTorch 1.5.1's Arm quantizer has no pattern for aten.adaptive_avg_pool1d, so the pool stays
float and its decomposition (a mean.dim) runs on the CPU between two delegates (the usual
keyword-spotting head: Conv1d layers, then AdaptiveAvgPool1d(1)). With output size 1 the pool is
exactly mean(x, -1, keepdim=True), which the quantizer annotates with its input's quantization
and the NPU runs.
"""

from __future__ import annotations

import torch
from torch.fx import GraphModule

from ..artifacts import RewriteRecord
from ..graph_info import node_source

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
