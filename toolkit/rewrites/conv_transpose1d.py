"""conv-transpose-1d-as-2d: ConvTranspose1d as the 2-D transposed convolution over a height of 1.

ExecuTorch 1.5.1's Arm partitioner takes only 2-D transposed convolutions ("Only 2D transpose
convolutions are supported"), so a ConvTranspose1d (audio and time-series decoders) ran on the
CPU between two delegates. Over (C, L) it is exactly conv_transpose2d over (C, 1, L) with the
weight (Cin, Cout/groups, K) as (Cin, Cout/groups, 1, K), stride, padding, output padding and
dilation 1 or 0 in height, between an unsqueeze and a squeeze of that axis. The 4-D weight is a
buffer of its own, so the quantizer sees a constant weight as for any transposed convolution.
"""

from __future__ import annotations

import functools

import torch
from torch.fx import GraphModule, Node

from ..artifacts import RewriteRecord
from ..graph_info import node_source
from .height_one import arguments_after, replace_over_height_one

aten = torch.ops.aten

# conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
# dilation=1): the defaults of the arguments after the weight
_DEFAULTS = (None, [1], [0], [0], 1, [1])


def _pair(value, height: int) -> list[int]:
    """A 1-D argument (int or one-element list) as [height, value]."""
    return [height, value[0] if isinstance(value, (list, tuple)) else value]


def conv_transpose_1d_as_2d(graph: GraphModule) -> list[RewriteRecord]:
    records: list[RewriteRecord] = []
    for node in list(graph.graph.nodes):
        if node.op != "call_function" or node.target != aten.conv_transpose1d.default:
            continue
        weight = node.args[1]
        if node.kwargs or not (isinstance(weight, Node) and weight.op == "get_attr"):
            continue
        bias, stride, padding, output_padding, groups, dilation = arguments_after(
            node, 2, _DEFAULTS
        )
        name = f"etk_conv_transpose_2d_weight_{len(records)}"
        weight_1d = functools.reduce(getattr, str(weight.target).split("."), graph)  # "t.weight"
        assert isinstance(weight_1d, torch.Tensor)
        graph.register_buffer(name, weight_1d.detach().unsqueeze(2))
        with graph.graph.inserting_before(node):
            weight_2d = graph.graph.get_attr(name)
        weight_2d.meta["val"] = getattr(graph, name)
        arguments = (
            weight_2d,
            bias,
            _pair(stride, 1),
            _pair(padding, 0),
            _pair(output_padding, 0),
            groups,
            _pair(dilation, 1),
        )
        conv = replace_over_height_one(graph, node, aten.conv_transpose2d.input, arguments)
        kernel = weight_2d.meta["val"].shape[-1]
        records.append(
            RewriteRecord(
                "conv-transpose-1d-as-2d",
                conv.name,
                node_source(conv),
                f"conv_transpose1d (kernel {kernel}, stride {_pair(stride, 1)[1]}) -> "
                "conv_transpose2d over a height of 1 (same output; upstream's partitioner takes "
                "only 2-D transposed convolutions, so it ran on the CPU)",
            )
        )
    if records:
        graph.graph.eliminate_dead_code()
    return records
