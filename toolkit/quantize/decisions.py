"""What the block annotation did: for each activation, fused into its conv/linear or not, and why."""

from __future__ import annotations

from dataclasses import replace
from typing import cast

import torch
import torchao.quantization.pt2e.quantize_pt2e  # noqa: F401  registers torch.ops.quantized_decomposed
from torch.fx import GraphModule, Node

from ..artifacts import FusionDecision
from ..graph_info import node_layer, node_source
from .activations import HARDTANH_TARGETS, RELU_TARGETS, describe_activation

aten = torch.ops.aten
qd = torch.ops.quantized_decomposed

BLOCK_PARENTS = {
    aten.conv1d.default,
    aten.conv2d.default,
    aten.conv2d.padding,
    aten.convolution.default,
    aten.linear.default,
    aten.batch_norm.default,
}
ACTIVATIONS = (
    set(RELU_TARGETS)
    | set(HARDTANH_TARGETS)
    | {aten.clamp.default, aten.clamp_.default, aten.clamp_min.default, aten.relu6.default}
)
QUANTIZE = {qd.quantize_per_tensor.default, qd.quantize_per_tensor.tensor}
DEQUANTIZE = {qd.dequantize_per_tensor.default, qd.dequantize_per_tensor.tensor}


def _through_qdq(node: Node) -> Node | None:
    """The float producer behind a dequantize(quantize(x)) pair, if that is what node is."""
    if node.target in DEQUANTIZE and isinstance(node.args[0], Node):
        quant = node.args[0]
        if quant.target in QUANTIZE and isinstance(quant.args[0], Node):
            return quant.args[0]
    return None


def _number(node: Node, index: int) -> float:
    """node.args[index] where the op's schema has a number there: a quantize's scale, zero point,
    qmin and qmax, a hardtanh's bounds."""
    return cast(float, node.args[index])


def _float_users(node: Node) -> list[Node]:
    """The nodes that consume node's value, looking through quantize -> dequantize pairs."""
    users: list[Node] = []
    for user in node.users:
        if user.target in QUANTIZE:
            for dq in user.users:
                users.extend(dq.users if dq.target in DEQUANTIZE else [dq])
        else:
            users.append(user)
    return users


def lower_bound(node: Node) -> float | None:
    if node.target in RELU_TARGETS:
        return 0.0
    if node.target in HARDTANH_TARGETS:
        return float(_number(node, 1)) if len(node.args) > 1 else -1.0
    value = node.args[1] if len(node.args) > 1 else node.kwargs.get("min")
    return float(value) if isinstance(value, (int, float)) else None


def _output_quantize(node: Node) -> Node | None:
    users = list(node.users)
    return users[0] if len(users) == 1 and users[0].target in QUANTIZE else None


def _upper_saturation(act: Node, quant: Node) -> tuple[float, str, str]:
    """(real value at qmax, "activation" or "calibration", a note) for a fused block's output."""
    scale, zero_point, qmax = (
        float(_number(quant, 1)),
        int(_number(quant, 2)),
        int(_number(quant, 4)),
    )
    top = scale * (qmax - zero_point)
    upper = float(_number(act, 2)) if act.target in HARDTANH_TARGETS else None
    if upper is None or top < upper - scale / 2:
        below = f", below the upper bound {upper:g}" if upper is not None else ""
        return top, "calibration", f"qmax is the calibrated maximum {top:.4g}{below}"
    if top <= upper + scale / 2:
        return top, "activation", f"qmax is the upper bound {upper:g}"
    return top, "calibration", f"qmax {top:.4g} is above the upper bound {upper:g}: a CLAMP remains"


# upstream's a16w8 observers never go below this scale (get_symmetric_a16w8_quantization_config's
# epsilon): an int16 tensor whose values stay within +-8 is quantized on [-8, 8]
A16W8_MIN_SCALE = 2.0**-12


def _a16w8_saturation(act: Node, quant: Node) -> tuple[float, str, str]:
    """(the clip point, where it comes from, a note) of an a16w8 block: the activation's CLAMP
    clips at min(M, the real value of qmax)."""
    scale, qmax = float(_number(quant, 1)), int(_number(quant, 4))
    top = scale * qmax
    upper = float(_number(act, 2)) if act.target in HARDTANH_TARGETS else None
    floor = scale <= A16W8_MIN_SCALE
    note = (
        f"the scale is a16w8's minimum 2^-12 (qmax {top:.4g}), not calibrated: unfused "
        f"quantizes the same unless the conv's own output passes +-{top:.4g}"
        if floor
        else f"qmax is the calibrated maximum {top:.4g}"
    )
    if upper is not None and upper < top:
        return upper, "activation", f"{note}; the CLAMP clips at the upper bound {upper:g}"
    return top, "minimum scale" if floor else "calibration", note


def _symmetric16(zero_point: int, qmin: int) -> bool:
    """a16w8's symmetric int16: zero point 0, qmin -32767."""
    return zero_point == 0 and qmin < -128


def _raised_reason(zero_point: int, qmin: int) -> str:
    """What a block whose output zero point lies above qmin is (split_blocks_above_qmin)."""
    if _symmetric16(zero_point, qmin):
        return (
            f"symmetric int16: zero point 0 is not qmin {qmin}, so the RESCALE's saturation "
            "cannot be the activation: it stays CLAMP(0, qmax) on the block's one quantization, "
            "observed after the activation"
        )
    return (
        f"output zero point {zero_point} above qmin {qmin}: one block quantization, qmin "
        f"raised to the zero point as CLAMP({zero_point}, qmax) on it, which Vela folds into "
        "the output stage (a CLAMP remains in TOSA: ExecuTorch's RESCALE ignores qmin)"
    )


def _decide(act: Node) -> FusionDecision | None:
    producer = act.args[0] if act.args and isinstance(act.args[0], Node) else None
    if producer is None:
        return None
    in_block = producer.target in BLOCK_PARENTS
    parent = producer if in_block else _through_qdq(producer)
    if parent is None or parent.target not in BLOCK_PARENTS:
        return None
    name, source = describe_activation(act), node_source(act)
    lower = lower_bound(act)
    if lower != 0.0:
        bound = "no lower bound" if lower is None else f"lower bound {lower:g} is not 0"
        return FusionDecision(
            parent.name, name, source, False, f"{bound}: the RESCALE cannot implement it"
        )
    raised = act.meta.get("etk_raised_zero_point")
    if raised is not None and not in_block:
        return _raised_decision(act, parent, name, source, raised)
    if not in_block:
        others = [u.name for u in _float_users(parent) if u is not act]
        reason = (
            f"{parent.name}'s output is also used by {', '.join(others)}: fusing the "
            "activation would clip it for them"
            if others
            else "fusion off: the activation keeps its own quantization and CLAMP"
        )
        return FusionDecision(parent.name, name, source, False, reason)
    return _in_block_decision(act, parent, name, source)


def _raised_decision(
    act: Node, parent: Node, name: str, source: str, raised: tuple[int, int]
) -> FusionDecision:
    """Fused by raising qmin to the zero point (a quantizer annotation outside a block)."""
    zero_point, qmin = raised
    quant = _output_quantize(act)
    saturation = _a16w8_saturation if _symmetric16(zero_point, qmin) else _upper_saturation
    top, bound_from, note = saturation(act, quant) if quant else (None, "", "")
    return FusionDecision(
        parent.name,
        name,
        source,
        True,
        _raised_reason(zero_point, qmin) + (f"; {note}" if note else ""),
        True,
        top,
        bound_from,
    )


def _in_block_decision(act: Node, parent: Node, name: str, source: str) -> FusionDecision:
    """An activation in its conv/linear block: fused into the RESCALE's saturation."""
    quant = _output_quantize(act)
    if quant is None:
        return FusionDecision(
            parent.name, name, source, False, "the activation's output is not quantized per tensor"
        )
    zero_point, qmin = int(_number(quant, 2)), int(_number(quant, 3))
    notes = [f"output zero point {zero_point} is the RESCALE's lower saturation"]
    raised = zero_point > qmin
    if raised:
        notes.append(f"qmin raised from {qmin} to the zero point {zero_point}")
    top, bound_from, note = _upper_saturation(act, quant)
    notes.append(note)
    return FusionDecision(
        parent.name, name, source, True, "; ".join(notes), raised, top, bound_from
    )


def fusion_decisions(graph: GraphModule) -> tuple[FusionDecision, ...]:
    """One decision per activation that follows a conv/linear (directly or through batch norm),
    with the conv/linear's call in the user's model."""
    nodes = {node.name: node for node in graph.graph.nodes}
    decisions = []
    for node in graph.graph.nodes:
        if node.op == "call_function" and node.target in ACTIVATIONS:
            decision = _decide(node)
            if decision is not None:
                parent = node_layer(nodes[decision.parent])
                decisions.append(replace(decision, parent_layer=parent))
    return tuple(decisions)
