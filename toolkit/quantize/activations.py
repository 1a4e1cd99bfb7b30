"""Rewrite every way users write relu/relu6 into the two forms the Ethos-U patterns know.

ExecuTorch 1.5.1's block patterns list relu, relu_, hardtanh and hardtanh_ only. `F.relu6` exports
as aten.relu6, `torch.clamp(x, 0, 6)` as aten.clamp, `torch.clip` as aten.clip and
`x.clamp_min(0)` as aten.clamp_min; `F.threshold(x, 0, 0)`, `F.leaky_relu(x, 0)`,
`torch.where(x > 0, x, 0)` and `torch.maximum(x, torch.zeros(()))` are relu written otherwise.
None match, so the conv is quantized alone and the activation may even stay a float op on the CPU.
These rewrites are exact (same values for every finite input), so they run for both variants: the
unfused variant then keeps the activation as its own int8 CLAMP instead of a CPU op.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch.fx import GraphModule, Node

aten = torch.ops.aten

RELU_TARGETS = (aten.relu.default, aten.relu_.default)
HARDTANH_TARGETS = (aten.hardtanh.default, aten.hardtanh_.default)


@dataclass(frozen=True)
class ActivationRewrite:
    node: str
    original: str
    replacement: str


def _number(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _bounds(node: Node) -> tuple[Any, float | None, float | None] | None:
    """(input, lower, upper) of a clamp-like node with constant bounds, or None."""
    target, args = node.target, tuple(node.args)
    if target == aten.relu6.default:
        return args[0], 0.0, 6.0
    if target in (aten.clamp.default, aten.clamp_.default, aten.clip.default, aten.clip_.default):
        lower = args[1] if len(args) > 1 else node.kwargs.get("min")
        upper = args[2] if len(args) > 2 else node.kwargs.get("max")
        if (lower is not None and _number(lower) is None) or (
            upper is not None and _number(upper) is None
        ):
            return None
        return args[0], _number(lower), _number(upper)
    if target in (aten.clamp_min.default, aten.clamp_min_.default):
        return args[0], _number(args[1]), None
    source = _relu_input(node)
    return None if source is None else (source, 0.0, None)


def _relu_input(node: Node) -> Any:
    """x, when node is relu(x) written otherwise: threshold(x, 0, 0), leaky_relu(x, 0),
    where(x > 0, x, 0) and maximum(x, zeros) either way round; else None."""
    target, args = node.target, tuple(node.args)
    if target in (aten.threshold.default, aten.threshold_.default):  # x > t ? x : value
        return args[0] if _number(args[1]) == _number(args[2]) == 0.0 else None
    if target in (aten.leaky_relu.default, aten.leaky_relu_.default):
        return args[0] if len(args) > 1 and _number(args[1]) == 0.0 else None
    if target == aten.where.ScalarOther:
        return _where_positive_input(args)
    if target == aten.maximum.default:
        return _maximum_with_zeros_input(node, args)
    return None


def _where_positive_input(args: tuple) -> Any:
    """x of where(x > 0, x, 0) (or >=), else None."""
    condition, value, other = args
    if not (isinstance(condition, Node) and condition.target in _POSITIVE_TESTS):
        return None
    if condition.args[0] is value and _number(condition.args[1]) == _number(other) == 0.0:
        return value
    return None


def _maximum_with_zeros_input(node: Node, args: tuple) -> Any:
    """x of maximum(x, zeros) or maximum(zeros, x), else None."""
    for value, zero in (args, args[::-1]):
        if isinstance(zero, Node) and zero.target == aten.zeros.default and _same(node, value):
            return value
    return None


def _same(node: Node, value) -> bool:
    """Whether node's output has value's shape and dtype (the zeros it takes the maximum with
    neither broadcast it nor promoted its type)."""
    out, given = node.meta.get("val"), value.meta.get("val") if isinstance(value, Node) else None
    return (
        isinstance(out, torch.Tensor)
        and isinstance(given, torch.Tensor)
        and (out.shape, out.dtype) == (given.shape, given.dtype)
    )


_POSITIVE_TESTS = (aten.gt.Scalar, aten.ge.Scalar)


def describe_activation(node: Node) -> str:
    if node.target in RELU_TARGETS:
        return "relu"
    if node.target in HARDTANH_TARGETS:
        lower = node.args[1] if len(node.args) > 1 else -1.0
        upper = node.args[2] if len(node.args) > 2 else 1.0
        return "relu6" if (lower, upper) == (0, 6) else f"hardtanh({lower:g}, {upper:g})"
    return str(node.target).replace("aten.", "")


def canonicalize_activations(gm: GraphModule) -> tuple[ActivationRewrite, ...]:
    """relu6 -> hardtanh(0, 6); clamp or clip(0, M) -> hardtanh(0, M); clamp(min=0), clamp_min(0),
    threshold(0, 0), leaky_relu(0), where(x > 0, x, 0), maximum(x, zeros) -> relu."""
    rewrites = []
    for node in list(gm.graph.nodes):
        if node.op != "call_function":
            continue
        bounds = _bounds(node)
        if bounds is None or bounds[1] != 0.0:
            continue
        source, _, upper = bounds
        with gm.graph.inserting_before(node):
            if upper is None:
                new = gm.graph.call_function(aten.relu.default, (source,))
            elif upper > 0:
                new = gm.graph.call_function(aten.hardtanh.default, (source, 0.0, upper))
            else:
                continue
        new.meta = dict(node.meta)
        node.replace_all_uses_with(new)
        operands = [a for a in node.args if isinstance(a, Node) and a is not source]
        gm.graph.erase_node(node)
        for operand in operands:  # where's comparison, maximum's zeros: unused now
            if not operand.users:
                gm.graph.erase_node(operand)
        rewrites.append(ActivationRewrite(node.name, str(node.target), str(new.target)))
    if rewrites:
        gm.graph.lint()
        gm.recompile()
    return tuple(rewrites)
