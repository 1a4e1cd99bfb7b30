"""report.html of a job, beside its report.json: where the cycles go per layer of the user's
model, fused and unfused side by side, and what to change.

Made from report.json alone (its per-layer record, docs/report-format.md#layers), so
`etk report OUT --html` makes it again for any job folder. Self-contained: the chart is HTML and
CSS bars (no script, no image), one row per layer, a bar per variant; a bar's hatched part is the
cycles of operations the lowering added (NCHW edge transposes, Vela's lowering of an operator),
its dark part those of operations waiting on memory.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from ..atomic_write import write_atomic
from ..errors import UserError

CHART_LAYERS = 30  # the costliest; the rest are one "other layers" row
COLOURS = {"fused": "#2c6fbb", "unfused": "#e07b24", "tflite": "#5a9e4b"}
STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em 2em;color:#222;max-width:1300px}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em}
.summary td{padding:2px 12px 2px 0}
.chart{display:grid;grid-template-columns:minmax(260px,34%) 1fr;gap:3px 12px;font-size:13px}
.label{text-align:right;align-self:center;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
.bars{display:flex;flex-direction:column;gap:1px;padding:2px 0;border-bottom:1px solid #eee}
.bar{display:flex;align-items:center;height:13px}
.seg{height:100%}
.num{font-size:11px;margin-left:6px;color:#444;white-space:nowrap}
.legend span{display:inline-block;margin-right:18px;font-size:13px}
.sw{display:inline-block;width:14px;height:11px;margin-right:5px;vertical-align:middle}
table.layers{border-collapse:collapse;font-size:12px;margin-top:.5em}
table.layers td,table.layers th{border:1px solid #ddd;padding:2px 6px;text-align:right}
table.layers td:first-child,table.layers th:first-child{text-align:left}
li{margin:.35em 0}.mlia{color:#555;font-style:italic}
"""


def _e(value: object) -> str:
    return html.escape(str(value))


def _segments(layer: dict[str, Any], colour: str, scale: float) -> str:
    """A layer's bar: own compute, memory-bound, added by the lowering (hatched)."""
    added = sum(part["cycles"] for part in layer["added"].values())
    memory = layer["memory_bound_cycles"]
    compute = max(0, layer["cycles"] - added - memory)
    parts = [
        (compute, f"background:{colour}", "compute"),
        (memory, f"background:{colour};filter:brightness(0.6)", "waiting on memory"),
        (
            added,
            f"background:repeating-linear-gradient(45deg,{colour} 0 3px,#fff 3px 6px)",
            "added by the lowering",
        ),
    ]
    return "".join(
        f'<div class="seg" style="width:{100 * cycles / scale:.3f}%;{style}" '
        f'title="{_e(f"{what}: {cycles:,} cycles")}"></div>'
        for cycles, style, what in parts
        if cycles
    )


def _rows(report: dict[str, Any]) -> tuple[list[str], list[tuple[str, dict[str, dict]]]]:
    """(variants, [(layer label, {variant: layer record})]) costliest first."""
    variants = [n for n, v in report["variants"].items() if v.get("layers")]
    by_key: dict[str, dict[str, dict]] = {}
    labels: dict[str, str] = {}
    for name in variants:
        for layer in report["variants"][name]["layers"]["layers"]:
            if layer["cycles"]:
                by_key.setdefault(layer["key"], {})[name] = layer
                labels.setdefault(layer["key"], layer["layer"])
    keys = sorted(by_key, key=lambda k: -max(x["cycles"] for x in by_key[k].values()))
    return variants, [(labels[k], by_key[k]) for k in keys]


def _other(rows: list[tuple[str, dict[str, dict]]], variants: list[str]):
    """The layers past the chart's, summed per variant into one row."""
    rest = rows[CHART_LAYERS:]
    summed = {}
    for name in variants:
        layers = [r[name] for _, r in rest if name in r]
        summed[name] = {
            "cycles": sum(x["cycles"] for x in layers),
            "memory_bound_cycles": sum(x["memory_bound_cycles"] for x in layers),
            "added": {
                "all": {"cycles": sum(p["cycles"] for x in layers for p in x["added"].values())}
            },
        }
    return (f"{len(rest)} other layers", summed)


def chart(report: dict[str, Any]) -> str:
    variants, rows = _rows(report)
    shown = rows[:CHART_LAYERS] + ([_other(rows, variants)] if len(rows) > CHART_LAYERS else [])
    scale = max((x["cycles"] for _, r in shown for x in r.values()), default=1) or 1
    cells = []
    for label, records in shown:
        bars = "".join(
            f'<div class="bar">{_segments(records[n], COLOURS.get(n, "#777"), scale)}'
            f'<span class="num">{n} {records[n]["cycles"]:,}</span></div>'
            for n in variants
            if n in records
        )
        cells.append(
            f'<div class="label" title="{_e(label)}">{_e(label)}</div><div class="bars">{bars}</div>'
        )
    legend = "".join(
        f'<span><i class="sw" style="background:{COLOURS.get(n, "#777")}"></i>{_e(n)}</span>'
        for n in variants
    )
    legend += (
        '<span><i class="sw" style="background:#555"></i>darker: waiting on memory</span>'
        '<span><i class="sw" style="background:repeating-linear-gradient(45deg,#555 0 3px,#fff 3px '
        '6px)"></i>hatched: operations the lowering added</span>'
    )
    return f'<p class="legend">{legend}</p><div class="chart">{"".join(cells)}</div>'


def _summary(report: dict[str, Any]) -> str:
    rows = []
    for name, variant in report["variants"].items():
        record = variant.get("layers")
        if not record:
            continue
        cycles, measured = record["cycles"], record["measured"]
        pmu = cycles["pmu_total_prediction"]
        cells = [
            f"<b>{_e(name)}</b>",
            _e(f"{cycles['total']:,} {cycles['kind']} cycles (operations summed)"),
            _e(f"PMU NPU TOTAL prediction: {pmu:,}" if pmu else ""),
            _e(f"{100 * cycles['attributed']:.1f}% attributed to a module and source line"),
            _e(f"measured NPU cycles: {measured['npu_cycles']:,}" if measured else ""),
        ]
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    return f'<table class="summary">{"".join(rows)}</table>'


def _advice(report: dict[str, Any]) -> str:
    for variant in report["variants"].values():
        if variant.get("layers"):
            items = "".join(
                f"<li>{_e(a['text'])}"
                + (f' <span class="mlia">({_e(a["mlia"])})</span>' if a["mlia"] else "")
                + "</li>"
                for a in variant["layers"]["advice"]
            )
            return f"<ol>{items}</ol>"
    return ""


def _fusion(report: dict[str, Any]) -> dict[str, str]:
    """Per layer key, what fusion did with its activation (comparison.layers)."""
    rows = report.get("comparison", {}).get("layers", [])
    return {
        row["key"]: f"{row['activation']}: {'fused' if row['activation_fused'] else 'not fused'}"
        for row in rows
        if row["activation"]
    }


def _layer_cells(first: dict[str, Any]) -> list[str]:
    use, sqnr = first["mac_utilisation"], first.get("output_sqnr_db")
    added = ", ".join(f"{k} {v['npu_ops']}" for k, v in first["added"].items())
    traffic = "; ".join(
        f"{m} {t['read']:,}/{t['write']:,}" for m, t in first["traffic_bytes"].items()
    )
    return [
        f"{100 * first['share']:.1f}%",
        f"{first['npu_ops']:,}",
        added or "-",
        f"{first['macs']:,}",
        "-" if use is None else f"{100 * use:.0f}%",
        first["bound"],
        traffic or "-",
        f"{first['vela_estimate_cycles']:,}",
        "-" if sqnr is None else f"{sqnr:.1f} dB",
    ]


def _layer_table(report: dict[str, Any]) -> str:
    variants, rows = _rows(report)
    fusion = _fusion(report)
    head = ["layer", *(f"{n} cycles" for n in variants), "share", "NPU ops", "added ops", "MACs"]
    head += ["MAC use", "bound", "traffic (bytes read/written)", "Vela estimate"]
    head += ["int8 output SQNR", "activation"]
    body = []
    for label, records in rows:
        first = records.get(variants[0]) or next(iter(records.values()))
        cells = [label, *(f"{records[n]['cycles']:,}" if n in records else "-" for n in variants)]
        cells += _layer_cells(first) + [fusion.get(first["key"], "-")]
        body.append("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in cells) + "</tr>")
    header = "".join(f"<th>{_e(h)}</th>" for h in head)
    return f'<table class="layers"><tr>{header}</tr>{"".join(body)}</table>'


def job_html(report: dict[str, Any]) -> str:
    title = (
        f"{report['model']} on {report['target']} ({report['npu']}, {report.get('quant', 'int8')})"
    )
    source = next(
        v["layers"]["cycles"]["source"] for v in report["variants"].values() if v.get("layers")
    )
    return (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{_e(title)}</title>"
        f"<style>{STYLE}</style></head><body><h1>Where the cycles go: {_e(title)}</h1>"
        f"{_summary(report)}<h2>Cycles per layer</h2>{chart(report)}"
        f"<p><small>{_e(source)}.</small></p><h2>What to change</h2>{_advice(report)}"
        f"<h2>Every layer</h2>{_layer_table(report)}</body></html>\n"
    )


def write_job_html(path: Path, report: dict[str, Any]) -> bool:
    """Write report.html for a job's report; False (nothing written) when it has no per-layer
    record (a .tflite model)."""
    if not any(v.get("layers") for v in report.get("variants", {}).values()):
        return False
    write_atomic(path, job_html(report))
    return True


def job_html_from_folder(folder: Path) -> Path:
    """`etk report OUT --html` for a job's folder: report.html from its report.json."""
    path = folder / "report.json"
    try:
        report = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise UserError(
            f"cannot read {path} ({exc}): run etk compare or deploy -o {folder}"
        ) from None
    if not isinstance(report, dict) or not write_job_html(folder / "report.html", report):
        raise UserError(
            f"{path} has no per-layer record (a .tflite model, or written before etk recorded "
            "layers): run the job again"
        )
    return folder / "report.html"
