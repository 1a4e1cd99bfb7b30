"""Fused vs unfused: what differs in what the NPU executes, and what only Vela's estimate says.

Both variants usually run the same NPU operations, differing only in zero points and clip bounds;
Vela 5.2 then estimates them alike. Vela 5.1's estimator did not: it charged a conv with no fused
activation operator a lookup-table activation cost, and a conv followed by an explicit CLAMP
nothing, so the fused variant showed more estimated cycles for the same work. The check stays:
an estimate that differs between variants whose NPU operations are the same is flagged as a
difference in the estimate alone.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from ..artifacts import LayerEstimate, Program

_FOLDED_OPERATORS = {"Clamp", "ReLU", "Relu", "Relu6", "ReLU6"}


@dataclass(frozen=True)
class LayerDelta:
    delegate: int
    name: str
    operator: str
    fused_cycles: int
    unfused_cycles: int


@dataclass(frozen=True)
class VariantComparison:
    same_npu_operations: bool
    estimate_delta_npu_cycles: int  # fused - unfused
    layer_deltas: tuple[LayerDelta, ...]  # layers whose estimate differs, same operation in both
    estimator_effect: bool  # estimates differ although the NPU executes the same operations
    # (Vela 5.1 on every fused conv; not seen with Vela 5.2)
    notes: tuple[str, ...]
    # register -> number of aligned NPU operations whose value differs (NPUs families.decodes)
    register_differences: dict[str, int] = field(default_factory=dict)


def _layers(program: Program) -> list[tuple[int, LayerEstimate]]:
    return [
        (d.index, layer)
        for d in program.delegates
        if d.estimate
        for layer in d.estimate.layers
        if layer.operator not in _FOLDED_OPERATORS
    ]


def register_differences(fused: Program, unfused: Program) -> dict[str, int]:
    """What the command streams of the two variants differ in, register by register."""
    # the simulator package is also the command-stream decoder: payloads and register diffs
    from ..sim.families import decodes

    if not decodes(fused.npu.accelerator) or len(fused.delegates) != len(unfused.delegates):
        return {}
    from ..sim.diff import diff_programs
    from ..sim.payload import load_payload

    counts: Counter[str] = Counter()
    for a, b in zip(fused.delegates, unfused.delegates):
        for op in diff_programs(load_payload(a.payload), load_payload(b.payload)):
            if op.a is None or op.b is None:
                counts["(operation in one variant only)"] += 1
            counts.update(name for name, _, _ in op.changed)
    return dict(sorted(counts.items()))


def _kinds_differing(fused: Program, unfused: Program) -> str:
    """The NPU_OP_* counts that differ (the same total can hide a CONV traded for a POOL)."""
    counts = [Counter[str](), Counter[str]()]
    for count, program in zip(counts, (fused, unfused)):
        for delegate in program.delegates:
            count.update(delegate.command_ops)
    kinds = sorted(k for k in set(counts[0]) | set(counts[1]) if counts[0][k] != counts[1][k])
    if not kinds:
        return ""
    shown = ", ".join(
        f"{k.removeprefix('NPU_OP_')} {counts[0][k]} vs {counts[1][k]}" for k in kinds
    )
    return f" ({shown})"


def _layer_deltas(fused: Program, unfused: Program) -> list[LayerDelta]:
    """Layers of the same operator whose estimated NPU cycles differ (when the layers pair up)."""
    fused_layers, unfused_layers = _layers(fused), _layers(unfused)
    if len(fused_layers) != len(unfused_layers):
        return []
    return [
        LayerDelta(index, f.name, f.operator, f.npu_cycles, u.npu_cycles)
        for (index, f), (_, u) in zip(fused_layers, unfused_layers)
        if f.operator == u.operator and f.npu_cycles != u.npu_cycles
    ]


def _comparison_notes(
    fused: Program, unfused: Program, same_ops: bool, delta: int, differences: dict[str, int]
) -> list[str]:
    notes = []
    if same_ops and delta != 0:
        notes.append(
            f"Both variants run the same {fused.npu_ops} NPU operations; the {delta:+,} estimated "
            "NPU cycles (fused - unfused) are a difference in Vela's estimate alone, not in "
            "speed (Vela 5.1 charged a conv without a fused activation operator a lookup-table "
            "activation cost; Vela 5.2 estimates both alike)."
        )
    elif not same_ops:
        notes.append(
            f"The variants differ in NPU operations: fused {fused.npu_ops}, "
            f"unfused {unfused.npu_ops}{_kinds_differing(fused, unfused)}."
        )
    if len(fused.delegates) != len(unfused.delegates):
        notes.append(f"Delegates: fused {len(fused.delegates)}, unfused {len(unfused.delegates)}.")
    if differences:
        notes.append(
            "Command streams differ only in: "
            + ", ".join(f"{name} ({count} operations)" for name, count in differences.items())
        )
    return notes


def compare_variants(fused: Program, unfused: Program) -> VariantComparison:
    same_ops = fused.npu_ops == unfused.npu_ops and [d.command_ops for d in fused.delegates] == [
        d.command_ops for d in unfused.delegates
    ]
    fused_cycles = sum(d.estimate.npu_cycles for d in fused.delegates if d.estimate)
    unfused_cycles = sum(d.estimate.npu_cycles for d in unfused.delegates if d.estimate)
    delta = fused_cycles - unfused_cycles
    effect = same_ops and delta != 0
    differences = register_differences(fused, unfused)
    notes = _comparison_notes(fused, unfused, same_ops, delta, differences)
    deltas = _layer_deltas(fused, unfused)
    return VariantComparison(same_ops, delta, tuple(deltas), effect, tuple(notes), differences)
