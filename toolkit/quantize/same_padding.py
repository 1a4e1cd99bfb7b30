"""Convolutions with padding='same' or 'valid' as numbers, before quantization.

torch.export keeps `nn.Conv2d(C, K, 4, padding='same')` as aten.conv2d.padding. ExecuTorch 1.5.1
decomposes it only after quantization, into constant_pad_nd + convolution when the padding is
asymmetric (an even kernel), so the PAD sits between the input's dequantize and the conv: the
partitioner delegated the PAD alone and left the conv on the CPU, reading the PAD's int8 output
as float. Written here as PyTorch computes it (ATen's _convolution_mode: each side gets
total // 2, the extra row or column goes after), the conv is an ordinary conv with a PAD before
it, which the quantizer annotates as a whole, the NPU runs, and fold-pad-into-conv folds into the
conv's own padding.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
from torch.fx import GraphModule, Node

aten = torch.ops.aten
_AS_NUMBERS = {
    aten.conv1d.padding: aten.conv1d.default,
    aten.conv2d.padding: aten.conv2d.default,
}


def _ints(value, dims: int) -> list[int]:
    return [int(value)] * dims if isinstance(value, int) else [int(v) for v in value]


def same_padding(kernel: list[int], dilation: list[int]) -> list[tuple[int, int]]:
    """(before, after) per spatial axis, as PyTorch pads for padding='same'."""
    totals = [d * (k - 1) for k, d in zip(kernel, dilation)]
    return [(total // 2, total - total // 2) for total in totals]


def explicit_same_padding(graph: GraphModule) -> tuple[str, ...]:
    """Rewrite every conv1d/conv2d with string padding; the names of the convs rewritten."""
    done = []
    for node in list(graph.graph.nodes):
        if node.op == "call_function" and node.target in _AS_NUMBERS:
            _rewrite(graph, node)
            done.append(node.name)
    if done:
        graph.graph.eliminate_dead_code()
        graph.graph.lint()
        graph.recompile()
    return tuple(done)


_NAMES = ("input", "weight", "bias", "stride", "padding", "dilation", "groups")
_DEFAULTS = (None, None, None, 1, "valid", 1, 1)


def _rewrite(graph: GraphModule, conv: Node) -> None:
    given = [*conv.args, *_DEFAULTS[len(conv.args) :]]
    values: list[Any] = [conv.kwargs.get(name, value) for name, value in zip(_NAMES, given)]
    source, weight, bias, stride, padding, dilation, groups = values
    dims = len(weight.meta["val"].shape) - 2
    stride, dilation = _ints(stride, dims), _ints(dilation, dims)
    kernel = [int(k) for k in weight.meta["val"].shape[2:]]
    pads = same_padding(kernel, dilation) if padding == "same" else [(0, 0)] * dims
    if dims == 1 and pads[0][0] != pads[0][1] and weight.op == "get_attr":
        # ExecuTorch's conv1d -> conv2d reshape would sit between the PAD and the conv, where
        # fold-pad-into-conv cannot fold it: the 2-D conv over a height of 1 here instead
        weight = _weight_over_height_one(graph, conv, weight)
        source = _inserted(graph, conv, aten.unsqueeze.default, (source, -2))
        stride, dilation, pads = [1, *stride], [1, *dilation], [(0, 0), *pads]
    extra = [after - before for before, after in pads]
    if any(extra):
        # constant_pad_nd takes (before, after) pairs from the last axis back
        flat = [n for e in reversed(extra) for n in (0, e)]
        source = _inserted(graph, conv, aten.constant_pad_nd.default, (source, flat, 0.0))
    target = aten.conv2d.default if len(pads) == 2 else aten.conv1d.default
    arguments = (source, weight, bias, stride, [b for b, _ in pads], dilation, groups)
    result = _inserted(graph, conv, target, arguments, conv.meta.get("val"))
    if len(pads) != dims:
        result.meta["val"] = conv.meta["val"].unsqueeze(-2)
        result = _inserted(graph, conv, aten.squeeze.dim, (result, -2), conv.meta["val"])
    conv.replace_all_uses_with(result)
    graph.graph.erase_node(conv)


def _inserted(
    graph: GraphModule, conv: Node, target: Any, arguments: tuple[Any, ...], value: Any = None
) -> Node:
    """target(*arguments) before conv, with conv's metadata; its value (a fake tensor) given,
    or that of target on its one tensor argument, the first."""
    with graph.graph.inserting_before(conv):
        node = graph.graph.call_function(target, arguments)
    node.meta = {k: v for k, v in conv.meta.items() if k != "val"}
    if value is None and arguments[0].meta.get("val") is not None:
        value = target(arguments[0].meta["val"], *arguments[1:])
    if value is not None:
        node.meta["val"] = value
    return node


def _weight_over_height_one(graph: GraphModule, conv: Node, weight: Node) -> Node:
    """The 1-D weight (K, C, L) as a buffer (K, C, 1, L) of its own, a constant as before."""
    name = f"etk_same_padding_weight_{conv.name}"
    weight_1d: Any = functools.reduce(getattr, str(weight.target).split("."), graph)
    graph.register_buffer(name, weight_1d.detach().unsqueeze(2))
    with graph.graph.inserting_before(conv):
        weight_2d = graph.graph.get_attr(name)
    weight_2d.meta["val"] = getattr(graph, name)
    return weight_2d
