"""Terminal tables (rich) and report.md: the same rows, fused and unfused side by side."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from ..atomic_write import write_atomic
from ..evaluation.cycle_check import cycle_check_lines
from ..evaluation.variants import VariantComparison
from ..results import JobResult, TaskResult, VariantResult
from .job_report import io_layout_hint, scored, variant_warnings
from .layers import advice_lines, layer_records, top_layer_rows
from .session_rows import session_rows


def _fmt(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if isinstance(value, float):
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return f"{value:,.2f}" if abs(value) < 1e6 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


class _Rows:
    """The table being built: a label and one value per variant, and the fused - unfused delta
    when the job compared them."""

    def __init__(self, compared: bool):
        self.compared = compared
        self.table: list[list[str]] = []

    def add(self, label: str, values, delta=None) -> None:
        self.table.append(
            [label, *(_fmt(v) for v in values)]
            + ([_fmt(delta) if delta is not None else ""] if self.compared else [])
        )

    def both(self, values):
        return values[0] - values[1] if self.compared and None not in values else None


def rows(result: JobResult) -> tuple[list[str], list[list[str]]]:
    names = list(result.variants)
    header = ["", *names] + (["delta (fused - unfused)"] if result.comparison else [])
    t = _Rows(result.comparison is not None)
    vs = [result.variants[n] for n in names]
    programs = [v.program for v in vs]
    tot = _program_rows(t, programs, result.job.quant)
    _accuracy_rows(t, vs)
    if result.task is not None and all(n in result.task.variants for n in names):
        means = [float(np.mean([a.value for a in result.task.variants[n]])) for n in names]
        delta = t.both(means)
        t.add(
            f"{_METRIC[result.task.metric]} on eval data",
            [f"{m:.4f}" for m in means],
            None if delta is None else f"{delta:+.4f}",
        )
    runner_runs = [v.run for v in vs if v.run]
    if len(runner_runs) == len(vs):
        _runner_rows(t, runner_runs, tot)
    return header, t.table


def _program_rows(t: _Rows, programs: list, quant: str) -> list:
    """What was compiled: delegates, operators, Vela's estimate, fusion; returns the estimated
    total cycles of each variant."""
    t.add("delegates", [len(p.delegates) for p in programs])
    t.add("CPU operators", [len(p.cpu_ops) for p in programs])
    if any(d.tosa_path for p in programs for d in p.delegates):  # .tflite programs have none
        t.add("TOSA CLAMP ops", [p.tosa_ops.get("CLAMP", 0) for p in programs])
        t.add("TOSA RESCALE ops", [p.tosa_ops.get("RESCALE", 0) for p in programs])
    ops = [p.npu_ops for p in programs]
    t.add("NPU operations (command stream)", ops, t.both(ops))
    est = [sum(d.estimate.npu_cycles for d in p.delegates if d.estimate) for p in programs]
    t.add("NPU cycles (Vela estimate)", est, t.both(est))
    tot = [p.estimated_total_cycles for p in programs]
    t.add("total cycles (Vela estimate)", tot, t.both(tot))
    t.add(_FUSED_LABEL[quant], [sum(d.fused for d in p.decisions) for p in programs])
    return tot


_FUSED_LABEL = {
    "int8": "activations fused",
    # a16w8: no saturation is the activation (accuracy.md, "What fused and unfused mean")
    "a16w8": "activations fused (a16w8: one range per block, the CLAMP stays)",
}


def _accuracy_rows(t: _Rows, vs: list[VariantResult]) -> None:
    evaluations = [scored(v) for v in vs]
    accs = [e.accuracy for e in evaluations if e is not None and e.accuracy is not None]
    if len(accs) != len(vs):
        return
    on = vs[0].run.evaluation.runs[0].runner if vs[0].run else "host ref"
    sq = [a.sqnr_db for a in accs]
    # the worst output's figures, named when there are several
    shown = [
        f"{_fmt(a.sqnr_db)} (output {a.worst.index})" if len(a.outputs) > 1 else a.sqnr_db
        for a in accs
    ]
    t.add(f"SQNR vs float (dB, {on})", shown, t.both(sq))
    t.add("max |err| vs float (LSB)", [a.max_abs_err_lsb for a in accs])
    if any(a.top1_agreement is not None for a in accs):
        t.add("top-1 agreement with float", [a.top1_agreement for a in accs])


def _runner_rows(t: _Rows, runner_runs: list, tot: list) -> None:
    """The runner's cycles beside Vela's estimate (and etk's prediction), its agreement with
    the host reference."""
    runs = [r.evaluation.runs[0] for r in runner_runs]
    kind, label = runs[0].cycles.kind, runs[0].cycles.label
    measured = [r.cycles.npu_cycles for r in runs]
    simulated = kind == "simulated"
    t.add(
        f"NPU {'compute cycles, op sum' if simulated else 'cycles'} ({runs[0].runner}, {label})",
        measured,
        t.both(measured),
    )
    _total_rows(t, runs, tot)
    checks = [r.cycle_check for r in runner_runs if r.cycle_check is not None]
    if len(checks) == len(runner_runs):
        _prediction_rows(
            t, runs[0].runner, measured, [c.prediction.total_cycles for c in checks], tot
        )
    _host_reference_rows(t, runner_runs)
    session_rows(runs, t.add)


def _host_reference_rows(t: _Rows, runner_runs: list) -> None:
    """The runner's outputs against the host reference: not checked where the runner is it."""
    if any(r.not_checked for r in runner_runs):
        t.add("outputs == host reference", ["not checked" for _ in runner_runs])
        return
    t.add("outputs == host reference", [r.outputs_match_reference for r in runner_runs])
    t.add("max diff vs host reference (LSB)", [r.max_diff_lsb for r in runner_runs])


def _total_rows(t: _Rows, runs: list, tot: list) -> None:
    """The runner's total cycles (the PMU prediction, for the simulator) over Vela's estimate
    (not for the estimate itself: that is 1 by construction)."""
    total = [r.cycles.total_cycles for r in runs if r.cycles.total_cycles is not None]
    if len(total) != len(runs):
        return
    kind = runs[0].cycles.kind
    name = "NPU TOTAL, PMU prediction" if kind == "simulated" else "total cycles"
    t.add(f"{name} ({runs[0].runner}, {runs[0].cycles.label})", total, t.both(total))
    if kind != "estimate":
        t.add(
            f"  {runs[0].runner} / Vela estimate (total)",
            [f"{value / e:.3f}x" if e else "-" for value, e in zip(total, tot)],
        )


def _prediction_rows(t: _Rows, runner: str, measured: list, predicted: list, tot: list) -> None:
    """A measured run beside etk's prediction and Vela's estimate."""
    t.add("NPU TOTAL (etk prediction)", predicted, t.both(predicted))
    t.add(
        f"  {runner} / etk prediction",
        [f"{m / p:.3f}x" if m and p else "-" for m, p in zip(measured, predicted)],
    )
    t.add(
        f"  {runner} / Vela estimate (total)",
        [f"{m / e:.3f}x" if m and e else "-" for m, e in zip(measured, tot)],
    )


TERMINAL_LAYER_DELTAS = 3


def _runner_line(note: str, terse: bool) -> str:
    """The runner sentence; in the terminal without the paragraph on why the others cannot run
    (select_runner appends it as ' (not ...)'), which `etk doctor` and report.md give in full."""
    chosen, sep, _why_not = note.partition(" (not ")
    if terse and sep:
        return (
            f"Runner: {chosen} (other runners unavailable here: `etk doctor` says how to add them)"
        )
    return f"Runner: {note}"


_METRIC = {"top1": "top-1", "auc": "ROC AUC"}


def task_rows(task: TaskResult) -> tuple[list[str], list[list[str]]]:
    """Accuracy on labelled data: each variant (mean and spread over calibrations), the float
    model and the reference file."""
    metric = _METRIC[task.metric]
    seeds = len(task.calibrations)
    spread = seeds > 1
    header = [
        "",
        metric + (f" (mean of {seeds})" if spread else ""),
        *(["spread (std; min..max)"] if spread else []),
        "runs on",
    ]
    table = []
    for name, figures in task.variants.items():
        values = [a.value for a in figures]
        table.append(
            [
                name,
                f"{np.mean(values):.4f}",
                *(
                    [f"{np.std(values):.4f}; {min(values):.4f}..{max(values):.4f}"]
                    if spread
                    else []
                ),
                figures[0].runner,
            ]
        )
    single = [""] if spread else []
    if task.float_model is not None:
        table.append(
            ["float model", f"{task.float_model.value:.4f}", *single, task.float_model.runner]
        )
    if task.reference_file is not None:
        name, acc = task.reference_file
        table.append([f"reference file {name}", f"{acc.value:.4f}", *single, acc.runner])
    return header, table


def notes(result: JobResult, terse: bool = False) -> list[str]:
    """Notes under the table; terse (the terminal) keeps each to a line or a few, report.md has
    them all."""
    lines = []
    if result.runner_note:
        lines.append(_runner_line(result.runner_note, terse))
    lines.extend(_input_notes(result))
    unchecked = {v.run.not_checked for v in result.variants.values() if v.run and v.run.not_checked}
    lines.extend(f"Outputs {note}" for note in sorted(unchecked))
    for name, v in result.variants.items():
        lines.extend(_variant_notes(name, v, terse))
    if result.task is not None and result.task.fused_loss is not None:
        loss = result.task.fused_loss
        lines.append(
            f"fused scores {loss.by:.4f} below unfused ({_METRIC[result.task.metric]}): {loss.why}"
        )
    hint = io_layout_hint(result)
    if hint is not None:
        lines.append(hint["note"])
    if result.comparison:
        lines.extend(_comparison_notes(result.comparison, terse))
    return lines


def _input_notes(result: JobResult) -> list[str]:
    """What the runs were fed: inputs a runner fixed, and the calibration and evaluation inputs."""
    fixed_inputs = {
        str(v.run.evaluation.runs[0].details["inputs"])
        for v in result.variants.values()
        if v.run is not None and "inputs" in v.run.evaluation.runs[0].details
    }
    lines = [f"Inputs: {note}" for note in sorted(fixed_inputs)]
    if result.evaluation_inputs:
        lines.append(
            f"Inputs: calibrated on {result.calibration_source}; evaluated on "
            f"{result.evaluation_inputs}"
        )
    return lines


def _decision_notes(name: str, decisions, terse: bool) -> list[str]:
    """Fusion decisions worth a note (not fused in the fused variant, fused by a raised zero
    point or at a16w8), one line per activation and reason, naming every block it applies to
    (in the terminal the first few)."""
    grouped: dict[tuple[str, str, bool], list[str]] = {}
    for d in decisions:
        if not d.fused and name == "fused":
            grouped.setdefault((d.activation, d.reason, False), []).append(
                f"{d.parent} ({d.source})"
            )
        if d.zero_point_raised:
            grouped.setdefault((d.activation, d.reason, True), []).append(d.parent)
    lines = []
    for (activation, reason, fused), parents in grouped.items():
        shown = parents[:NAMED_BLOCKS] if terse else parents
        more = f" and {len(parents) - len(shown)} more" if len(shown) < len(parents) else ""
        count = f" ({len(parents)} blocks)" if len(parents) > 1 else ""
        where = f"{activation} after {', '.join(shown)}{more}{count}"
        lines.append(
            f"{name}: {where}: {reason}" if fused else f"{name}: {where} not fused: {reason}"
        )
    return lines


NAMED_BLOCKS = 4  # blocks a terminal note names before "and N more"


def _variant_notes(name: str, v: VariantResult, terse: bool = False) -> list[str]:
    """A variant's fallback, warnings, rewrites, CPU operators, fusion decisions, cycle check."""
    lines = []
    if v.run is not None and "fallback" in v.run.evaluation.runs[0].details:
        lines.append(f"{name}: {v.run.evaluation.runs[0].details['fallback']}")
    lines.extend(f"WARNING {w}" for w in variant_warnings(name, v))
    for record in v.program.rewrites:
        lines.append(f"{name}: rewrite {record.rewrite} at {record.source}: {record.change}")
    for op in v.program.cpu_ops:
        lines.append(f"{name}: CPU operator {op.op} from {op.source}: {op.reason}")
    lines.extend(_decision_notes(name, v.program.decisions, terse))
    check = v.run.cycle_check if v.run is not None else None
    if check is not None:
        lines.extend(f"{name}: {line}" for line in cycle_check_lines(check)[1:])
    return lines


def _comparison_notes(comparison: VariantComparison, terse: bool) -> list[str]:
    """What the comparison says, and the operations whose estimate differs though they are the
    same in both variants (on the terminal the largest few)."""
    lines = list(comparison.notes)
    deltas = list(comparison.layer_deltas)
    if terse and len(deltas) > TERMINAL_LAYER_DELTAS:
        lines.append(
            f"  the estimate differs on {len(deltas)} operations that are the same in "
            f"both variants; the {TERMINAL_LAYER_DELTAS} largest (all in report.md):"
        )
        deltas = sorted(deltas, key=lambda d: -abs(d.fused_cycles - d.unfused_cycles))
        deltas = deltas[:TERMINAL_LAYER_DELTAS]
    for delta in deltas:
        lines.append(
            f"  estimate differs on the same operation: delegate {delta.delegate} "
            f"{delta.operator} {delta.name}: fused {delta.fused_cycles:,} vs unfused "
            f"{delta.unfused_cycles:,} cycles"
        )
    return lines


def print_result(result: JobResult, console: Console | None = None) -> None:
    console = console or Console()
    header, table = rows(result)
    title = (
        f"{result.job.model} on {result.target.name} ({result.npu.accelerator}, "
        f"{result.job.quant}, {result.npu.system_config}, {result.npu.memory_mode})"
    )
    rich_table = Table(title=title)
    for i, column in enumerate(header):
        rich_table.add_column(column, justify="left" if i == 0 else "right")
    for row in table:
        rich_table.add_row(*row)
    console.print(rich_table)
    if result.task is not None:
        header, table = task_rows(result.task)
        samples = next(iter(result.task.variants.values()))[0].samples
        task_table = Table(title=f"accuracy on {result.task.data} ({samples:,} samples)")
        for i, column in enumerate(header):
            task_table.add_column(column, justify="left" if i in (0, len(header) - 1) else "right")
        for row in table:
            task_table.add_row(*row)
        console.print(task_table)
    _print_layers(result, console)
    for line in notes(result, terse=True):
        console.print(line, markup=False)
    console.print(f"report: {result.report_path}", markup=False)


def _print_layers(result: JobResult, console: Console) -> None:
    """The costliest layers and the advice on them (report/layers.py)."""
    records = layer_records(result)
    table = top_layer_rows(records)
    if table is None:
        return
    title, header, layer_rows = table
    rich_table = Table(title=title)
    # the layer's name and source in one cell, the figures' headers on two lines: fits 80 columns
    rich_table.add_column("layer\nsource", overflow="fold", min_width=20)
    for column in header[2:]:
        left = column == header[-1]
        rich_table.add_column(column.replace(" ", "\n", 1), justify="left" if left else "right")
    for name, source, *figures in layer_rows:
        rich_table.add_row(f"{name}\n{source}", *figures)
    console.print(rich_table)
    for line in advice_lines(records, terse=True):
        console.print(line, markup=False)


def write_markdown(result: JobResult, path: Path) -> None:
    header, table = rows(result)
    lines = [
        f"# {result.job.model} on {result.target.name} ({result.npu.accelerator}, "
        f"{result.job.quant})",
        "",
        f"Vela system config {result.npu.system_config}, memory mode "
        f"{result.npu.memory_mode}; calibration {result.calibration_source}.",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    lines += ["| " + " | ".join(row) + " |" for row in table]
    if result.task is not None:
        header, table = task_rows(result.task)
        lines += [
            "",
            f"Accuracy on {result.task.data}:",
            "",
            "| " + " | ".join(header) + " |",
            "|" + "---|" * len(header),
        ]
        lines += ["| " + " | ".join(row) + " |" for row in table]
    lines += ["", *[f"- {n}" for n in notes(result)], "", *_layer_markdown(result)]
    write_atomic(path, "\n".join(lines))


def _layer_markdown(result: JobResult) -> list[str]:
    records = layer_records(result)
    table = top_layer_rows(records, count=None)
    if table is None:
        return []
    title, header, layer_rows = table
    lines = [f"## {title[0].upper()}{title[1:]}", "", "| " + " | ".join(header) + " |"]
    lines += ["|" + "---|" * len(header), *("| " + " | ".join(row) + " |" for row in layer_rows)]
    return lines + ["", *(f"- {line}" for line in advice_lines(records, terse=False)), ""]
