"""Which conv/linear + activation block's quantization costs accuracy: fused against unfused.

When fused scores below unfused on labelled data, the task figure alone does not say why. Here
both variants' quantized graphs (the fake-quantized torch graphs that convert_pt2e makes, before
lowering) and the float graph run on the same samples; at each block's output (the activation's
quantize/dequantize) the error against the float activation gives an SQNR per variant. The block
where fused loses most against unfused, with both quantization steps (the range / 255), is what
the report names. These graphs model the quantization, not the NPU's integer arithmetic: the
figures explain ranges, the task metric itself comes from the program that ran.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch.fx import GraphModule, Interpreter, Node

from ..artifacts import CalibrationSet, LoadedModel, Quant
from ..graph_info import node_source
from ..npu import NpuConfig
from ..quantize.activations import canonicalize_activations, describe_activation
from ..quantize.decisions import ACTIVATIONS, DEQUANTIZE, QUANTIZE
from ..quantize.quantizer import export_module, quantize
from ..quantize.same_padding import explicit_same_padding
from ..rewrites import apply_rewrites


@dataclass(frozen=True)
class BlockError:
    """One block's output error against the float model, per variant."""

    source: str  # the activation's module path and file:line
    activation: str
    fused_step: float  # the block output's quantization scale
    unfused_step: float
    fused_sqnr_db: float
    unfused_sqnr_db: float

    @property
    def fused_loss_db(self) -> float:
        return self.unfused_sqnr_db - self.fused_sqnr_db


class _Capture(Interpreter):
    def __init__(self, graph: GraphModule, names: set[str]):
        super().__init__(graph)
        self.names = names
        self.values: dict[str, np.ndarray] = {}

    def run_node(self, n: Node):
        result = super().run_node(n)
        if n.name in self.names:
            self.values[n.name] = result.detach().numpy().astype(np.float64).copy()
        return result


def _block_output(graph: GraphModule, activation: str) -> tuple[str, float] | None:
    """The dequantize after the activation's output quantize, and its scale."""
    nodes = {n.name: n for n in graph.graph.nodes}
    act = nodes.get(activation)
    if act is None:
        return None
    for q in act.users:
        if q.target in QUANTIZE:
            for dq in q.users:
                if dq.target in DEQUANTIZE:
                    return dq.name, float(q.args[1])
    return None


def _run(graph: GraphModule, names: set[str], samples) -> dict[str, list[np.ndarray]]:
    captured: dict[str, list[np.ndarray]] = {name: [] for name in names}
    with torch.no_grad():
        for sample in samples:
            capture = _Capture(graph, names)
            capture.run(*sample)
            for name in names:
                captured[name].append(capture.values[name])
    return captured


def _sqnr_db(reference: list[np.ndarray], values: list[np.ndarray]) -> float:
    signal = sum(float(np.sum(r**2)) for r in reference)
    noise = sum(float(np.sum((v - r) ** 2)) for r, v in zip(reference, values))
    return float("inf") if noise == 0 else float(10 * np.log10(max(signal, 1e-30) / noise))


def block_errors(
    model: LoadedModel,
    calibration: CalibrationSet,
    npu: NpuConfig,
    rewrites: tuple[str, ...],
    samples: tuple[tuple[torch.Tensor, ...], ...],
    quant: Quant = "int8",
) -> tuple[BlockError, ...]:
    """Per fused block, in graph order: both variants' output SQNR against float on samples."""
    floating = export_module(model)
    canonicalize_activations(floating)
    explicit_same_padding(floating)
    apply_rewrites(floating, rewrites)
    fused = quantize(model, calibration, "fused", npu, rewrites=rewrites, quant=quant)
    unfused = quantize(model, calibration, "unfused", npu, rewrites=rewrites, quant=quant)
    blocks = {d.source for d in fused.decisions if d.fused}
    acts = [
        n
        for n in floating.graph.nodes
        if n.op == "call_function" and n.target in ACTIVATIONS and node_source(n) in blocks
    ]
    found = []
    for act in acts:
        f = _block_output(fused.graph_module, act.name)
        u = _block_output(unfused.graph_module, act.name)
        if f is not None and u is not None:
            found.append((act, f, u))
    reference = _run(floating, {a.name for a, _, _ in found}, samples)
    fused_values = _run(fused.graph_module, {f[0] for _, f, _ in found}, samples)
    unfused_values = _run(unfused.graph_module, {u[0] for _, _, u in found}, samples)
    return tuple(
        BlockError(
            node_source(act),
            describe_activation(act),
            f_scale,
            u_scale,
            _sqnr_db(reference[act.name], fused_values[f_name]),
            _sqnr_db(reference[act.name], unfused_values[u_name]),
        )
        for act, (f_name, f_scale), (u_name, u_scale) in found
    )


def worst_block(errors: tuple[BlockError, ...]) -> BlockError | None:
    """The block where fused loses most SQNR against unfused (None: fused is nowhere worse)."""
    worse = [e for e in errors if e.fused_loss_db > 0]
    return max(worse, key=lambda e: e.fused_loss_db) if worse else None


def explain_fused_loss(errors: tuple[BlockError, ...]) -> str:
    """Why fused can score below unfused, in one sentence from the per-block errors."""
    worst = worst_block(errors)
    if worst is not None:
        return (
            f"largest fused loss at {worst.source}: output SQNR {worst.fused_sqnr_db:.1f} dB "
            f"fused vs {worst.unfused_sqnr_db:.1f} dB unfused (step {worst.fused_step:.4g} vs "
            f"{worst.unfused_step:.4g})"
        )
    if not errors:
        return "the model has no fused block to compare"
    gains = [-e.fused_loss_db for e in errors]
    return (
        f"no block's range is worse fused: each of the {len(errors)} block outputs is "
        f"{min(gains):.1f}..{max(gains):.1f} dB closer to float fused, so the difference arises "
        "after them (the last layers' rounding deciding close calls)"
    )
