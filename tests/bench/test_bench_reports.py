"""`etk bench -j 2` on a tiny slice of the zoo suite: results.jsonl, report.md, report.html."""

from __future__ import annotations

import base64
import re
import shutil
import subprocess

import pytest

from toolkit.bench.results import run_key
from toolkit.bench.suite import load_suite
from toolkit.cli import main

from .helpers import TINY_MODELS, TINY_NPUS, records


def _fmt(value) -> str:
    return f"{value:.2f}" if isinstance(value, float) else str(value)


def _md_rows(text: str, heading: str) -> list[list[str]]:
    section = text.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("| ")]
    # cells split at unescaped bars, their Markdown escapes undone
    cells = [re.split(r"(?<!\\)\|", line.strip()[1:-1]) for line in lines[1:]]
    return [[re.sub(r"\\(.)", r"\1", c.strip()) for c in row] for row in cells]


def test_results_fields_are_text_in_the_markdown():
    """A model name or failure reason with a bar, a newline or HTML stays one cell of text."""
    from toolkit.bench.report import _md_table, md_text

    hostile = "evil|model\n<script>alert(1)</script>"
    assert md_text(hostile) == "evil\\|model \\<script\\>alert\\(1\\)\\</script\\>"
    (_, _, row) = _md_table(["model", "npu"], [[hostile, "ethos-u55-128"]])
    assert _md_rows("## T\n" + "\n".join(["| h |", "|---|", row]), "T") == [
        [hostile.replace("\n", " "), "ethos-u55-128"]
    ]


def test_every_run_recorded_once_with_its_figures(tiny_bench):
    suite, out, code = tiny_bench
    assert code == 0
    recs = records(out)
    assert sorted(r["key"] for r in recs) == sorted(run_key(s) for s in load_suite(suite).runs())
    assert len(recs) == len(TINY_MODELS) * len(TINY_NPUS) * 2
    assert len({r["pid"] for r in recs}) == 2  # -j 2: two workers shared the runs
    for r in recs:
        assert r["status"] == "ok", r.get("reason")
        assert len(r["model_hash"]) == 16 and r["versions"]["vela"] == r["vela"]["version"]
        assert r["runner"]["name"] == "sim"
        assert r["cycles"]["run"]["kind"] == "simulated" and r["cycles"]["run"]["npu_cycles"] > 0
        assert r["cycles"]["estimate"]["kind"] == "estimate"
        assert (
            sum(row["npu_cycles"] for row in r["layers"]["rows"])
            == r["cycles"]["estimate"]["npu_cycles"]
        )
        assert r["outputs"]["outputs_match_reference"] is True
        assert r["outputs"]["sqnr_db"] > 15 and r["outputs"]["quantized"]
        assert f"--accelerator-config={r['spec']['npu']}" in r["vela"]["flags"]
    big = {
        r["spec"]["npu"]: r["cycles"]["run"]["npu_cycles"]
        for r in recs
        if r["spec"]["model"] == "zoo:conv2d_relu" and r["spec"]["variant"] == "fused"
    }
    assert big["ethos-u65-256"] < big["ethos-u55-128"]  # twice the MACs per cycle


def test_markdown_numbers_match_the_jsonl(tiny_bench):
    _, out, _ = tiny_bench
    text = (out / "report.md").read_text()
    assert f"{len(records(out))} runs, {len(records(out))} ok, 0 failed" in text
    by_label = {
        (r["spec"]["model"], r["spec"]["npu"], r["spec"]["variant"]): r for r in records(out)
    }
    rows = _md_rows(text, "Runs")
    assert len(rows) == len(by_label)
    for row in rows:
        r = by_label[(row[0], row[2], row[3])]
        assert row[4] == "int8"
        assert row[8:13] == [
            str(r["cycles"]["estimate"]["npu_cycles"]),
            str(r["cycles"]["run"]["npu_cycles"]),
            "simulated",
            _fmt(r["outputs"]["sqnr_db"]),
            _fmt(r["outputs"]["max_abs_err_lsb"]),
        ]
    pairs = _md_rows(text, "Fused vs unfused")
    assert len(pairs) == len(TINY_MODELS) * len(TINY_NPUS)
    for model, npu, _quant, _vela, _runner, _kind, fused, unfused, delta, *_ in pairs:
        assert fused == str(by_label[(model, npu, "fused")]["cycles"]["run"]["npu_cycles"])
        assert unfused == str(by_label[(model, npu, "unfused")]["cycles"]["run"]["npu_cycles"])
        assert int(delta) == int(unfused) - int(fused)


def test_html_is_self_contained_with_four_plots_and_the_numbers(tiny_bench):
    _, out, _ = tiny_bench
    page = (out / "report.html").read_text()
    images = re.findall(r'<img alt="([^"]+)" src="data:image/png;base64,([^"]+)"', page)
    assert [alt.split(",")[0] for alt, _ in images] == [
        "Cycles per model",
        "Estimated vs simulated NPU cycles",
        "Per-layer NPU cycles of zoo:conv2d_relu on ethos-u55-128",
        "Accuracy (SQNR vs the float model) per model and variant",
    ]
    for _, data in images:
        assert base64.b64decode(data)[:8] == b"\x89PNG\r\n\x1a\n"
    assert not re.search(r'(src|href)="(?!data:)', page)  # nothing fetched from elsewhere
    cells = re.findall(r"<td>([^<]*)</td>", page)
    for r in records(out):
        assert str(r["cycles"]["run"]["npu_cycles"]) in cells
        assert _fmt(r["outputs"]["sqnr_db"]) in cells


@pytest.mark.skipif(not shutil.which("chromium"), reason="needs chromium (Debian package)")
def test_html_renders_in_headless_chromium_with_the_plots(tiny_bench, tmp_path):
    from matplotlib.image import imread

    _, out, _ = tiny_bench
    shot = tmp_path / "shot.png"
    run = subprocess.run(
        [
            "chromium",
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--window-size=1200,1400",
            f"--screenshot={shot}",
            "--enable-logging=stderr",
            "--v=0",
            (out / "report.html").as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    console = [line for line in run.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    assert not console
    pixels = (imread(shot)[..., :3] * 255).round().astype(int)
    blue, orange = (31, 119, 180), (255, 127, 14)  # matplotlib C0 and C1: the fused/unfused bars
    for colour in (blue, orange):
        assert (abs(pixels - colour).sum(axis=-1) <= 6).sum() > 2000


def test_a16w8_runs_are_recorded_and_paired_apart_from_int8(tmp_path):
    suite = tmp_path / "quant.toml"
    suite.write_text(
        'models = ["zoo:linear_relu"]\nnpus = ["ethos-u55-128"]\nquant = ["int8", "a16w8"]\n'
        'runners = ["sim"]\n[settings]\neval_samples = 2\n'
    )
    out = tmp_path / "out"
    assert main(["bench", str(suite), "--out", str(out)]) == 0
    recs = {(r["spec"]["quant"], r["spec"]["variant"]): r for r in records(out)}
    assert sorted(recs) == [
        ("a16w8", "fused"),
        ("a16w8", "unfused"),
        ("int8", "fused"),
        ("int8", "unfused"),
    ]
    for r in recs.values():
        assert r["status"] == "ok", r.get("reason")
        assert r["outputs"]["outputs_match_reference"] is True
    assert (
        recs["a16w8", "fused"]["outputs"]["sqnr_db"] > recs["int8", "fused"]["outputs"]["sqnr_db"]
    )
    assert main(["report", str(out)]) == 0
    pairs = _md_rows((out / "report.md").read_text(), "Fused vs unfused")
    assert sorted(row[2] for row in pairs) == ["a16w8", "int8"]
