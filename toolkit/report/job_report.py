"""report.json of a job: the variants, their runs and accuracy, the comparison, the versions."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import numpy as np

from ..evaluation.cycle_check import cycle_check_entry, ratio
from ..evaluation.evaluate import EVAL_SEED_OFFSET, Evaluation
from ..evaluation.metrics import low_sqnr_warnings
from ..lower.vela import vela_version
from ..results import JobResult, RunnerRun, TaskResult, VariantResult
from ..rewrites import resolve_rewrites
from ..versions import tool_versions
from .json_report import (
    SCHEMA_VERSION,
    accuracy_entry,
    comparison_entry,
    cycles_entry,
    variant_entry,
)
from .layout_hint import layout_hint


def task_entry(task: TaskResult, variant: str) -> dict[str, Any]:
    """report.json variants.<v>.accuracy keys: top1 (or auc) = mean over the calibrations."""
    values = [a.value for a in task.variants[variant]]
    entry: dict[str, Any] = {
        task.metric: float(np.mean(values)),
        "eval_data": task.data,
        "eval_samples": task.variants[variant][0].samples,
        "eval_runner": task.variants[variant][0].runner,
    }
    if task.float_model is not None:
        entry[f"float_{task.metric}"] = task.float_model.value
    if len(values) > 1:
        entry.update(
            {
                f"{task.metric}_seeds": values,
                f"{task.metric}_std": float(np.std(values)),
                f"{task.metric}_min": min(values),
                f"{task.metric}_max": max(values),
            }
        )
    return entry


def scored(vr: VariantResult) -> Evaluation | None:
    """What a variant's accuracy figures are of: its run on the job's runner, else (compile,
    compare) the host reference run."""
    return vr.run.evaluation if vr.run is not None else vr.reference


def variant_warnings(name: str, vr: VariantResult) -> list[str]:
    """A variant's warnings: in the terminal and report.md as WARNING lines, in report.json
    under `warnings`."""
    lines = [problem.describe() for problem in vr.vela_problems]
    if vr.run is not None:
        self_check = vr.run.evaluation.runs[0].details.get("self_check", "")
        if self_check.startswith("delegate"):
            lines.append(self_check)
    if len(vr.program.delegates) > 1:
        lines.append(
            f"the model is split into {len(vr.program.delegates)} delegates; the CPU runs "
            "what lies between them."
        )
    evaluation = scored(vr)
    if evaluation is not None and evaluation.accuracy is not None:
        host = vr.reference.accuracy if vr.reference is not None else None
        lines.extend(low_sqnr_warnings(evaluation.accuracy, host))
    return [f"{name}: {line}" for line in lines]


def _run_entry(runner_run: RunnerRun, estimate: int | None) -> dict[str, Any]:
    run = runner_run.evaluation.runs[0]
    cycles = cycles_entry(run)
    # the run's figure (measured or simulated) over Vela's estimate of the same program
    if run.cycles.kind != "estimate":  # not the estimate over itself
        cycles["total_over_vela_estimate"] = ratio(run.cycles.total_cycles, estimate)
    if runner_run.cycle_check is not None:
        cycles["check"] = cycle_check_entry(runner_run.cycle_check)
    return {
        "runner": run.runner,
        "cycles": cycles,
        "outputs_match_reference": runner_run.outputs_match_reference,
        "max_diff_lsb": runner_run.max_diff_lsb,
        "exact_match_rate": runner_run.exact_match_rate,
        "not_checked": runner_run.not_checked,
        "details": {
            k: v
            for k, v in run.details.items()
            if isinstance(v, (str, int, float, bool, list, dict))
        },
    }


def report_dict(result: JobResult) -> dict[str, Any]:
    job = result.job
    variants = {}
    for name, vr in result.variants.items():
        entry = variant_entry(vr.program)
        evaluation = scored(vr)
        if evaluation is not None and evaluation.accuracy is not None:
            entry["accuracy"] = accuracy_entry(
                evaluation.accuracy,
                evaluation.runs[0].runner,
                "run" if vr.run is not None else "host reference",
            )
        if vr.run is not None:
            entry["run"] = _run_entry(vr.run, entry["estimate"]["total_cycles"])
        if vr.vela_problems:
            entry["vela_problems"] = [problem.to_dict() for problem in vr.vela_problems]
        if result.task is not None and name in result.task.variants:
            entry.setdefault("accuracy", {}).update(task_entry(result.task, name))
        variants[name] = entry
    report: dict[str, Any] = {
        "schema": SCHEMA_VERSION,
        "model": job.model,
        "model_hash": result.model.content_hash,
        "target": result.target.name,
        "npu": result.npu.accelerator,
        "quant": job.quant,
        "vela": {
            "version": vela_version(),
            "system_config": result.npu.system_config,
            "memory_mode": result.npu.memory_mode,
            "config": result.npu.config_ini,
            "flags": list(next(iter(result.variants.values())).program.vela_flags),
        },
        "versions": tool_versions(),
        "seeds": {"calibration": job.seed, "evaluation": job.seed + EVAL_SEED_OFFSET},
        "calibration": result.calibration_source,
        "io_layout": job.io_layout,
        "rewrites": list(resolve_rewrites(job.rewrites)),
        "evaluation_samples": job.eval_samples,
        "variants": variants,
        "warnings": [w for name, vr in result.variants.items() for w in variant_warnings(name, vr)],
    }
    hint = io_layout_hint(result)
    if hint is not None:
        report["io_layout_hint"] = hint
    if result.runner_note:
        report["runner"] = result.runner_note
    if result.comparison is not None:
        report["comparison"] = comparison_entry(result.comparison)
    if result.task is not None:
        task = result.task
        report["eval"] = {
            "data": task.data,
            "metric": task.metric,
            "seeds": job.seeds,
            "calibrations": list(task.calibrations),
            "float": task.float_model.value if task.float_model else None,
            "reference_file": (
                {
                    "file": task.reference_file[0],
                    task.metric: task.reference_file[1].value,
                    "runner": task.reference_file[1].runner,
                }
                if task.reference_file
                else None
            ),
        }
        if task.fused_loss is not None:
            report["eval"]["fused_below_unfused"] = {
                "by": round(task.fused_loss.by, 6),
                "why": task.fused_loss.why,
                "blocks": [
                    {**asdict(e), "fused_loss_db": round(e.fused_loss_db, 3)}
                    for e in task.fused_loss.blocks
                ],
            }
    return report


def io_layout_hint(result: JobResult) -> dict | None:
    """The --io-layout nhwc hint for models with a 4-D (image) input (report/layout_hint.py)."""
    if result.model.module is None:  # a .tflite file: its layout is fixed
        return None
    image = any(getattr(x, "dim", lambda: 0)() == 4 for x in result.model.example_inputs)
    return layout_hint(
        {n: v.program for n, v in result.variants.items()}, result.job.io_layout, image
    )
