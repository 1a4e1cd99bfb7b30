"""The operators a stored host graph may call: what etk's lowering leaves on the CPU, by name.

A stored program (OUT/VARIANT, a shared ETK_CACHE_DIR entry) is data: whoever can write the folder
can write host_graph.json and recompute its checksums. So a node's target is never looked up by
walking attributes from what the file says: its name must have the form `namespace.op.overload`
of an operator in this allow-list, and what is found must be exactly that operator:

- ATen operators of PyTorch's core opset and their view-copy forms (what ExecuTorch's edge dialect
  is made of), and the few ATen operators Arm's partitioner keeps undecomposed, that have no side
  effect (no in-place or out= form, no randomness);
- the quantize/dequantize operators ExecuTorch puts at delegate edges.

Anything else (a file read such as `aten.from_file`, an in-place copy, a library load reached by
attribute hops) is refused, and the stored program is treated as damaged and compiled again.
"""

from __future__ import annotations

import operator
import re
from functools import cache

import torch

DELEGATE_CALL = torch.ops.higher_order.executorch_call_delegate

# Arm's partitioner keeps these whole (TOSAPartitioner.ops_to_not_decompose, ExecuTorch 1.5.1),
# so one it then rejects stays on the CPU undecomposed, outside the core opset
_KEPT_WHOLE_BY_ARM = frozenset(
    {
        "celu.default",
        "eye.default",
        "hardsigmoid.default",
        "hardswish.default",
        "linear.default",
        "linspace.default",
        "logit.default",
        "pad.default",
        "selu.default",
        "silu.default",
    }
)
_QUANTIZE_OPS = frozenset(
    f"{kind}_per_{granularity}.{overload}"
    for kind in ("quantize", "dequantize")
    for granularity, overloads in (
        ("tensor", ("default", "tensor", "tensor2")),
        ("channel", ("default",)),
    )
    for overload in overloads
)
_NAME = re.compile(r"(aten|quantized_decomposed)\.([a-z_][a-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)")
_SIDE_EFFECT_TAGS = (torch.Tag.inplace_view, torch.Tag.nondeterministic_seeded)


class RefusedOperator(ValueError):
    """A stored graph names an operator etk does not put on the CPU."""


def _allowed_aten(found: torch._ops.OpOverload, short: str) -> bool:
    tags = set(found.tags)
    listed = torch.Tag.core in tags or torch.Tag.view_copy in tags or short in _KEPT_WHOLE_BY_ARM
    return listed and not found._schema.is_mutable and not any(t in tags for t in _SIDE_EFFECT_TAGS)


@cache
def host_operator(name: str):
    """The callable a stored node target names: "getitem", "delegate", or `namespace.op.overload`
    of an allowed operator. RefusedOperator for anything else."""
    if name == "getitem":
        return operator.getitem
    if name == "delegate":
        return DELEGATE_CALL
    match = _NAME.fullmatch(name)
    if match is None or "__" in name:
        raise RefusedOperator(f"'{name[:80]}' is not an operator name")
    namespace, op, overload = match.groups()
    short = f"{op}.{overload}"
    if namespace == "quantized_decomposed":
        if short not in _QUANTIZE_OPS:
            raise RefusedOperator(f"'{name}' is not an operator etk puts on the CPU")
        from torch.ao.quantization.fx import _decomposed  # noqa: F401  registers them
    try:
        found = getattr(getattr(getattr(torch.ops, namespace), op, None), overload, None)
    except RuntimeError:  # torch's lookup of an unknown operator
        found = None
    if (
        not isinstance(found, torch._ops.OpOverload)
        or found._schema.name != f"{namespace}::{op}"
        or found._overloadname != overload
    ):
        raise RefusedOperator(f"'{name}' is not a registered operator")
    if namespace == "aten" and not _allowed_aten(found, short):
        raise RefusedOperator(f"'{name}' is not an operator etk puts on the CPU")
    return found
