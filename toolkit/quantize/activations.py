"""Rewrite every way users write relu/relu6 into the two forms the Ethos-U patterns know.

ExecuTorch 1.5.1's block patterns list relu, relu_, hardtanh and hardtanh_ only. `F.relu6` exports
as aten.relu6, `torch.clamp(x, 0, 6)` as aten.clamp and `x.clamp_min(0)` as aten.clamp_min: none
match, so the conv is quantized alone and the activation may even stay a float op on the CPU. These
rewrites are exact (same values for every finite input), so they run for both variants: the
unfused variant then keeps the activation as its own int8 CLAMP instead of a CPU op.
"""

from __future__ import annotations

from dataclasses import dataclass

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


def _bounds(node: Node) -> tuple[float | None, float | None] | None:
    """(lower, upper) of a clamp-like node with constant bounds, or None."""
    if node.target == aten.relu6.default:
        return 0.0, 6.0
    if node.target in (aten.clamp.default, aten.clamp_.default):
        lower = node.args[1] if len(node.args) > 1 else node.kwargs.get("min")
        upper = node.args[2] if len(node.args) > 2 else node.kwargs.get("max")
        if (lower is not None and _number(lower) is None) or (
            upper is not None and _number(upper) is None
        ):
            return None
        return _number(lower), _number(upper)
    if node.target in (aten.clamp_min.default, aten.clamp_min_.default):
        return _number(node.args[1]), None
    return None


def describe_activation(node: Node) -> str:
    if node.target in RELU_TARGETS:
        return "relu"
    if node.target in HARDTANH_TARGETS:
        lower = node.args[1] if len(node.args) > 1 else -1.0
        upper = node.args[2] if len(node.args) > 2 else 1.0
        return "relu6" if (lower, upper) == (0, 6) else f"hardtanh({lower:g}, {upper:g})"
    return str(node.target).replace("aten.", "")


def canonicalize_activations(gm: GraphModule) -> tuple[ActivationRewrite, ...]:
    """relu6 -> hardtanh(0, 6); clamp(0, M) -> hardtanh(0, M); clamp(min=0), clamp_min(0) -> relu."""
    rewrites = []
    for node in list(gm.graph.nodes):
        if node.op != "call_function":
            continue
        bounds = _bounds(node)
        if bounds is None or bounds[0] != 0.0:
            continue
        lower, upper = bounds
        with gm.graph.inserting_before(node):
            if upper is None:
                new = gm.graph.call_function(aten.relu.default, (node.args[0],))
            elif upper > 0:
                new = gm.graph.call_function(aten.hardtanh.default, (node.args[0], 0.0, upper))
            else:
                continue
        new.meta = dict(node.meta)
        node.replace_all_uses_with(new)
        gm.graph.erase_node(node)
        rewrites.append(ActivationRewrite(node.name, str(node.target), str(new.target)))
    if rewrites:
        gm.graph.lint()
        gm.recompile()
    return tuple(rewrites)
