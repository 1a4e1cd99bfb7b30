"""One job: model -> variants compiled -> host reference -> (optionally) a run on a target -> report.

The CLI verbs (compile, compare, deploy) and the benchmark suites all run jobs through here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from .artifacts import CalibrationSet, LoadedModel, Program, Variant
from .console_capture import COMPILER_SIDE, quiet_torch_import
from .errors import UserError
from .evaluation.cycle_check import check_cycles
from .evaluation.eval_data import LabelledData, load_labelled, sample_shape
from .evaluation.evaluate import (
    EVAL_SEED_OFFSET,
    Evaluation,
    EvaluationInputs,
    evaluate,
    evaluate_on_host,
    evaluation_inputs,
    float_outputs,
    ones_inputs,
    save_arrays,
)
from .evaluation.layer_profile import profile_program
from .evaluation.metrics import exact_match_rate, max_abs_err_lsb
from .evaluation.task_eval import (
    TaskAccuracy,
    data_windows,
    evaluation_runner,
    float_accuracy,
    program_accuracy,
    task_metric,
)
from .evaluation.variants import VariantComparison, compare_variants
from .job import MAX_SAMPLES, MAX_SEED, MAX_SEEDS, Job, check_range
from .lower.build_variant import compile_variant
from .lower.compiled_tflite import load_compiled_program
from .lower.parallel import compile_variants
from .lower.staging import remove_stale_staging
from .lower.tflite import compile_tflite
from .lower.tflite_check import check_tflite
from .lower.vela_check import program_problems
from .lower.vela_options import check_vela_options
from .models.layout import channels_last_io
from .models.loader import file_hash, load_model
from .npu import NpuConfig
from .output_folder import locked_output_folder
from .quantize.calibration import calibration_subset, folder_calibration, random_calibration
from .report.write import write_reports
from .resolve import is_tflite
from .resolved_job import ResolvedJob, resolve_job
from .results import FusedLoss, JobResult, RunnerRun, TaskResult, VariantResult
from .rewrites import resolve_rewrites
from .runners.base import Runner
from .runners.tosa_ref import NOT_CHECKED, TosaReferenceRunner

# the simulator package is also the command-stream decoder (here: Vela-compiled .tflite files)
from .sim.vela_tflite import is_vela_compiled
from .targets import Target

BLOCK_ERROR_SAMPLES = 64  # eval samples the per-block errors run on (fake-quantized graphs)


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


def _runner_run(
    program: Program, runner: Runner, target: Target, reference: Evaluation
) -> RunnerRun:
    ev = evaluate(
        program, runner, reference.inputs, reference.float_outputs, target, reference.outputs
    )
    if runner.name == TosaReferenceRunner.name:  # the host reference ran again: no check
        return RunnerRun(ev, None, None, None, None, not_checked=NOT_CHECKED)
    worst, matches = 0.0, []
    ref_outputs = reference.outputs if ev.kept is None else [reference.outputs[k] for k in ev.kept]
    for ref_sample, dev_sample in zip(ref_outputs, ev.outputs):
        for r, d, quant in zip(ref_sample, dev_sample, program.output_quant):
            worst = max(
                worst, max_abs_err_lsb(r, d, quant.scale) if quant else float(np.max(np.abs(r - d)))
            )
            matches.append(exact_match_rate(r, d))
    check = check_cycles(program, ev.runs[0].cycles)
    return RunnerRun(ev, worst == 0.0, worst, float(np.mean(matches)), check)


def _tflite_variant(
    job: Job,
    npu: NpuConfig,
    target: Target,
    runner: Runner | None,
    progress: Callable[[str], None],
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
    run = None
    if runner is not None:
        progress(f"running {path.name} on {runner.name}")
        runs = tuple(runner.run(program, list(sample), target) for sample in inputs)
        outputs = tuple(r.outputs for r in runs)
        save_arrays(program.out_dir / f"run_{runner.name}", "output", outputs)
        check = check_cycles(program, runs[0].cycles)
        run = RunnerRun(Evaluation(inputs, (), outputs, runs, None), None, None, None, check)
    model = LoadedModel(job.model, path.stem, None, (), file_hash(path))
    return model, VariantResult(program, None, run)


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


def _calibrations(
    job: Job, model: LoadedModel
) -> tuple[list[CalibrationSet], CalibrationSet | None]:
    """The calibration set of each seed, and the user's whole calibration data (None: random)."""
    if job.seeds > 1 and job.eval_data is None:
        raise UserError("--seeds repeats calibration to measure accuracy: pass --eval-data DIR too")
    if job.calibration_dir is None:
        return [
            random_calibration(model.example_inputs, job.calibration_samples, job.seed + k)
            for k in range(job.seeds)
        ], None
    full = folder_calibration(job.calibration_dir, model.example_inputs)
    if job.seeds == 1 and job.calibration_subset is None:
        return [full], full
    size = job.calibration_subset or max(1, len(full.samples) // 2)
    return [calibration_subset(full, size, job.seed + k) for k in range(job.seeds)], full


def run_job(
    job: Job,
    progress: Callable[[str], None] = lambda _: None,
    runner: Runner | None = None,
    runner_note: str = "",
    model: LoadedModel | None = None,
) -> JobResult:
    """Run job (on runner, when given) with its output folder held: a second run into the same
    folder is refused. model: a module the caller loaded (the Python API's nn.Module); else
    job.model is loaded. A caller that resolved the job already calls run_resolved."""
    check_job(job)
    return run_resolved(resolve_job(job, runner, runner_note), progress, model)


def run_resolved(
    resolved: ResolvedJob,
    progress: Callable[[str], None] = lambda _: None,
    model: LoadedModel | None = None,
) -> JobResult:
    """run_job of a resolved job; the reports (report.json, report.md) written once at the end."""
    with locked_output_folder(Path(resolved.job.out_dir)) as out_dir:
        remove_stale_staging(out_dir)
        result = _run(resolved, progress, model)
        write_reports(result)
    return result


def check_job(job: Job) -> None:
    """What can be checked before anything loads or compiles."""
    for name, value, low, high in (
        ("--eval-samples", job.eval_samples, 1, MAX_SAMPLES),
        ("--calibration-samples", job.calibration_samples, 1, MAX_SAMPLES),
        ("--seed", job.seed, 0, MAX_SEED),
        ("--seeds", job.seeds, 1, MAX_SEEDS),
    ):
        check_range(name, value, low, high)
    if job.quant != "int8" and is_tflite(job.model):
        raise UserError(
            f"--quant {job.quant} quantizes a PyTorch model: a .tflite file runs as it is (int8)"
        )


def _run(
    resolved: ResolvedJob, progress: Callable[[str], None], loaded: LoadedModel | None
) -> JobResult:
    job = resolved.job
    check_job(job)
    check_vela_options(resolved.npu, job.extra_vela)
    if loaded is None and is_tflite(job.model):
        return _tflite_job(resolved, progress)
    if loaded is None:
        progress(f"loading {job.model}")
    model = load_model(job.model, job.input_shape) if loaded is None else loaded
    if job.io_layout == "nhwc":
        model = channels_last_io(model)
    return _model_job(resolved, model, progress)


def _model_job(
    resolved: ResolvedJob, model: LoadedModel, progress: Callable[[str], None]
) -> JobResult:
    """A PyTorch model's job: each variant compiled, run on the host reference and the runner;
    task accuracy with labelled data."""
    job, npu = resolved.job, resolved.npu
    rewrites = resolve_rewrites(job.rewrites)
    calibrations, user_data = _calibrations(job, model)
    input_shape = tuple(model.example_inputs[0].shape)
    data = load_labelled(job.eval_data, input_shape) if job.eval_data else None
    fed = _fed_inputs(resolved, model, user_data)
    job = replace(job, eval_samples=len(fed.samples))
    progress(f"compiling {' and '.join(job.variants)} for {npu.accelerator}")
    programs = compile_variants(
        model,
        calibrations[0],
        job.variants,
        npu,
        Path(job.out_dir),
        job.extra_vela,
        rewrites,
        job.parallel_variants,
        job.quant,
    )
    floats = float_outputs(model, fed.samples)
    variants: dict[str, VariantResult] = {
        variant: _checked_variant(resolved, programs[variant], fed.samples, floats, progress)
        for variant in job.variants
    }
    task = None
    if data is not None:
        chosen = {v: programs[v] for v in job.variants}
        task = _task(job, model, data, calibrations, chosen, npu, rewrites, progress)
    return JobResult(
        job=job,
        model=model,
        target=resolved.target,
        npu=npu,
        calibration_source=calibrations[0].source,
        variants=variants,
        comparison=_comparison(variants),
        runner_note=resolved.runner_note,
        report_path=Path(job.out_dir) / "report.json",
        task=task,
        evaluation_inputs=fed.source,
    )


def _comparison(variants: dict[str, VariantResult]) -> VariantComparison | None:
    if not {"fused", "unfused"} <= set(variants):
        return None
    return compare_variants(variants["fused"].program, variants["unfused"].program)


def _checked_variant(
    resolved: ResolvedJob, program: Program, inputs, floats, progress: Callable[[str], None]
) -> VariantResult:
    check_fits(program, resolved.target)
    return _variant_result(program, inputs, floats, resolved.runner, resolved.target, progress)


def _tflite_job(resolved: ResolvedJob, progress: Callable[[str], None]) -> JobResult:
    """A .tflite MODEL's job: its one variant, as Vela compiles the file."""
    job = resolved.job
    model, tflite = _tflite_variant(job, resolved.npu, resolved.target, resolved.runner, progress)
    return JobResult(
        job=job,
        model=model,
        target=resolved.target,
        npu=tflite.program.npu,  # a compiled file's own NPU
        calibration_source="none (a quantized .tflite file)",
        variants={"tflite": tflite},
        comparison=None,
        runner_note=resolved.runner_note,
        report_path=Path(job.out_dir) / "report.json",
        task=_tflite_task(job, tflite.program, progress),
        evaluation_inputs=f"random(seed={job.seed + EVAL_SEED_OFFSET}, "
        f"samples={job.eval_samples}): integer codes uniform over each input's range",
    )


def _fed_inputs(
    resolved: ResolvedJob, model: LoadedModel, user_data: CalibrationSet | None
) -> EvaluationInputs:
    """The evaluation inputs: the firmware's own all-ones sample where it feeds those, else
    drawn from the user's calibration data or like example_inputs()."""
    if resolved.fixed_inputs == "ones":
        return EvaluationInputs(ones_inputs(model), "1 all-ones sample (what the firmware feeds)")
    job = resolved.job
    return evaluation_inputs(model, job.eval_samples, job.seed, user_data)


def _variant_result(
    program: Program,
    inputs,
    floats,
    runner: Runner | None,
    target: Target,
    progress: Callable[[str], None],
) -> VariantResult:
    """A compiled variant's host reference run and (with a runner) its run on the target; the
    arrays saved under OUT/VARIANT/reference and run_RUNNER."""
    progress(f"host reference run of {program.variant}")
    reference = evaluate_on_host(program, TosaReferenceRunner(), inputs, floats)
    save_arrays(program.out_dir / "reference", "input", inputs)
    save_arrays(program.out_dir / "reference", "output", reference.outputs)
    save_arrays(program.out_dir / "reference", "float_output", floats)
    run = None
    if runner is not None:
        progress(f"running {program.variant} on {runner.name}")
        run = _runner_run(program, runner, target, reference)
        save_arrays(program.out_dir / f"run_{runner.name}", "output", run.evaluation.outputs)
    measured = run.evaluation.runs[0].cycles if run is not None else None
    return VariantResult(
        program, reference, run, program_problems(program), profile_program(program, measured)
    )


def _task(
    job: Job,
    model: LoadedModel,
    data: LabelledData,
    calibrations,
    programs: dict[Variant, Program],
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
                    job.quant,
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
        data.source,
        metric,
        floats,
        variants,
        tuple(c.source for c in calibrations),
        reference,
        _fused_loss(
            model, calibrations[0], npu, rewrites, job.quant, data, shape, variants, progress
        ),
    )


def _fused_loss(
    model: LoadedModel, calibration, npu, rewrites, quant, data, shape, variants, progress
) -> FusedLoss | None:
    """When fused scores below unfused: which block's range explains it (or that none does)."""
    if not {"fused", "unfused"} <= set(variants):
        return None
    means = {v: float(np.mean([a.value for a in variants[v]])) for v in ("fused", "unfused")}
    if means["fused"] >= means["unfused"]:
        return None
    quiet_torch_import(COMPILER_SIDE)  # block_errors quantizes
    from .evaluation.block_errors import block_errors, explain_fused_loss

    progress("fused below unfused: measuring each block's error against float")
    windows = data_windows(data, shape).reshape(-1, *sample_shape(shape))[:BLOCK_ERROR_SAMPLES]
    samples = tuple((torch.from_numpy(np.ascontiguousarray(w.reshape(shape))),) for w in windows)
    errors = block_errors(model, calibration, npu, rewrites, samples, quant)
    return FusedLoss(means["unfused"] - means["fused"], explain_fused_loss(errors), errors)
