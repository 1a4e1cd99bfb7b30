"""`etk report DIR`: report.md and a self-contained report.html (plots embedded as PNG) from
results.jsonl (the newest record per run)."""

from __future__ import annotations

import base64
import html
import io
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..atomic_write import write_atomic
from ..errors import UserError
from .record import BenchRecord
from .results import RESULTS_NAME, latest, read_records


@dataclass(frozen=True)
class Row:
    key: str
    model: str
    target: str
    npu: str
    variant: str
    vela: str
    runner: str  # the runner that ran (the suite's choice for failed runs)
    status: str
    reason: str
    estimate_cycles: int | None
    run_cycles: int | None
    run_kind: str
    sqnr_db: float | str | None  # "inf" when outputs equal the float model's
    max_err_lsb: float | None
    matches_reference: bool | None
    layers: tuple[tuple[str, int], ...]  # ("operator name", estimated NPU cycles), in order
    quant: str = "int8"

    @property
    def config(self) -> tuple[str, str, str, str, str]:
        return (self.target, self.npu, self.vela, self.runner, self.quant)


def _row(record: BenchRecord) -> Row:
    spec = record.spec
    cycles = record.cycles or {}
    outputs = record.outputs or {}
    return Row(
        key=record.key,
        model=spec["model"],
        target=spec["target"],
        npu=spec["npu"],
        variant=spec["variant"],
        vela=spec["vela"]["name"],
        runner=record.runner["name"] if record.ok and record.runner else spec["runner"],
        status=record.status,
        reason=record.reason or "",
        estimate_cycles=cycles.get("estimate", {}).get("npu_cycles"),
        run_cycles=cycles.get("run", {}).get("npu_cycles"),
        run_kind=cycles.get("run", {}).get("kind", ""),
        sqnr_db=outputs.get("sqnr_db"),
        max_err_lsb=outputs.get("max_abs_err_lsb"),
        matches_reference=outputs.get("outputs_match_reference"),
        layers=tuple(
            (f"{layer['operator']} {layer['name']}", layer["npu_cycles"])
            for layer in (record.layers or {}).get("rows", [])
        ),
        quant=spec.get("quant", "int8"),  # records from before the quant axis: int8
    )


def load_rows(folder: Path) -> list[Row]:
    records = read_records(folder / RESULTS_NAME)
    if not records:
        raise UserError(f"{folder / RESULTS_NAME} has no runs: run etk bench SUITE --out {folder}")
    return [_row(r) for r in latest(records).values()]


def _fmt(value: Any, digits: int = 2) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


RUN_HEADER = (
    "model",
    "target",
    "NPU",
    "variant",
    "quant",
    "Vela",
    "runner",
    "status",
    "NPU cycles (estimate)",
    "NPU cycles (run)",
    "run cycles kind",
    "SQNR (dB)",
    "max err vs float (LSB)",
    "outputs == host ref",
)
PAIR_HEADER = (
    "model",
    "NPU",
    "quant",
    "Vela",
    "runner",
    "kind",
    "fused NPU cycles",
    "unfused NPU cycles",
    "unfused - fused",
    "fused SQNR (dB)",
    "unfused SQNR (dB)",
)


def run_table(rows: list[Row]) -> list[list[str]]:
    return [
        [
            r.model,
            r.target,
            r.npu,
            r.variant,
            r.quant,
            r.vela,
            r.runner,
            r.status,
            _fmt(r.estimate_cycles),
            _fmt(r.run_cycles),
            r.run_kind or "-",
            _fmt(r.sqnr_db),
            _fmt(r.max_err_lsb),
            _fmt(r.matches_reference),
        ]
        for r in rows
    ]


def _pairs(rows: list[Row]) -> dict[tuple, dict[str, Row]]:
    """(model, *config) -> {"fused": row, "unfused": row}; a .tflite model's one run (variant
    "tflite") has no pair and is in the runs table only."""
    pairs: dict[tuple, dict[str, Row]] = {}
    for r in rows:
        if r.status == "ok":
            pairs.setdefault((r.model, *r.config), {})[r.variant] = r
    return {k: v for k, v in pairs.items() if {"fused", "unfused"} <= set(v)}


def pair_table(rows: list[Row]) -> list[list[str]]:
    table = []
    for (model, _target, npu, vela, runner, quant), pair in _pairs(rows).items():
        fused, unfused = pair["fused"], pair["unfused"]
        delta = (
            unfused.run_cycles - fused.run_cycles
            if fused.run_cycles is not None and unfused.run_cycles is not None
            else None
        )
        table.append(
            [
                model,
                npu,
                quant,
                vela,
                runner,
                fused.run_kind,
                _fmt(fused.run_cycles),
                _fmt(unfused.run_cycles),
                _fmt(delta),
                _fmt(fused.sqnr_db),
                _fmt(unfused.sqnr_db),
            ]
        )
    return table


def _summary(rows: list[Row]) -> str:
    failed = sum(r.status != "ok" for r in rows)
    kinds = sorted({r.run_kind for r in rows if r.run_kind})
    return (
        f"{len(rows)} runs, {len(rows) - failed} ok, {failed} failed. Run cycles are "
        f"{' / '.join(kinds) or '-'} figures; estimates are Vela's performance model."
    )


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]<>()#+!|~])")


def md_text(value: object) -> str:
    """A results field as inline Markdown text: one line, its Markdown and HTML characters
    escaped (a model name or failure reason is data: `|` would split a table cell, `<script>`
    would be HTML in a rendered page)."""
    text = " ".join(str(value).split())
    return _MD_SPECIAL.sub(r"\\\1", text)


def _md_table(header, table) -> list[str]:
    return [
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
        *["| " + " | ".join(md_text(cell) for cell in row) + " |" for row in table],
    ]


def markdown(rows: list[Row], title: str) -> str:
    lines = [
        f"# Benchmark {md_text(title)}",
        "",
        _summary(rows),
        "",
        "## Runs",
        "",
        *_md_table(RUN_HEADER, run_table(rows)),
        "",
        "## Fused vs unfused",
        "",
        *_md_table(PAIR_HEADER, pair_table(rows)),
        "",
    ]
    failed = [r for r in rows if r.status != "ok"]
    if failed:
        lines += [
            "## Failed runs",
            "",
            *[
                "- "
                + " ".join(md_text(v) for v in (r.model, r.variant, r.npu, r.vela, r.runner))
                + f": {md_text(r.reason)}"
                for r in failed
            ],
            "",
        ]
    return "\n".join(lines)


def _sqnr(value) -> float | None:
    return value if isinstance(value, (int, float)) else None


def _png(fig) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90, bbox_inches="tight")
    return base64.b64encode(buffer.getvalue()).decode()


def _grouped_bars(ax, models: list[str], series: dict[str, list[float | None]], ylabel: str):
    width = 0.8 / max(1, len(series))
    for i, (name, values) in enumerate(series.items()):
        xs = [m + i * width for m in range(len(models))]
        ax.bar(xs, [v if v is not None else 0 for v in values], width, label=name)
    ax.set_xticks([m + width * (len(series) - 1) / 2 for m in range(len(models))])
    ax.set_xticklabels(models, rotation=60, ha="right", fontsize=8)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=8)


Plot = tuple[str, str]  # (caption, base64 PNG)


def _cycles_plot(pairs: dict[tuple, dict[str, Row]], configs: list[tuple]) -> Plot:
    """Fused vs unfused NPU cycles per model, one panel per configuration."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 3.2 * len(configs)))
    for i, config in enumerate(configs):
        ax = fig.add_subplot(len(configs), 1, i + 1)
        keys = [k for k in pairs if k[1:] == config]
        kind = pairs[keys[0]]["fused"].run_kind
        _grouped_bars(
            ax,
            [k[0] for k in keys],
            {v: [pairs[k][v].run_cycles for k in keys] for v in ("fused", "unfused")},
            f"NPU cycles ({kind})",
        )
        ax.set_title(
            f"{config[1]} ({config[0]}), {config[4]}, Vela {config[2]}, runner {config[3]}",
            fontsize=9,
        )
    fig.tight_layout()
    return ("Cycles per model, fused vs unfused", _png(fig))


def _estimate_vs_run_plot(rows: list[Row]) -> Plot | None:
    """Vela's estimate against the run's cycles for every run that has both, log-log."""
    from matplotlib.figure import Figure

    measured = [
        (r, r.estimate_cycles, r.run_cycles)
        for r in rows
        if r.status == "ok" and r.estimate_cycles and r.run_cycles
    ]
    if not measured:
        return None
    fig = Figure(figsize=(6, 5))
    ax = fig.add_subplot()
    for variant, marker in (("fused", "o"), ("unfused", "x"), ("tflite", "s")):
        points = [(e, c) for r, e, c in measured if r.variant == variant]
        if not points:
            continue
        ax.scatter(
            [e for e, _ in points],
            [c for _, c in points],
            marker=marker,
            label=variant,
        )
    top = max(max(e, c) for _, e, c in measured)
    low = min(min(e, c) for _, e, c in measured)
    ax.plot([low, top], [low, top], color="grey", linewidth=0.8, label="equal")
    ax.set_xscale("log")
    ax.set_yscale("log")
    kinds = " / ".join(sorted({r.run_kind for r, _, _ in measured}))
    ax.set_xlabel("NPU cycles, Vela estimate")
    ax.set_ylabel(f"NPU cycles, {kinds}")
    ax.legend(fontsize=8)
    return (f"Estimated vs {kinds} NPU cycles, every run", _png(fig))


def _per_layer_plot(pairs: dict[tuple, dict[str, Row]]) -> Plot | None:
    """Per-layer cycles of the pair with the most fused layers, fused and unfused side by side."""
    from matplotlib.figure import Figure

    layered = [k for k, p in pairs.items() if p["fused"].layers and p["unfused"].layers]
    if not layered:
        return None
    key = max(layered, key=lambda k: len(pairs[k]["fused"].layers))
    fused, unfused = pairs[key]["fused"], pairs[key]["unfused"]
    # The variants' layers differ (unfused keeps its CLAMP), so one panel each, not pairs.
    fig = Figure(figsize=(10, 0.35 * max(len(fused.layers), len(unfused.layers)) + 1.5))
    axes = fig.subplots(1, 2, sharex=True)
    for ax, run in zip(axes, (fused, unfused)):
        ax.barh(
            range(len(run.layers)),
            [c for _, c in run.layers],
            color="C0" if run.variant == "fused" else "C1",
        )
        ax.set_yticks(range(len(run.layers)))
        ax.set_yticklabels([n for n, _ in run.layers], fontsize=8)
        ax.invert_yaxis()
        ax.set_title(f"{run.variant}: {sum(c for _, c in run.layers):,} cycles", fontsize=9)
        ax.set_xlabel("NPU cycles (Vela estimate)")
    fig.tight_layout()
    return (
        f"Per-layer NPU cycles of {key[0]} on {key[2]}, fused vs unfused "
        "(Vela's per-layer estimate)",
        _png(fig),
    )


def _accuracy_plot(pairs: dict[tuple, dict[str, Row]], config: tuple) -> Plot:
    """SQNR against the float model per model, fused vs unfused, for one configuration."""
    from matplotlib.figure import Figure

    keys = [k for k in pairs if k[1:] == config]
    fig = Figure(figsize=(10, 3.5))
    ax = fig.add_subplot()
    _grouped_bars(
        ax,
        [k[0] for k in keys],
        {v: [_sqnr(pairs[k][v].sqnr_db) for k in keys] for v in ("fused", "unfused")},
        "SQNR vs float model (dB)",
    )
    return (
        f"Accuracy (SQNR vs the float model) per model and variant, {config[1]}, {config[4]}",
        _png(fig),
    )


def plots(rows: list[Row]) -> list[Plot]:
    """(caption, base64 PNG) for each plot there is data for."""
    pairs = _pairs(rows)
    configs = list(dict.fromkeys(k[1:] for k in pairs))
    figures = [_cycles_plot(pairs, configs)] if configs else []
    figures += [p for p in (_estimate_vs_run_plot(rows), _per_layer_plot(pairs)) if p is not None]
    if configs:
        figures.append(_accuracy_plot(pairs, configs[0]))
    return figures


def _html_table(header, table) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in table
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


STYLE = (
    "body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;font-size:12px}"
    "td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}"
    "td:first-child,th:first-child{text-align:left}figure{margin:1em 0}img{max-width:100%}"
)


def html_page(rows: list[Row], title: str) -> str:
    figures = "".join(
        f'<figure><img alt="{html.escape(caption)}" src="data:image/png;base64,{png}">'
        f"<figcaption>{html.escape(caption)}</figcaption></figure>"
        for caption, png in plots(rows)
    )
    failed = "".join(
        f"<li>{html.escape(f'{r.model} {r.variant} {r.npu}: {r.reason}')}</li>"
        for r in rows
        if r.status != "ok"
    )
    return (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>Benchmark "
        f"{html.escape(title)}</title><style>{STYLE}</style></head><body>"
        f"<h1>Benchmark {html.escape(title)}</h1><p>{html.escape(_summary(rows))}</p>"
        f"<h2>Plots</h2>{figures}<h2>Fused vs unfused</h2>"
        f"{_html_table(PAIR_HEADER, pair_table(rows))}<h2>Runs</h2>"
        f"{_html_table(RUN_HEADER, run_table(rows))}"
        + (f"<h2>Failed runs</h2><ul>{failed}</ul>" if failed else "")
        + "</body></html>\n"
    )


def write_reports(folder: Path, with_html: bool) -> list[Path]:
    rows = load_rows(folder)
    title = folder.resolve().name
    written = [folder / "report.md"]
    write_atomic(written[0], markdown(rows, title))
    if with_html:
        written.append(folder / "report.html")
        write_atomic(written[1], html_page(rows, title))
    return written
