"""Results in a notebook: short reprs, summary() rows, to_dataframe() columns and values, and the
figures where users look for them (variant.cycles, variant.accuracy)."""

from __future__ import annotations

import math
import sys

import pytest

from toolkit.errors import UserError
from toolkit.job import Job
from toolkit.pipeline import run_job
from toolkit.result_views import SUMMARY_COLUMNS
from toolkit.runners.sim import SimulatorRunner
from toolkit.runners.tosa_ref import TosaReferenceRunner

# zoo:conv2d_relu, corstone-300 (ethos-u55-128), seed 0, 2 evaluation samples: the figures
# tests/report/test_tables.py pins from the report's own rows (the simulator's NPU TOTAL)
SIM_SUMMARY = [
    ("fused", 46_448, "simulated", 42, 0, "39.51", "match host reference"),
    ("unfused", 46_084, "simulated", 42, 0, "37.69", "match host reference"),
]


@pytest.fixture(scope="module")
def on_sim(tmp_path_factory):
    out = tmp_path_factory.mktemp("notebook_sim")
    return run_job(
        Job(model="zoo:conv2d_relu", out_dir=out, eval_samples=2), runner=SimulatorRunner()
    )


@pytest.fixture(scope="module")
def host_only(tmp_path_factory):
    out = tmp_path_factory.mktemp("notebook_host")
    return run_job(Job(model="zoo:conv2d_relu", out_dir=out, eval_samples=2))


def _rounded(row):
    return tuple(f"{v:.2f}" if isinstance(v, float) else v for v in row)


def test_repr_is_short_and_holds_no_arrays(on_sim):
    text = repr(on_sim)
    assert len(text) < 300
    assert text.startswith("<JobResult conv2d_relu on corstone-300 (ethos-u55-128): fused, unfused")
    fused = on_sim.variants["fused"]
    assert repr(fused) == (
        "<VariantResult fused: 1 delegates, 42 NPU ops, 0 CPU ops, 46,448 cycles (simulated), "
        "match host reference>"
    )
    assert repr(fused.run) == "<RunnerRun: sim, 46,448 cycles (simulated), match host reference>"
    assert repr(fused.run.evaluation) == "<Evaluation: 2 samples on sim, SQNR 39.51 dB>"
    assert "array(" not in repr(on_sim) + repr(fused) + repr(fused.run)


def test_summary_rows_are_the_variants_headline_figures(on_sim):
    table = on_sim.summary()
    assert table.columns == SUMMARY_COLUMNS
    assert [_rounded(row) for row in table.rows] == SIM_SUMMARY
    fused = on_sim.variants["fused"]
    assert table.row("fused")["cycles"] == fused.run.evaluation.runs[0].cycles.total_cycles
    assert table.row("fused")["NPU ops"] == fused.program.npu_ops


def test_summary_prints_as_text_and_shows_as_html(on_sim):
    lines = str(on_sim.summary()).splitlines()
    assert lines[0] == "conv2d_relu on corstone-300 (ethos-u55-128), runner sim"
    assert lines[1].split() == ["variant", "cycles", "cycles", "kind", "NPU", "ops", "CPU"] + [
        "ops",
        "SQNR",
        "(dB)",
        "outputs",
    ]
    assert lines[3].split() == ["fused", "46,448", "simulated", "42", "0", "39.51"] + [
        "match",
        "host",
        "reference",
    ]
    page = on_sim._repr_html_()
    assert "<th>cycles kind</th>" in page
    assert "<td>46,448</td><td>simulated</td>" in page


def test_cycles_and_accuracy_are_on_the_variant(on_sim, host_only):
    fused = on_sim.variants["fused"]
    assert fused.cycles is fused.run.evaluation.runs[0].cycles
    assert fused.run.cycles is fused.cycles
    assert fused.accuracy is fused.run.evaluation.accuracy
    # without a runner: Vela's estimate, and the host reference's accuracy
    host = host_only.variants["fused"]
    assert host.cycles.kind == "estimate"
    assert host.cycles.total_cycles == host.program.estimated_total_cycles == 5_408
    assert host.cycles.npu_cycles == 4_832
    assert host.accuracy is host.reference.accuracy
    assert host_only.summary().row("fused")["outputs"] == "host reference only"


def test_a_runner_compared_with_itself_is_not_checked(tmp_path):
    result = run_job(
        Job(model="zoo:conv2d_relu", out_dir=tmp_path, eval_samples=2, variants=("fused",)),
        runner=TosaReferenceRunner(),
    )
    row = result.summary().row("fused")
    assert row["outputs"] == "not checked"
    assert row["cycles kind"] == "estimate"  # the reference model counts no cycles


def test_samples_dataframe(on_sim):
    pytest.importorskip("pandas")
    frame = on_sim.to_dataframe("samples")
    assert list(frame.columns) == [
        "variant",
        "sample",
        "runner",
        "cycles",
        "cycles kind",
        "SQNR (dB)",
        "max diff LSB",
    ]
    assert list(frame["variant"]) == ["fused", "fused", "unfused", "unfused"]
    assert list(frame["sample"]) == [0, 1, 0, 1]
    assert list(frame["max diff LSB"]) == [0.0, 0.0, 0.0, 0.0]
    fused = on_sim.variants["fused"]
    assert list(frame["cycles"][:2]) == [r.cycles.total_cycles for r in fused.run.evaluation.runs]
    # the samples' SQNR, pooled, is the evaluation's: each sample's is at least the worst
    assert min(frame["SQNR (dB)"][:2]) >= fused.accuracy.sqnr_db - 3.0
    assert all(math.isfinite(v) for v in frame["SQNR (dB)"])


def test_layers_dataframe_is_velas_per_layer_estimate(on_sim):
    pytest.importorskip("pandas")
    frame = on_sim.to_dataframe("layers")
    assert list(frame.columns)[:4] == ["variant", "delegate", "layer", "operator"]
    for name, variant in on_sim.variants.items():
        layers = variant.program.delegates[0].estimate.layers
        mine = frame[frame["variant"] == name]
        assert list(mine["npu cycles"]) == [layer.npu_cycles for layer in layers]
        assert int(mine["npu cycles"].sum()) == variant.program.delegates[0].estimate.npu_cycles


def test_variants_dataframe_is_the_summary(on_sim):
    pytest.importorskip("pandas")
    frame = on_sim.to_dataframe()
    assert list(frame.columns) == list(SUMMARY_COLUMNS)
    assert list(frame["cycles"]) == [46_448, 46_084]


def test_without_pandas_a_one_line_user_error_names_the_extra(on_sim, monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(UserError) as caught:
        on_sim.to_dataframe("samples")
    assert str(caught.value) == (
        "tables as DataFrames need pandas: pip install 'ethos-u-toolkit[notebook]'"
    )


def test_an_unknown_kind_is_a_user_error(on_sim):
    with pytest.raises(UserError, match=r"to_dataframe\('cycles'\): give one of variants, "):
        on_sim.to_dataframe("cycles")
