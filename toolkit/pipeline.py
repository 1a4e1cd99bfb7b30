"""One job: model -> variants compiled -> host reference -> (optionally) a run on a target -> report.

The CLI verbs (compile, compare, deploy) and the benchmark suites all run jobs through here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .artifacts import LoadedModel, Program, Variant
from .compare.eval_data import LabelledData, load_labelled
from .compare.evaluate import (
    EVAL_SEED_OFFSET,
    Evaluation,
    evaluate,
    evaluation_inputs,
    float_outputs,
    ones_inputs,
    save_arrays,
)
from .compare.metrics import exact_match_rate, max_abs_err_lsb
from .compare.task_eval import (
    TaskAccuracy,
    evaluation_runner,
    float_accuracy,
    program_accuracy,
    task_metric,
)
from .compare.variants import VariantComparison, compare_variants
from .errors import UserError
from .lower.compile import compile_variant
from .lower.compiled_tflite import load_compiled_program
from .lower.parallel import compile_variants
from .lower.staging import remove_stale_staging
from .lower.tflite import compile_tflite
from .lower.tflite_check import check_tflite
from .lower.vela import vela_version
from .lower.vela_options import check_vela_options
from .models.layout import channels_last_io
from .models.loader import file_hash, load_model
from .npu import NpuConfig
from .output_folder import locked_output_folder
from .quantize.calibration import calibration_subset, folder_calibration, random_calibration
from .report.json_report import (
    SCHEMA_VERSION,
    comparison_entry,
    cycles_entry,
    variant_entry,
    write_json_atomic,
)
from .report.layout_hint import layout_hint
from .rewrites import resolve_rewrites
from .runners.tosa_ref import TosaReferenceRunner
from .sim.vela_tflite import is_vela_compiled
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
    vela_config: Path | None = None  # a vendor's Vela ini (--vela-config)
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
    eval_data: Path | None = None  # x.npy + y.npy: task accuracy (top-1 or ROC AUC)
    seeds: int = 1  # calibrations (seeds, or subsets of calibration_dir) to evaluate each variant
    calibration_subset: int | None = None  # samples per seed's subset of calibration_dir
    parallel_variants: bool = False  # compile the two variants at once (lower/parallel.py)


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
class TaskResult:
    """Accuracy on labelled data (--eval-data): per variant one figure per calibration seed."""

    data: str
    metric: str  # "top1" or "auc"
    float_model: TaskAccuracy | None  # None for .tflite models
    variants: dict[str, tuple[TaskAccuracy, ...]]
    calibrations: tuple[str, ...]  # per seed
    reference_file: tuple[str, TaskAccuracy] | None = None  # the trained .tflite of zoo:X@mlperf


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
    task: TaskResult | None = None


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
                f"{target.source.name}): use a smaller input or a target with more SRAM"
            )


def _device_run(program: Program, runner, target: Target, reference: Evaluation) -> DeviceRun:
    ev = evaluate(program, runner, reference.inputs, reference.float_outputs, target)
    quant = program.output_quant[0]
    worst, matches = 0.0, []
    for ref_sample, dev_sample in zip(reference.outputs, ev.outputs):
        for r, d in zip(ref_sample, dev_sample):
            worst = max(
                worst, max_abs_err_lsb(r, d, quant.scale) if quant else float(np.max(np.abs(r - d)))
            )
            matches.append(exact_match_rate(r, d))
    return DeviceRun(ev, worst == 0.0, worst, float(np.mean(matches)))


def _tflite_variant(
    job: Job, npu: NpuConfig, target: Target, runner, progress: Callable[[str], None]
) -> tuple[LoadedModel, VariantResult]:
    """A .tflite file: Vela compiles it as it is; seeded int8 inputs; no reference to compare."""
    path = Path(job.model)
    if path.is_file():
        check_tflite(path)  # before anything parses it: a damaged file crashes Vela's reader
    if path.is_file() and is_vela_compiled(path):
        progress(f"loading {path.name} (compiled by Vela: runs as it is)")
        program = load_compiled_program(path, npu, Path(job.out_dir), job.npu is not None)
    else:
        progress(f"compiling {path.name} with Vela for {npu.accelerator}")
        program = compile_tflite(path, npu, Path(job.out_dir), job.extra_vela)
    check_fits(program, target)
    generator = np.random.default_rng(job.seed + EVAL_SEED_OFFSET)

    def sample(spec, quant):
        if quant is None:  # a float edge (QUANTIZE on the CPU)
            return generator.standard_normal(spec.shape).astype(spec.dtype)
        return generator.integers(quant.qmin, quant.qmax + 1, spec.shape, dtype=spec.dtype)

    inputs = tuple(
        tuple(sample(s, q) for s, q in zip(program.input_specs, program.input_quant))
        for _ in range(job.eval_samples)
    )
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


def _tflite_task(job: Job, program: Program, progress) -> TaskResult | None:
    if job.eval_data is None:
        return None
    shape = program.input_specs[0].shape
    data = load_labelled(job.eval_data, shape)
    metric = task_metric(shape, program.output_specs[0].shape)
    progress(f"evaluating {program.model_name} on {data.source}")
    acc = program_accuracy(program, evaluation_runner(program), data, shape, metric, "tflite")
    return TaskResult(data.source, metric, None, {"tflite": (acc,)}, ("none",))


def _reference_file(spec: str) -> Path | None:
    """The trained .tflite file behind zoo:NAME@mlperf."""
    from .models.zoo.trained import TRAINED_FILES, trained_file

    name = (
        spec[4:].removesuffix("@mlperf")
        if spec.startswith("zoo:") and spec.endswith("@mlperf")
        else ""
    )
    return trained_file(name) if name in TRAINED_FILES else None


def _calibrations(job: Job, model: LoadedModel):
    if job.seeds < 1:
        raise UserError(f"--seeds must be at least 1, got {job.seeds}")
    if job.seeds > 1 and job.eval_data is None:
        raise UserError("--seeds repeats calibration to measure accuracy: pass --eval-data DIR too")
    if job.calibration_dir is None:
        return [
            random_calibration(model.example_inputs, job.calibration_samples, job.seed + k)
            for k in range(job.seeds)
        ]
    full = folder_calibration(job.calibration_dir, model.example_inputs)
    if job.seeds == 1 and job.calibration_subset is None:
        return [full]
    size = job.calibration_subset or max(1, len(full.samples) // 2)
    return [calibration_subset(full, size, job.seed + k) for k in range(job.seeds)]


def run_job(
    job: Job, progress: Callable[[str], None] = lambda _: None, runner=None, runner_note: str = ""
) -> JobResult:
    """Run job with its output folder held: a second run into the same folder is refused."""
    with locked_output_folder(Path(job.out_dir)) as out_dir:
        remove_stale_staging(out_dir)
        return _run_job(job, progress, runner, runner_note)


def check_job(job: Job) -> None:
    """What can be checked before anything loads or compiles."""
    for name, value in (
        ("--eval-samples", job.eval_samples),
        ("--calibration-samples", job.calibration_samples),
    ):
        if value < 1:
            raise UserError(f"{name} must be at least 1, got {value}")


def _run_job(job: Job, progress: Callable[[str], None], runner, runner_note: str) -> JobResult:
    check_job(job)
    target = load_target(job.target)
    npu = target.npu(job.npu, job.system_config, job.memory_mode, job.vela_config)
    check_vela_options(npu, job.extra_vela)
    if job.model.endswith(".tflite"):
        model, variant = _tflite_variant(job, npu, target, runner, progress)
        npu = variant.program.npu  # a compiled file's own NPU
        result = JobResult(
            job,
            model,
            target,
            npu,
            "none (a quantized .tflite file)",
            {"tflite": variant},
            None,
            runner_note,
            Path(job.out_dir) / "report.json",
            _tflite_task(job, variant.program, progress),
        )
        write_json_atomic(result.report_path, report_dict(result))
        return result
    progress(f"loading {job.model}")
    model = load_model(job.model, job.input_shape)
    if job.io_layout == "nhwc":
        model = channels_last_io(model)
    rewrites = resolve_rewrites(job.rewrites)
    calibrations = _calibrations(job, model)
    calibration = calibrations[0]
    input_shape = tuple(model.example_inputs[0].shape)
    data = load_labelled(job.eval_data, input_shape) if job.eval_data else None
    if getattr(runner, "fixed_inputs", lambda _: None)(target) == "ones":
        job = replace(job, eval_samples=1)  # the firmware's own inputs: one all-ones sample
        inputs = ones_inputs(model)
    else:
        inputs = evaluation_inputs(model, job.eval_samples, job.seed)
    floats = float_outputs(model, inputs)
    out_dir = Path(job.out_dir)
    host = TosaReferenceRunner()
    results = {}
    progress(f"compiling {' and '.join(job.variants)} for {npu.accelerator}")
    programs = compile_variants(
        model,
        calibration,
        job.variants,
        npu,
        out_dir,
        job.extra_vela,
        rewrites,
        job.parallel_variants,
    )
    for variant in job.variants:
        program = programs[variant]
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
    comparison = (
        compare_variants(results["fused"].program, results["unfused"].program)
        if {"fused", "unfused"} <= set(results)
        else None
    )
    task = None
    if data is not None:
        task = _task(
            job,
            model,
            data,
            calibrations,
            {v: r.program for v, r in results.items()},
            npu,
            rewrites,
            progress,
        )
    result = JobResult(
        job,
        model,
        target,
        npu,
        calibration.source,
        results,
        comparison,
        runner_note,
        out_dir / "report.json",
        task,
    )
    write_json_atomic(result.report_path, report_dict(result))
    return result


def _task(
    job: Job,
    model: LoadedModel,
    data: LabelledData,
    calibrations,
    programs: dict[str, Program],
    npu: NpuConfig,
    rewrites,
    progress,
) -> TaskResult:
    """Each variant's accuracy on the labelled data, once per calibration (the first calibration's
    programs are the job's; the others compile into OUT/seeds/seed_K/)."""
    out_dir = Path(job.out_dir)
    shape = tuple(model.example_inputs[0].shape)
    with torch.no_grad():
        metric = task_metric(shape, tuple(model.module(*model.example_inputs).shape))
    progress(f"float model on {data.source}")
    floats = float_accuracy(model.module, data, shape, metric)
    variants: dict[str, tuple[TaskAccuracy, ...]] = {}
    for variant, first in programs.items():
        figures = []
        for k, calibration in enumerate(calibrations):
            program = (
                first
                if k == 0
                else compile_variant(
                    model,
                    calibration,
                    variant,
                    npu,
                    out_dir / "seeds" / f"seed_{job.seed + k}",
                    job.extra_vela,
                    rewrites,
                )
            )
            label = variant if len(calibrations) == 1 else f"{variant}, seed {job.seed + k}"
            progress(f"evaluating {label} on {data.source}")
            figures.append(
                program_accuracy(program, evaluation_runner(program), data, shape, metric, label)
            )
        variants[variant] = tuple(figures)
    reference = None
    path = _reference_file(job.model)
    if path is not None:
        progress(f"evaluating the reference file {path.name}")
        program = compile_tflite(path, npu, out_dir / "reference_file", job.extra_vela)
        reference = (
            path.name,
            program_accuracy(program, evaluation_runner(program), data, shape, metric, path.name),
        )
    return TaskResult(
        data.source, metric, floats, variants, tuple(c.source for c in calibrations), reference
    )


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


def report_dict(result: JobResult) -> dict[str, Any]:
    job = result.job
    variants = {}
    for name, vr in result.variants.items():
        entry = variant_entry(vr.program, vr.reference)
        if vr.device is not None:
            run = vr.device.evaluation.runs[0]
            cycles = cycles_entry(run)
            estimate = entry["estimate"]["total_cycles"]
            # the run's figure (measured or simulated) over Vela's estimate of the same program
            cycles["total_over_vela_estimate"] = (
                round(run.cycles.total_cycles / estimate, 4)
                if estimate and run.cycles.total_cycles
                else None
            )
            entry["run"] = {
                "runner": run.runner,
                "cycles": cycles,
                "outputs_match_reference": vr.device.outputs_match_reference,
                "max_diff_lsb": vr.device.max_diff_lsb,
                "exact_match_rate": vr.device.exact_match_rate,
                "details": {
                    k: v
                    for k, v in run.details.items()
                    if isinstance(v, (str, int, float, bool, list, dict))
                },
            }
        if result.task is not None and name in result.task.variants:
            entry.setdefault("accuracy", {}).update(task_entry(result.task, name))
        variants[name] = entry
    report: dict[str, Any] = {
        "schema": SCHEMA_VERSION,
        "model": job.model,
        "model_hash": result.model.content_hash,
        "target": result.target.name,
        "npu": result.npu.accelerator,
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
    return report


def io_layout_hint(result: JobResult) -> dict | None:
    """The --io-layout nhwc hint for models with a 4-D (image) input (report/layout_hint.py)."""
    if result.model.module is None:  # a .tflite file: its layout is fixed
        return None
    image = any(getattr(x, "dim", lambda: 0)() == 4 for x in result.model.example_inputs)
    return layout_hint(
        {n: v.program for n, v in result.variants.items()}, result.job.io_layout, image
    )
