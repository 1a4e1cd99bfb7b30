"""report.json: the versioned interface scripts and CI read. Schema documented in docs/report-format.md."""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..artifacts import Program, RunResult
from ..atomic_write import write_atomic
from ..evaluation.metrics import Accuracy, OutputAccuracy
from ..evaluation.variants import VariantComparison

SCHEMA_VERSION = (
    2  # 2: estimate.sram_bytes (it was traffic) -> sram_used_bytes, arena_bytes, sram_traffic_bytes
)


def _finite(value: float | None):
    if value is None:
        return None
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return None if math.isnan(value) else round(float(value), 4)


def cycles_entry(run: RunResult) -> dict[str, Any]:
    c = run.cycles
    return {
        "kind": c.kind,
        "source": c.source,
        "npu_cycles": c.npu_cycles,
        "total_cycles": c.total_cycles,
        "cpu_cycles": c.cpu_cycles,
        "note": c.note,
        "beats": c.beats,
        **({"not_checked": "simulated, not checked against an FVP"} if c.unchecked else {}),
    }


def estimate_entry(program: Program) -> dict[str, Any]:
    """Vela's estimate of the program, summed over its delegates, and its layers."""
    estimates = [d.estimate for d in program.delegates if d.estimate]
    return {
        "kind": "estimate",
        "source": "Vela",
        "npu_cycles": sum(e.npu_cycles for e in estimates),
        "total_cycles": sum(e.total_cycles for e in estimates),
        # delegates run one at a time: the largest is the program's peak
        "sram_used_bytes": max((e.sram_used_bytes for e in estimates), default=0),
        "arena_bytes": max((e.arena_bytes for e in estimates), default=0),
        "sram_traffic_bytes": sum(e.sram_traffic_bytes for e in estimates),
        "off_chip_flash_bytes": sum(e.off_chip_flash_bytes for e in estimates),
        "macs": sum(e.macs for e in estimates),
        "layers": [
            dict(asdict(layer), delegate=d.index)
            for d in program.delegates
            if d.estimate
            for layer in d.estimate.layers
        ],
    }


def variant_entry(program: Program) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "delegates": len(program.delegates),
        "cpu_ops": [asdict(op) for op in program.cpu_ops],
        "tosa_ops": program.tosa_ops,
        "npu_ops": program.npu_ops,
        "command_stream_ops": [d.command_ops for d in program.delegates],
        "estimate": estimate_entry(program),
        "fusion": [asdict(d) for d in program.decisions],
        "rewrites": [asdict(r) for r in program.rewrites],
        "io": {
            "inputs": [asdict(q) if q else None for q in program.input_quant],
            "outputs": [asdict(q) if q else None for q in program.output_quant],
        },
        "files": {
            "pte": str(program.pte_path),
            "tosa": [str(d.tosa_path) for d in program.delegates],
            "vela": [str(d.vela_npz_path) for d in program.delegates],
        },
        "timings_s": {k: round(v, 3) for k, v in program.timings.items()},
    }
    return entry


def accuracy_entry(acc: Accuracy, runner: str, outputs_of: str) -> dict[str, Any]:
    """The headline keys are the worst output's (lowest SQNR); outputs_of: "run" (the outputs of
    the runner that ran) or "host reference" (no runner ran)."""
    worst = acc.worst
    return {
        "samples": acc.samples,
        "sqnr_db": _finite(worst.sqnr_db),
        "cosine": _finite(worst.cosine),
        "max_abs_err_lsb": _finite(worst.max_abs_err_lsb),
        "top1_agreement": _finite(worst.top1_agreement),
        "against": "float model",
        "runner": runner,
        "outputs_of": outputs_of,
        "worst_output": worst.index,
        "outputs": [_output_entry(o) for o in acc.outputs],
        "inputs_clipped": (
            None
            if acc.inputs is None
            else {"values": acc.inputs.values, "clipped": acc.inputs.clipped}
        ),
    }


def _output_entry(out: OutputAccuracy) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "index": out.index,
        "shape": list(out.shape),
        "sqnr_db": _finite(out.sqnr_db),
        "cosine": _finite(out.cosine),
        "max_abs_err_lsb": _finite(out.max_abs_err_lsb),
        "clipped": out.clipped,
        "clipped_error_share": _finite(out.clipped_error_share),
        "nonfinite_float_values": out.nonfinite_float,
    }
    if out.top1_agreement is not None:  # classifier logits only
        entry["top1_agreement"] = _finite(out.top1_agreement)
    return entry


def comparison_entry(comparison: VariantComparison) -> dict[str, Any]:
    return {
        "same_npu_operations": comparison.same_npu_operations,
        "estimate_delta_npu_cycles": comparison.estimate_delta_npu_cycles,
        "estimator_effect": comparison.estimator_effect,
        "layer_deltas": [asdict(d) for d in comparison.layer_deltas],
        "register_differences": comparison.register_differences,
        "notes": list(comparison.notes),
    }


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    write_atomic(path, json.dumps(data, indent=2, default=str) + "\n")
