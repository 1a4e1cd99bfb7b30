"""A measured cycle figure next to etk's prediction and Vela's estimate for the same program.

The FVP's and a board's PMU report the NPU's cycle counter (NPU TOTAL: active and idle) and AXI
beat counters per inference. etk's cycle model predicts exactly those from the command stream
(sim/families/ethos_u55/timeline.py); Vela estimates total cycles. A run that measured them gets both beside it,
with measured/predicted and measured/estimate ratios, so a user sees how far each can be trusted
on their model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..artifacts import CycleFigures, Program


@dataclass(frozen=True)
class CyclePrediction:
    """etk's cycle model on the program's command streams (summed over its delegates)."""

    total_cycles: int | None  # predicts the PMU's NPU TOTAL
    beats: dict[str, int] | None  # predicts axi0_read, axi0_write, axi1_read
    note: str  # why there is no prediction, or where it came from


@dataclass(frozen=True)
class CycleCheck:
    measured_total: int | None  # the PMU's NPU cycle counter per inference
    measured_beats: dict[str, int]
    prediction: CyclePrediction
    vela_estimate: int | None  # Vela's total cycles estimate of the same program


def predict_program(program: Program) -> CyclePrediction:
    """Predict the PMU figures of one inference of program; no data runs (the model depends on
    the command stream only)."""
    from ..sim import SimError, load_payload, predict_pmu_counts

    npu = program.npu
    total, beats = 0, {"axi0_read": 0, "axi0_write": 0, "axi1_read": 0}
    try:
        for delegate in program.delegates:
            stream = load_payload(delegate.payload or delegate.vela_npz_path)
            pmu = predict_pmu_counts(
                stream, npu.accelerator, npu.system_config, npu.memory_mode, npu.config_ini
            )
            total += pmu.total
            for key, value in pmu.beats.items():
                beats[key] += value
    except SimError as exc:
        return CyclePrediction(None, None, f"no prediction: {exc}")
    return CyclePrediction(
        total, beats, f"etk cycle model for {npu.accelerator} ({npu.system_config})"
    )


def check_cycles(program: Program, measured: CycleFigures) -> CycleCheck | None:
    """None unless the run measured the NPU's cycle counter."""
    if measured.kind != "measured" or measured.npu_cycles is None:
        return None
    return CycleCheck(
        measured.npu_cycles,
        dict(measured.beats or {}),
        predict_program(program),
        program.estimated_total_cycles or None,
    )


def ratio(measured: int | None, other: int | None) -> float | None:
    return round(measured / other, 4) if measured and other else None


def cycle_check_entry(check: CycleCheck) -> dict[str, Any]:
    """report.json run.cycles.check: the three figures side by side, with their ratios."""
    predicted = check.prediction
    return {
        "measured_npu_total": check.measured_total,
        "predicted_npu_total": predicted.total_cycles,
        "vela_estimate_total": check.vela_estimate,
        "measured_over_predicted": ratio(check.measured_total, predicted.total_cycles),
        "measured_over_vela_estimate": ratio(check.measured_total, check.vela_estimate),
        "beats": {
            key: {
                "measured": check.measured_beats.get(key),
                "predicted": value,
                "measured_over_predicted": ratio(check.measured_beats.get(key), value),
            }
            for key, value in (predicted.beats or {}).items()
        },
        "prediction": predicted.note,
    }


def cycle_check_lines(check: CycleCheck) -> list[str]:
    """The same, for a terminal: one line for NPU TOTAL, one per beat counter measured."""
    entry = cycle_check_entry(check)

    def times(value: float | None) -> str:
        return f"x{value:.3f}" if value is not None else "n/a"

    predicted = entry["predicted_npu_total"]
    estimate = entry["vela_estimate_total"]
    lines = [
        f"NPU TOTAL measured {check.measured_total:,}; etk prediction "
        + (f"{predicted:,} ({times(entry['measured_over_predicted'])})" if predicted else "n/a")
        + "; Vela estimate "
        + (f"{estimate:,} ({times(entry['measured_over_vela_estimate'])})" if estimate else "n/a")
    ]
    for key, beat in entry["beats"].items():
        if beat["measured"] is not None:
            lines.append(
                f"{key} beats measured {beat['measured']:,}; etk prediction "
                f"{beat['predicted']:,} ({times(beat['measured_over_predicted'])})"
            )
    if predicted is None:
        lines.append(check.prediction.note)
    return lines
