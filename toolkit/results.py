"""What a job produced: per variant the program, its host reference run and its run on a runner."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .artifacts import LoadedModel, Program
from .job import Job
from .npu import NpuConfig
from .targets import Target

if TYPE_CHECKING:  # types only: block_errors imports the quantizer, which a cached run never needs
    from .evaluation.block_errors import BlockError
    from .evaluation.cycle_check import CycleCheck
    from .evaluation.evaluate import Evaluation
    from .evaluation.task_eval import TaskAccuracy
    from .evaluation.variants import VariantComparison
    from .lower.vela_check import VelaProblem


@dataclass(frozen=True)
class RunnerRun:
    """A variant's run on the job's runner: FVP, board, our simulator or the TOSA reference model."""

    evaluation: Evaluation
    outputs_match_reference: bool | None  # None: there is no host reference (.tflite models)
    max_diff_lsb: float | None
    exact_match_rate: float | None
    cycle_check: CycleCheck | None = (
        None  # a measured run: beside etk's prediction, Vela's estimate
    )
    # why the outputs were not checked against the host reference (the runner is the host
    # reference itself); then outputs_match_reference and max_diff_lsb are None
    not_checked: str | None = None


@dataclass(frozen=True)
class VariantResult:
    program: Program
    reference: Evaluation | None  # None for .tflite models: no float model, no TOSA graph
    run: RunnerRun | None = None  # None: host reference only (compile, compare)
    vela_problems: tuple[VelaProblem, ...] = ()  # operations that compute wrong results


@dataclass(frozen=True)
class TaskResult:
    """Accuracy on labelled data (--eval-data): per variant one figure per calibration seed."""

    data: str
    metric: str  # "top1" or "auc"
    float_model: TaskAccuracy | None  # None for .tflite models
    variants: dict[str, tuple[TaskAccuracy, ...]]
    calibrations: tuple[str, ...]  # per seed
    reference_file: tuple[str, TaskAccuracy] | None = None  # the trained .tflite of zoo:X@mlperf
    fused_loss: FusedLoss | None = None  # fused scored below unfused: by how much, and why


@dataclass(frozen=True)
class FusedLoss:
    by: float  # unfused mean - fused mean (> 0)
    why: str  # evaluation/block_errors.explain_fused_loss
    blocks: tuple[BlockError, ...]


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

    def to_dict(self) -> dict[str, Any]:
        """What report.json holds (docs/report-format.md)."""
        from .report.job_report import report_dict

        return report_dict(self)
