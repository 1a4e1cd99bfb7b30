"""One job: model -> variants compiled -> host reference -> (optionally) a run on a target -> report.

The CLI verbs (compile, compare, deploy) and the benchmark suites all run jobs through here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .artifacts import LoadedModel, Program, Variant
from .compare.evaluate import (
    EVAL_SEED_OFFSET,
    Evaluation,
    evaluate,
    evaluation_inputs,
    float_outputs,
    save_arrays,
)
from .compare.metrics import exact_match_rate, max_abs_err_lsb
from .compare.variants import VariantComparison, compare_variants
from .errors import UserError
from .lower.compile import compile_variant
from .lower.staging import remove_stale_staging
from .lower.tflite import compile_tflite
from .lower.vela import vela_version
from .lower.vela_options import check_vela_options
from .models.layout import channels_last_io
from .models.loader import file_hash, load_model
from .npu import NpuConfig
from .output_folder import locked_output_folder
from .quantize.calibration import folder_calibration, random_calibration
from .report.json_report import (
    SCHEMA_VERSION,
    comparison_entry,
    cycles_entry,
    variant_entry,
    write_json_atomic,
)
from .rewrites import resolve_rewrites
from .runners.tosa_ref import TosaReferenceRunner
from .targets import Target, load_target
from .versions import tool_versions


@dataclass(frozen=True)
class Job:
    model: str
    target: str = "corstone-300"
    variants: tuple[Variant, ...] = ("fused", "unfused")
    npu: str | None = None
    system_config: str | None = None
    memory_mode: str | None = None
    input_shape: str | None = None
    calibration_samples: int = 8
    calibration_dir: Path | None = None
    seed: int = 0
    eval_samples: int = 8
    out_dir: Path = Path("etk-out")
    extra_vela: tuple[str, ...] = ()
    rewrites: str = "default"  # "default", "none" or comma-separated names (toolkit/rewrites)
    io_layout: str = "nchw"  # "nhwc": channels-last model interface (models/layout.py)
    runner: str | None = None  # None: host reference only (compile, compare)


@dataclass(frozen=True)
class DeviceRun:
    evaluation: Evaluation
    outputs_match_reference: bool | None  # None: there is no host reference (.tflite models)
    max_diff_lsb: float | None
    exact_match_rate: float | None


@dataclass(frozen=True)
class VariantResult:
    program: Program
    reference: Evaluation | None  # None for .tflite models: no float model, no TOSA graph
    device: DeviceRun | None = None


@dataclass(frozen=True)
class JobResult:
    job: Job
    model: LoadedModel
    target: Target
    npu: NpuConfig
    calibration_source: str
    variants: dict[str, VariantResult]
    comparison: VariantComparison | None
    runner_note: str = ""
    report_path: Path = field(default=Path())


def check_fits(program: Program, target: Target) -> None:
    """UserError before anything runs when the program needs more SRAM than the target has."""
    if target.sram_bytes is None:
        return
    for d in program.delegates:
        if d.estimate is not None and d.estimate.sram_used_bytes > target.sram_bytes:
            raise UserError(
                f"{program.variant} needs {d.estimate.sram_used_bytes:,} bytes of SRAM (Vela's "
                f"peak SRAM use, delegate {d.index}; arena {d.estimate.arena_bytes:,} bytes) but "
                f"{target.name} has {target.sram_bytes:,} (memory.sram_bytes in "
                f"{target.source.name}): use a smaller input or a target with more SRAM")


def _device_run(program: Program, runner, target: Target, reference: Evaluation) -> DeviceRun:
    ev = evaluate(program, runner, reference.inputs, reference.float_outputs, target)
    quant = program.output_quant[0]
    worst, matches = 0.0, []
    for ref_sample, dev_sample in zip(reference.outputs, ev.outputs):
        for r, d in zip(ref_sample, dev_sample):
            worst = max(worst, max_abs_err_lsb(r, d, quant.scale) if quant else
                        float(np.max(np.abs(r - d))))
            matches.append(exact_match_rate(r, d))
    return DeviceRun(ev, worst == 0.0, worst, float(np.mean(matches)))


def _tflite_variant(job: Job, npu: NpuConfig, target: Target, runner,
                    progress: Callable[[str], None]) -> tuple[LoadedModel, VariantResult]:
    """A .tflite file: Vela compiles it as it is; seeded int8 inputs; no reference to compare."""
    path = Path(job.model)
    progress(f"compiling {path.name} with Vela for {npu.accelerator}")
    program = compile_tflite(path, npu, Path(job.out_dir), job.extra_vela)
    check_fits(program, target)
    generator = np.random.default_rng(job.seed + EVAL_SEED_OFFSET)
    inputs = tuple(tuple(generator.integers(q.qmin, q.qmax + 1, s.shape, dtype=s.dtype)
                         for s, q in zip(program.input_specs, program.input_quant))
                   for _ in range(job.eval_samples))
    save_arrays(program.out_dir / "reference", "input", inputs)
    device = None
    if runner is not None:
        progress(f"running {path.name} on {runner.name}")
        runs = tuple(runner.run(program, list(sample), target) for sample in inputs)
        outputs = tuple(r.outputs for r in runs)
        save_arrays(program.out_dir / f"run_{runner.name}", "output", outputs)
        device = DeviceRun(Evaluation(inputs, (), outputs, runs, None), None, None, None)
    model = LoadedModel(job.model, path.stem, None, (), file_hash(path))
    return model, VariantResult(program, None, device)


def run_job(job: Job, progress: Callable[[str], None] = lambda _: None, runner=None,
            runner_note: str = "") -> JobResult:
    """Run job with its output folder held: a second run into the same folder is refused."""
    with locked_output_folder(Path(job.out_dir)) as out_dir:
        remove_stale_staging(out_dir)
        return _run_job(job, progress, runner, runner_note)


def check_job(job: Job) -> None:
    """What can be checked before anything loads or compiles."""
    for name, value in (("--eval-samples", job.eval_samples),
                        ("--calibration-samples", job.calibration_samples)):
        if value < 1:
            raise UserError(f"{name} must be at least 1, got {value}")


def _run_job(job: Job, progress: Callable[[str], None], runner, runner_note: str) -> JobResult:
    check_job(job)
    target = load_target(job.target)
    npu = target.npu(job.npu, job.system_config, job.memory_mode)
    check_vela_options(npu, job.extra_vela)
    if job.model.endswith(".tflite"):
        model, variant = _tflite_variant(job, npu, target, runner, progress)
        result = JobResult(job, model, target, npu, "none (a quantized .tflite file)",
                           {"tflite": variant}, None, runner_note, Path(job.out_dir) / "report.json")
        write_json_atomic(result.report_path, report_dict(result))
        return result
    progress(f"loading {job.model}")
    model = load_model(job.model, job.input_shape)
    if job.io_layout == "nhwc":
        model = channels_last_io(model)
    rewrites = resolve_rewrites(job.rewrites)
    calibration = (folder_calibration(job.calibration_dir, model.example_inputs)
                   if job.calibration_dir else
                   random_calibration(model.example_inputs, job.calibration_samples, job.seed))
    inputs = evaluation_inputs(model, job.eval_samples, job.seed)
    floats = float_outputs(model, inputs)
    out_dir = Path(job.out_dir)
    host = TosaReferenceRunner()
    results = {}
    for variant in job.variants:
        progress(f"compiling {variant} for {npu.accelerator}")
        program = compile_variant(model, calibration, variant, npu, out_dir, job.extra_vela,
                                  rewrites)
        check_fits(program, target)
        progress(f"host reference run of {variant}")
        reference = evaluate(program, host, inputs, floats)
        save_arrays(program.out_dir / "reference", "input", inputs)
        save_arrays(program.out_dir / "reference", "output", reference.outputs)
        save_arrays(program.out_dir / "reference", "float_output", floats)
        device = None
        if runner is not None:
            progress(f"running {variant} on {runner.name}")
            device = _device_run(program, runner, target, reference)
            save_arrays(program.out_dir / f"run_{runner.name}", "output", device.evaluation.outputs)
        results[variant] = VariantResult(program, reference, device)
    comparison = (compare_variants(results["fused"].program, results["unfused"].program)
                  if {"fused", "unfused"} <= set(results) else None)
    result = JobResult(job, model, target, npu, calibration.source, results, comparison,
                       runner_note, out_dir / "report.json")
    write_json_atomic(result.report_path, report_dict(result))
    return result


def report_dict(result: JobResult) -> dict[str, Any]:
    job = result.job
    variants = {}
    for name, vr in result.variants.items():
        entry = variant_entry(vr.program, vr.reference)
        if vr.device is not None:
            run = vr.device.evaluation.runs[0]
            entry["run"] = {"runner": run.runner, "cycles": cycles_entry(run),
                            "outputs_match_reference": vr.device.outputs_match_reference,
                            "max_diff_lsb": vr.device.max_diff_lsb,
                            "exact_match_rate": vr.device.exact_match_rate,
                            "details": {k: v for k, v in run.details.items()
                                        if isinstance(v, (str, int, float, bool, list, dict))}}
        variants[name] = entry
    report: dict[str, Any] = {
        "schema": SCHEMA_VERSION,
        "model": job.model,
        "model_hash": result.model.content_hash,
        "target": result.target.name,
        "npu": result.npu.accelerator,
        "vela": {"version": vela_version(), "system_config": result.npu.system_config,
                 "memory_mode": result.npu.memory_mode,
                 "flags": list(next(iter(result.variants.values())).program.vela_flags)},
        "versions": tool_versions(),
        "seeds": {"calibration": job.seed, "evaluation": job.seed + EVAL_SEED_OFFSET},
        "calibration": result.calibration_source,
        "io_layout": job.io_layout,
        "rewrites": list(resolve_rewrites(job.rewrites)),
        "evaluation_samples": job.eval_samples,
        "variants": variants,
    }
    if result.runner_note:
        report["runner"] = result.runner_note
    if result.comparison is not None:
        report["comparison"] = comparison_entry(result.comparison)
    return report
