"""Run the calibration samples through a prepared (observed) graph, observing constants once.

A weight's observer (torchao's MinMaxObserver / PerChannelMinMaxObserver on a get_attr node) sees
the same tensor on every sample, and min(min, x.min()) of the same x changes nothing after the
first: its state after one sample is its state after all of them. Upstream observes it again on
every sample (MobileNetV2 0.35: 53 weights x 8 samples, ~3 s). Here those observers pass their
input through after the first sample; activation observers (histograms) see every sample.
"""

from __future__ import annotations

from collections import Counter

import torch
from torchao.quantization.pt2e.observer import (
    MinMaxObserver,
    ObserverBase,
    PerChannelMinMaxObserver,
)

from ..errors import UserError
from ..graph_info import node_source

# observers for which a repeat of the same input leaves the state as it is (exact types: a
# moving average, for one, would move)
_IDEMPOTENT = (MinMaxObserver, PerChannelMinMaxObserver)


def constant_observers(prepared: torch.fx.GraphModule) -> list[torch.nn.Module]:
    """Observer modules fed by a constant (get_attr) at their one call site."""
    calls = Counter(n.target for n in prepared.graph.nodes if n.op == "call_module")
    found = []
    for node in prepared.graph.nodes:
        if node.op != "call_module" or calls[node.target] != 1:
            continue
        module = prepared.get_submodule(str(node.target))
        source = node.args[0] if node.args else None
        if (
            type(module) in _IDEMPOTENT
            and isinstance(source, torch.fx.Node)
            and source.op == "get_attr"
        ):
            found.append(module)
    return found


def _pass_through(x):
    return x


def calibrate(prepared: torch.fx.GraphModule, samples, source: str = "") -> None:
    """Run samples through prepared; UserError when a tensor an observer sees is not finite
    (a histogram of NaN would fail deep in torch), naming the operator and the sample."""
    constants = constant_observers(prepared)
    hooks = _finite_checks(prepared)
    index = 0
    try:
        with torch.no_grad():
            for index, sample in enumerate(samples):
                if index == 1:
                    for module in constants:
                        module.forward = _pass_through  # type: ignore[method-assign]
                prepared(*sample)
    except _NotFinite as exc:
        raise UserError(_not_finite_message(exc.node, exc.count, index, source)) from None
    finally:
        for module in constants:
            module.__dict__.pop("forward", None)
        for hook in hooks:
            hook.remove()


class _NotFinite(Exception):
    def __init__(self, node: torch.fx.Node, count: int):
        super().__init__(node.name)
        self.node, self.count = node, count


def _finite_checks(prepared: torch.fx.GraphModule) -> list:
    """A forward pre-hook on each activation observer: its input must be finite."""
    hooks = []
    for node in prepared.graph.nodes:
        source = node.args[0] if node.op == "call_module" and node.args else None
        if not isinstance(source, torch.fx.Node) or source.op == "get_attr":
            continue
        module = prepared.get_submodule(str(node.target))
        if not isinstance(module, ObserverBase):
            continue

        def check(_module, args, observed=source):
            x = args[0] if args else None
            if isinstance(x, torch.Tensor) and x.is_floating_point():
                bad = int(x.numel() - torch.isfinite(x).sum())
                if bad:
                    raise _NotFinite(observed, bad)

        hooks.append(module.register_forward_pre_hook(check))
    return hooks


def _not_finite_message(node: torch.fx.Node, count: int, index: int, source: str) -> str:
    what = (
        f"input {node.name}"
        if node.op == "placeholder"
        else f"{_op_name(node)} ({node_source(node)})"
    )
    return (
        f"calibration sample {index} ({source or 'calibration data'}) gives {count:,} NaN or "
        f"infinite values at {what}: its inputs lie outside the operator's domain (a log or "
        "square root of negatives, a division by zero); calibrate on inputs the model takes "
        "(--calibration-data DIR), or give example_inputs() values that span that range: "
        "random inputs follow an example of one sign"
    )


def _op_name(node: torch.fx.Node) -> str:
    parts = str(getattr(node.target, "__name__", node.target)).split(".")
    return parts[-2] if len(parts) >= 2 else parts[-1]
