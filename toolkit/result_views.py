"""Results as a notebook shows them: short reprs, the variants' headline table, per-sample and
per-layer tables (pandas optional: `pip install .[notebook]`).

Nothing here holds arrays: a repr or table names how many samples and outputs there are.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .artifacts import CycleFigures, Program
from .errors import UserError

if TYPE_CHECKING:
    from .evaluation.evaluate import Evaluation
    from .results import JobResult, RunnerRun, VariantResult

SUMMARY_COLUMNS = (
    "variant",
    "cycles",
    "cycles kind",
    "NPU ops",
    "CPU ops",
    "SQNR (dB)",
    "outputs",
)
DATAFRAME_KINDS = ("variants", "samples", "layers")


@dataclass(frozen=True)
class Table:
    """Rows of plain values: prints as aligned text, shows as HTML in a notebook."""

    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]
    title: str = ""

    def row(self, first: Any) -> dict[str, Any]:
        """The row whose first column is first, as {column: value}."""
        for row in self.rows:
            if row[0] == first:
                return dict(zip(self.columns, row))
        raise KeyError(first)

    def __str__(self) -> str:
        cells = [list(self.columns)] + [[_cell(v) for v in row] for row in self.rows]
        widths = [max(len(r[i]) for r in cells) for i in range(len(self.columns))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]
        lines.insert(1, "  ".join("-" * w for w in widths))
        return "\n".join(([self.title] if self.title else []) + lines)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{html.escape(c)}</th>" for c in self.columns)
        body = "".join(
            "<tr>" + "".join(f"<td>{html.escape(_cell(v))}</td>" for v in row) + "</tr>"
            for row in self.rows
        )
        caption = f"<caption>{html.escape(self.title)}</caption>" if self.title else ""
        return f"<table>{caption}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"

    def to_dataframe(self) -> Any:
        return _pandas().DataFrame(list(self.rows), columns=list(self.columns))


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.2f}" if math.isfinite(value) else str(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def _pandas() -> Any:
    try:
        import pandas
    except ImportError:
        raise UserError(
            "tables as DataFrames need pandas: pip install 'ethos-u-toolkit[notebook]'"
        ) from None
    return pandas


def variant_cycles(variant: VariantResult) -> CycleFigures:
    """The runner's cycles of the first sample when it ran on a runner that counts them (measured
    on an FVP or board, simulated by etk's simulator), else Vela's estimate for the program."""
    if variant.run is not None:
        cycles = variant.run.evaluation.runs[0].cycles
        if cycles.kind != "none":
            return cycles
    return estimate_cycles(variant.program)


def estimate_cycles(program: Program) -> CycleFigures:
    estimates = [d.estimate for d in program.delegates if d.estimate is not None]
    if not estimates:
        return CycleFigures(kind="none", source="no runner counted cycles; no Vela estimate")
    return CycleFigures(
        kind="estimate",
        source="Vela estimate",
        npu_cycles=sum(e.npu_cycles for e in estimates),
        total_cycles=sum(e.total_cycles for e in estimates),
    )


def outputs_verdict(run: RunnerRun | None) -> str:
    """What the runner's outputs were checked against, in a few words."""
    if run is None:
        return "host reference only"
    if run.not_checked is not None or run.outputs_match_reference is None:
        return "not checked"
    if run.outputs_match_reference:
        return "match host reference"
    return f"differ from host reference (max {run.max_diff_lsb:g} LSB)"


def summary(result: JobResult) -> Table:
    """One row per variant: cycles and their kind, NPU and CPU operations, SQNR against the
    float model (the worst output), and whether the runner's outputs matched the host reference."""
    rows = []
    for name, variant in result.variants.items():
        cycles = variant_cycles(variant)
        accuracy = variant.accuracy
        rows.append(
            (
                name,
                cycles.total_cycles,
                cycles.kind,
                variant.program.npu_ops,
                len(variant.program.cpu_ops),
                None if accuracy is None else accuracy.sqnr_db,
                outputs_verdict(variant.run),
            )
        )
    runner = _runner_name(result)
    title = f"{result.model.name} on {result.target.name} ({result.npu.accelerator}), {runner}"
    return Table(SUMMARY_COLUMNS, tuple(rows), title)


def _runner_name(result: JobResult) -> str:
    for variant in result.variants.values():
        if variant.run is not None:
            return f"runner {variant.run.evaluation.runs[0].runner}"
    return "host reference only"


def sample_rows(result: JobResult) -> Table:
    """Per variant and evaluation sample: the runner's cycles, SQNR against the float model (the
    worst output) and the largest difference from the host reference in LSB (None: not checked)."""
    columns = ("variant", "sample", "runner", "cycles", "cycles kind", "SQNR (dB)", "max diff LSB")
    rows = []
    for name, variant in result.variants.items():
        evaluation = variant.run.evaluation if variant.run is not None else variant.reference
        if evaluation is None:
            continue
        checked = variant.run is not None and variant.run.not_checked is None
        for k, run in enumerate(evaluation.runs):
            index = evaluation.kept[k] if evaluation.kept is not None else k
            diff = _sample_diff(variant, index, evaluation.outputs[k]) if checked else None
            rows.append(
                (
                    name,
                    index,
                    run.runner,
                    run.cycles.total_cycles,
                    run.cycles.kind,
                    _sample_sqnr(evaluation, k),
                    diff,
                )
            )
    return Table(columns, tuple(rows), "per sample")


def _sample_sqnr(evaluation: Evaluation, k: int) -> float | None:
    from .evaluation.metrics import sqnr_db

    if not evaluation.float_outputs:
        return None
    pairs = zip(evaluation.float_outputs[k], evaluation.outputs[k])
    return min(sqnr_db(f, o) for f, o in pairs)


def _sample_diff(variant: VariantResult, index: int, outputs: Sequence[Any]) -> float | None:
    import numpy as np

    if variant.reference is None:
        return None
    worst = 0.0
    for ref, out, quant in zip(
        variant.reference.outputs[index], outputs, variant.program.output_quant
    ):
        diff = float(np.max(np.abs(np.asarray(ref, np.float64) - np.asarray(out, np.float64))))
        worst = max(worst, diff / quant.scale if quant else diff)
    return worst


def layer_rows(result: JobResult) -> Table:
    """Per variant, delegate and layer: Vela's per-layer estimate (cycles kind "estimate")."""
    columns = ("variant", "delegate", "layer", "operator", "npu cycles", "op cycles", "MACs")
    rows = [
        (name, d.index, layer.name, layer.operator, layer.npu_cycles, layer.op_cycles, layer.macs)
        for name, variant in result.variants.items()
        for d in variant.program.delegates
        if d.estimate is not None
        for layer in d.estimate.layers
    ]
    return Table(columns, tuple(rows), "per layer (Vela estimate)")


def dataframe(result: JobResult, kind: str) -> Any:
    tables = {"variants": summary, "samples": sample_rows, "layers": layer_rows}
    if kind not in tables:
        raise UserError(f"to_dataframe('{kind}'): give one of {', '.join(DATAFRAME_KINDS)}")
    return tables[kind](result).to_dataframe()


# short reprs: what a notebook prints for a bare `result` and its parts


def evaluation_repr(evaluation: Evaluation) -> str:
    runner = evaluation.runs[0].runner if evaluation.runs else "-"
    accuracy = evaluation.accuracy
    sqnr = "" if accuracy is None else f", SQNR {_cell(accuracy.sqnr_db)} dB"
    return f"<Evaluation: {len(evaluation.runs)} samples on {runner}{sqnr}>"


def run_repr(run: RunnerRun) -> str:
    cycles = run.evaluation.runs[0].cycles
    figure = f"{_cell(cycles.total_cycles)} cycles ({cycles.kind})" if cycles.kind != "none" else ""
    parts = [run.evaluation.runs[0].runner, figure, outputs_verdict(run)]
    return f"<RunnerRun: {', '.join(p for p in parts if p)}>"


def variant_repr(variant: VariantResult) -> str:
    cycles = variant_cycles(variant)
    program = variant.program
    parts = [
        f"{len(program.delegates)} delegates",
        f"{program.npu_ops} NPU ops",
        f"{len(program.cpu_ops)} CPU ops",
        f"{_cell(cycles.total_cycles)} cycles ({cycles.kind})",
        outputs_verdict(variant.run),
    ]
    return f"<VariantResult {program.variant}: {', '.join(parts)}>"


def job_repr(result: JobResult) -> str:
    return (
        f"<JobResult {result.model.name} on {result.target.name} ({result.npu.accelerator}): "
        f"{', '.join(result.variants)}; report {result.report_path}>"
    )


def job_html(result: JobResult) -> str:
    table = summary(result)._repr_html_()
    return f"<div><p>{html.escape(job_repr(result))}</p>{table}</div>"
