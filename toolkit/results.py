"""What a job produced: per variant the program, its host reference run and its run on a runner."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import result_views as views
from .artifacts import CycleFigures, LoadedModel, Program
from .job import Job
from .npu import NpuConfig
from .targets import Target

if TYPE_CHECKING:  # types only: block_errors imports the quantizer, which a cached run never needs
    from .evaluation.block_errors import BlockError
    from .evaluation.cycle_check import CycleCheck
    from .evaluation.evaluate import Evaluation
    from .evaluation.layer_profile import ProgramProfile
    from .evaluation.metrics import Accuracy
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

    @property
    def cycles(self) -> CycleFigures:
        """The runner's cycle figures of the first evaluation sample (`.kind`: measured,
        simulated, or none when the runner counts no cycles)."""
        return self.evaluation.runs[0].cycles

    def __repr__(self) -> str:
        return views.run_repr(self)


@dataclass(frozen=True)
class VariantResult:
    program: Program
    reference: Evaluation | None  # None for .tflite models: no float model, no TOSA graph
    run: RunnerRun | None = None  # None: host reference only (compile, compare)
    vela_problems: tuple[VelaProblem, ...] = ()  # operations that compute wrong results
    layers: ProgramProfile | None = None  # where its cycles go, per layer of the user's model

    @property
    def cycles(self) -> CycleFigures:
        """The runner's cycle figures of the first evaluation sample where a runner counted them
        (kind "measured": FVP or board PMU; "simulated": etk's simulator), else Vela's estimate
        summed over the delegates (kind "estimate"). `.total_cycles` is the headline figure (the
        PMU's NPU TOTAL, or what predicts it); `.kind` says which of these it is."""
        return views.variant_cycles(self)

    @property
    def accuracy(self) -> Accuracy | None:
        """Accuracy against the float model of the runner's outputs (of the host reference's
        when the job ran no runner); None for a .tflite model (no float model)."""
        evaluation = self.run.evaluation if self.run is not None else self.reference
        return None if evaluation is None else evaluation.accuracy

    def __repr__(self) -> str:
        return views.variant_repr(self)

    def _repr_html_(self) -> str:
        return f"<p>{views.html.escape(repr(self))}</p>"


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
    evaluation_inputs: str = ""  # what the evaluation fed: evaluate.EvaluationInputs.source

    def to_dict(self) -> dict[str, Any]:
        """What report.json holds (docs/report-format.md)."""
        from .report.job_report import report_dict

        return report_dict(self)

    def summary(self) -> views.Table:
        """The variants' headline figures: cycles and their kind (measured, simulated or
        estimate), NPU and CPU operations, SQNR (dB, worst output) and the outputs' check against
        the host reference. Prints as text; shows as HTML in a notebook; .to_dataframe()."""
        return views.summary(self)

    def to_dataframe(self, kind: str = "variants") -> Any:
        """A pandas DataFrame (pip install 'ethos-u-toolkit[notebook]'): "variants" (summary()),
        "samples" (per variant and evaluation sample) or "layers" (Vela's per-layer estimate)."""
        return views.dataframe(self, kind)

    def __repr__(self) -> str:
        return views.job_repr(self)

    def _repr_html_(self) -> str:
        return views.job_html(self)
