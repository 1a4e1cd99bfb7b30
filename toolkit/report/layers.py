"""The per-layer record in report.json, and the short table of the costliest layers the terminal
and report.md show (docs/report-format.md#layers). The table is made from the record, so a
report.json alone is enough to show it again (`etk report OUT --html`)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from ..artifacts import FusionDecision, LayerSource
from ..evaluation.layer_advice import advise
from ..evaluation.layer_profile import LayerProfile, ProgramProfile

LAYERS_FORMAT = 1  # variants.<v>.layers.format: bumped when a key changes meaning or goes
TERMINAL_LAYERS = 5
CYCLE_SOURCES = {
    "simulated": "etk cycle model: each NPU operation's own cycles (the longest of its compute "
    "and its traffic), summed per layer",
    "estimate": "Vela's per-operation estimate (op cycles), summed per layer: an estimate",
}


def _layer_entry(profile: ProgramProfile, layer: LayerProfile) -> dict[str, Any]:
    utilisation = layer.mac_utilisation(profile.peak_macs)
    return {
        "layer": layer.source.describe(),
        "key": layer.key,
        **asdict(layer.source),
        "delegates": list(layer.delegates),
        "cycles": layer.cycles,
        "share": round(profile.share(layer), 4),
        "compute_cycles": layer.compute_cycles,
        "npu_ops": layer.npu_ops,
        "dma_ops": layer.dma_ops,
        "dma_cycles": layer.dma_cycles,
        "macs": layer.macs,
        "mac_utilisation": None if utilisation is None else round(utilisation, 4),
        "bound": layer.bound,
        "memory_bound_cycles": layer.memory_bound_cycles,
        "added": {
            kind: {"npu_ops": layer.added_ops[kind], "cycles": layer.added_cycles[kind]}
            for kind in layer.added_ops
        },
        "added_by": dict(layer.added_by),
        "operation_kinds": dict(layer.kinds),
        "traffic_bytes": {m: {"read": r, "write": w} for m, (r, w) in layer.traffic.items()},
        "vela_estimate_cycles": layer.vela_cycles,
        "shape": None if layer.shape is None else layer.shape._asdict(),
        "cpu_ops": list(layer.cpu_ops),
        "output_sqnr_db": layer.output_sqnr_db,
        "output_clipped": layer.output_clipped,
    }


def layers_entry(profile: ProgramProfile, io_layout: str, quant: str = "int8") -> dict[str, Any]:
    """report.json variants.<v>.layers."""
    kind = profile.kind or "none"
    measured = profile.measured
    return {
        "format": LAYERS_FORMAT,
        "cycles": {
            "kind": kind,
            "source": "; ".join(
                CYCLE_SOURCES[k] for k in kind.split(" and ") if k in CYCLE_SOURCES
            ),
            "total": profile.total_cycles,
            "pmu_total_prediction": profile.pmu_total,
            "attributed": round(profile.coverage, 4),
            "unattributed": profile.unattributed_cycles,
            "unattributed_npu_ops": profile.unattributed_ops,
            "dma": profile.dma_cycles,
        },
        "measured": None
        if measured is None
        else {
            "kind": measured.kind,
            "source": measured.source,
            "npu_cycles": measured.npu_cycles,
            "per": "delegate 0 (the program)" if profile.delegates == 1 else "program",
        },
        "peak_macs_per_cycle": profile.peak_macs,
        "missing": list(profile.missing),
        "layers": [_layer_entry(profile, layer) for layer in profile.layers],
        "advice": [asdict(item) for item in advise(profile, io_layout, quant)],
    }


def _decision_for(key: str, decisions: tuple[FusionDecision, ...]) -> FusionDecision | None:
    return next((d for d in decisions if d.parent_layer and d.parent_layer.key == key), None)


_NO_LAYER = LayerProfile(LayerSource("", "", "", ""))  # a layer a variant does not have


def _comparison_row(
    f: LayerProfile, u: LayerProfile, decision: FusionDecision | None
) -> dict[str, Any]:
    source = (f if f is not _NO_LAYER else u).source
    return {
        "layer": source.describe(),
        "key": source.key,
        "fused_cycles": f.cycles,
        "unfused_cycles": u.cycles,
        "delta_cycles": f.cycles - u.cycles,
        "fused_npu_ops": f.npu_ops,
        "unfused_npu_ops": u.npu_ops,
        "activation": decision.activation if decision else None,
        "activation_fused": decision.fused if decision else None,
        "fusion_reason": decision.reason if decision else None,
    }


def layer_comparison(
    fused: ProgramProfile, unfused: ProgramProfile, decisions: tuple[FusionDecision, ...]
) -> list[dict[str, Any]]:
    """report.json comparison.layers: each layer's cycles and NPU operations in both variants,
    with what fusion did to its activation."""
    by_key = {layer.key: layer for layer in fused.layers}
    others = {layer.key: layer for layer in unfused.layers}
    keys = list(by_key) + [k for k in others if k not in by_key]
    return [
        _comparison_row(
            by_key.get(key, _NO_LAYER), others.get(key, _NO_LAYER), _decision_for(key, decisions)
        )
        for key in keys
    ]


def add_layer_comparison(comparison: dict[str, Any], result) -> None:
    """comparison.layers of a job with both variants profiled (a JobResult)."""
    fused, unfused = result.variants.get("fused"), result.variants.get("unfused")
    if fused is None or unfused is None or fused.layers is None or unfused.layers is None:
        return
    comparison["layers"] = layer_comparison(fused.layers, unfused.layers, fused.program.decisions)


def layer_records(result) -> dict[str, Any]:
    """The per-layer part of a JobResult's report.json, for the terminal and report.md."""
    return {
        "variants": {
            name: {"layers": layers_entry(vr.layers, result.job.io_layout, result.job.quant)}
            for name, vr in result.variants.items()
            if vr.layers is not None
        }
    }


def _table_row(layer: dict[str, Any], others: dict[str, dict[str, int]]) -> list[str]:
    use = layer["mac_utilisation"]
    if layer["module"]:
        name = f"{layer['module']} ({layer['module_type']})"
    else:
        name = f"{layer['call']} ({layer['module_type']}.forward)"
    return [
        name,
        f"{layer['file']}:{layer['line']}" if layer["line"] else "?",
        f"{layer['cycles']:,}",
        f"{100 * layer['share']:.1f}%",
        *(f"{cycles.get(layer['key'], 0):,}" for cycles in others.values()),
        f"{layer['npu_ops']:,}",
        "-" if use is None else f"{100 * use:.0f}%",
        layer["bound"],
    ]


def top_layer_rows(report: dict[str, Any], count: int | None = TERMINAL_LAYERS):
    """(title, header, rows) of the costliest layers of the report's first variant (`count` of
    them; None: all), with the other variant's cycles beside them; None when the report has no
    per-layer record."""
    variants = report.get("variants", {})
    records = {name: v["layers"] for name, v in variants.items() if v.get("layers")}
    if not records:
        return None
    first, record = next(iter(records.items()))
    others = {
        name: {layer["key"]: layer["cycles"] for layer in other["layers"]}
        for name, other in records.items()
        if name != first
    }
    ranked = sorted((x for x in record["layers"] if x["cycles"]), key=lambda x: -x["cycles"])
    header = ["layer", "source", f"{first} cycles", "share", *(f"{n} cycles" for n in others)]
    header += ["NPU ops", "MAC use", "bound"]
    rows = [_table_row(layer, others) for layer in ranked[:count]]
    cycles = record["cycles"]
    title = (
        f"costliest layers ({cycles['kind']} cycles; {100 * cycles['attributed']:.1f}% of "
        f"{cycles['total']:,} attributed to a module and source line)"
    )
    return title, header, rows


def advice_lines(report: dict[str, Any], terse: bool) -> list[str]:
    """The first variant's advice, one line each (the terminal: the costliest few)."""
    variants = [v for v in report.get("variants", {}).values() if v.get("layers")]
    if not variants:
        return []
    items = variants[0]["layers"]["advice"]
    if terse:  # the table above shows the costliest layers
        items = [item for item in items if item["kind"] != "cost"]
    shown = items[:3] if terse else items
    lines = [
        f"advice: {item['text']}" + (f" ({item['mlia']})" if item["mlia"] else "") for item in shown
    ]
    if len(shown) < len(items):
        lines.append(f"  ... {len(items) - len(shown)} more in report.md and report.html")
    return lines
