"""A delegate output the CPU would read with the wrong type: refused when lowering.

An Ethos-U delegate computes in integers (TOSA's INT profile): each of its outputs must leave
through a quantize, so that the CPU side reads int8/int16 codes and dequantizes them. ExecuTorch
1.5.1 can delegate a subgraph whose last operator computes "float" in the quantized graph's view
(a PAD that ExecuTorch made after quantization, between a dequantize and a convolution): the
NPU writes int8, and the CPU operator after it reads those bytes as float. Such a program gives
garbage or crashes at run time; it is refused here, naming the operators.
"""

from __future__ import annotations

import operator
from typing import cast

import torch
from torch.fx import GraphModule, Node

from ..errors import ToolError
from ..graph_info import node_source


def _op_name(node: Node) -> str:
    """'constant_pad_nd' for aten.constant_pad_nd.default, the node's name otherwise."""
    if node.op != "call_function":
        return node.name
    parts = str(getattr(node.target, "__name__", node.target)).split(".")
    return parts[-2] if len(parts) >= 2 else parts[-1]


def _is_float(node: object) -> bool:
    value = node.meta.get("val") if isinstance(node, Node) else None
    return isinstance(value, torch.Tensor) and value.dtype.is_floating_point


def check_delegate_outputs(graph: GraphModule, calls: list[Node]) -> None:
    """ToolError naming the first delegate output that leaves the NPU unquantized."""
    for index, call in enumerate(calls):
        lowered = getattr(graph, str(cast(Node, call.args[0]).target))
        inner = lowered.original_module.graph
        results = cast("list[Node]", next(n for n in inner.nodes if n.op == "output").args[0])
        for position, result in enumerate(results):
            if _is_float(result):
                raise ToolError(_message(index, result, _readers(call, position)))


def _readers(call: Node, position: int) -> list[Node]:
    items = [u for u in call.users if u.target is operator.getitem and u.args[1] == position]
    return [reader for item in items for reader in item.users]


def _message(index: int, result: Node, readers: list[Node]) -> str:
    cpu = [r for r in readers if r.op == "call_function"]
    who = (
        f"the CPU operator {_op_name(cpu[0])} would read its int8 data as float"
        if cpu
        else "the model output would be its int8 data read as float"
    )
    return (
        f"ExecuTorch left a delegate output unquantized: delegate {index} returns "
        f"{_op_name(result)} ({node_source(result)}) computed on the NPU in integers, and {who}; "
        "etk refuses the program, whose results would be wrong: report this model "
        "(an operator ExecuTorch decomposes after quantization)"
    )
