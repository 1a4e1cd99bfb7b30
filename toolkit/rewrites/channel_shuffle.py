"""channel-shuffle-as-conv: ShuffleNet's channel shuffle becomes one 1x1 convolution.

`x.view(N, g, C // g, H, W).transpose(1, 2).view(N, C, H, W)` permutes channels. ExecuTorch 1.5.1
lowers the 5-D view/transpose pair to TOSA RESHAPE/TRANSPOSE around NHWC<->NCHW TRANSPOSEs, and
Vela 5.1 runs each of those transposes as one small NPU operation per row it moves (ShuffleNetV2
x0.5 at 64x64: thousands of NPU operations for its 16 shuffles). A channel permutation is a 1x1
convolution whose weight is the permutation matrix, which the NPU runs as one operation.

It stays exact in int8: each output channel's weight is a single 1.0, quantized per channel to
127 with scale 1/127, so the accumulator is 127 * (q - zp) and the RESCALE multiplies by 1/127
(error below 2^-14 on |127 * 128|, far under the rounding step); the output shares the input's
quantization (quantize/quantizer.py: EtkQuantizationConfig), as the view/transpose it replaced.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import torch
from torch.fx import GraphModule, Node

from ..artifacts import RewriteRecord
from ..graph_info import node_source

aten = torch.ops.aten
SHUFFLE_CONV = (
    "etk_channel_shuffle"  # node meta: a conv this rewrite made (quantizer shares qparams)
)
_VIEWS = (aten.view.default, aten.reshape.default, aten._unsafe_view.default)
_COPIES = (aten.contiguous.default, aten.clone.default)


def _shape(node) -> tuple[int, ...] | None:
    val = node.meta.get("val") if isinstance(node, Node) else None
    return tuple(val.shape) if val is not None else None


def _is_swap_1_2(node: Node) -> bool:
    # the ops' schemas: transpose(self, int dim0, int dim1), permute(self, int[] dims)
    if node.target in (aten.transpose.int, aten.swapaxes.default):
        return sorted(int(d) % 5 for d in cast("Sequence[int]", node.args[1:3])) == [1, 2]
    if node.target in (aten.permute.default, aten.permute_copy.default):
        return [int(d) % 5 for d in cast("Sequence[int]", node.args[1])] == [0, 2, 1, 3, 4]
    return False


def _shuffle_groups(end: Node) -> tuple[Node, int] | None:
    """(input, groups) when `end` is the last view of a channel shuffle, else None."""
    if end.op != "call_function" or end.target not in _VIEWS:
        return None
    split = _split_before_swap(end.args[0])
    if split is None or not isinstance(split.args[0], Node):
        return None
    source = split.args[0]
    in_shape, five, out_shape = _shape(source), _shape(split), _shape(end)
    if in_shape is None or five is None or len(in_shape) != 4 or len(five) != 5:
        return None
    n, c, h, w = in_shape
    if out_shape != in_shape or five != (n, five[1], c // five[1], h, w) or five[1] * five[2] != c:
        return None
    return source, five[1]


def _split_before_swap(node) -> Node | None:
    """The 5-D view a shuffle's swap of axes 1 and 2 reads (through single-use copies)."""
    while isinstance(node, Node) and node.target in _COPIES and len(node.users) == 1:
        node = node.args[0]
    if not isinstance(node, Node) or not _is_swap_1_2(node) or len(node.users) != 1:
        return None
    split = node.args[0]
    if not isinstance(split, Node) or split.target not in _VIEWS or len(split.users) != 1:
        return None
    return split


def _permutation_weight(channels: int, groups: int, dtype) -> torch.Tensor:
    """Output channel j * groups + i reads input channel i * (channels // groups) + j."""
    per_group = channels // groups
    weight = torch.zeros(channels, channels, 1, 1, dtype=dtype)
    for i in range(groups):
        for j in range(per_group):
            weight[j * groups + i, i * per_group + j] = 1.0
    return weight


def channel_shuffle_as_conv(graph: GraphModule) -> list[RewriteRecord]:
    records: list[RewriteRecord] = []
    for end in list(graph.graph.nodes):
        found = _shuffle_groups(end)
        if found is None:
            continue
        source, groups = found
        shape = _shape(source)
        assert shape is not None  # _shuffle_groups found the source's 4-D shape
        channels = shape[1]
        name = f"etk_channel_shuffle_weight_{len(records)}"
        graph.register_buffer(name, _permutation_weight(channels, groups, source.meta["val"].dtype))
        with graph.graph.inserting_before(end):
            weight = graph.graph.get_attr(name)
            conv = graph.graph.call_function(aten.conv2d.default, (source, weight))
        weight.meta["val"] = getattr(graph, name)
        conv.meta = {k: v for k, v in end.meta.items()}
        conv.meta[SHUFFLE_CONV] = True
        end.replace_all_uses_with(conv)
        records.append(
            RewriteRecord(
                "channel-shuffle-as-conv",
                end.name,
                node_source(end),
                f"channel shuffle of {channels} channels in {groups} groups -> one 1x1 convolution "
                "with a permutation weight (same values; the output keeps the input's quantization)",
            )
        )
    if records:
        graph.graph.eliminate_dead_code()
    return records
