"""etk deploy end to end: through the FVP stand-in, and with no FVP on the next runner in line."""

from __future__ import annotations

import json
import shutil

import numpy as np

from toolkit.cli import main
from toolkit.evaluation.cycle_check import predict_program
from toolkit.lower.program_store import load_stored_program
from toolkit.runners.select import select_runner
from toolkit.targets import load_target


def test_deploy_through_fvp_stand_in(fvp_env, fake_fvp, tmp_path, monkeypatch, capsys):
    NPU_CYCLES, PMU_EVENT_COUNTS = fake_fvp.NPU_CYCLES, fake_fvp.PMU_EVENT_COUNTS
    # 1. the host reference for one evaluation input, which the stand-in will echo back
    host = tmp_path / "host"
    assert main(["compare", "zoo:conv2d_relu", "--eval-samples", "1", "-o", str(host)]) == 0
    for variant in ("fused", "unfused"):
        ref = tmp_path / f"ref-{variant}"
        ref.mkdir()
        shutil.copy(host / variant / "reference" / "output_0_0.npy", ref / "out-0.npy")
    # 2. deploy each variant on the "FVP" (the stand-in under the real binary name)
    for variant, fusion in (("fused", "on"), ("unfused", "off")):
        monkeypatch.setenv("ETK_FAKE_FVP_REFERENCE", str(tmp_path / f"ref-{variant}"))
        out = tmp_path / f"deploy-{variant}"
        code = main(
            [
                "deploy",
                "zoo:conv2d_relu",
                "--runner",
                "fvp",
                "--fusion",
                fusion,
                "--eval-samples",
                "1",
                "-o",
                str(out),
            ]
        )
        assert code == 0
        report = json.loads((out / "report.json").read_text())
        run = report["variants"][variant]["run"]
        assert run["runner"] == "fvp"
        assert run["cycles"]["kind"] == "measured"
        assert run["cycles"]["source"] == "FVP PMU ethosu_pmu_cycle_cntr"
        assert run["outputs_match_reference"] is True and run["max_diff_lsb"] == 0.0
        # the measurement beside etk's prediction and Vela's estimate of the same program
        check = run["cycles"]["check"]
        predicted = predict_program(load_stored_program(out / variant)).total_cycles
        estimate = report["variants"][variant]["estimate"]["total_cycles"]
        assert check["measured_npu_total"] == NPU_CYCLES
        assert (check["predicted_npu_total"], check["vela_estimate_total"]) == (predicted, estimate)
        assert check["measured_over_predicted"] == round(NPU_CYCLES / predicted, 4)
        assert check["beats"]["axi0_read"]["measured"] == PMU_EVENT_COUNTS[0]
        text = capsys.readouterr().out
        assert f"{NPU_CYCLES / predicted:.3f}x" in text and "NPU TOTAL (etk prediction)" in text
        run_dir = out / variant / f"fvp-{variant}"
        assert (run_dir / "program.pte").read_bytes() == (out / variant / "model.pte").read_bytes()
        saved = np.load(out / variant / "run_fvp" / "output_0_0.npy")
        assert np.array_equal(saved, np.load(host / variant / "reference" / "output_0_0.npy"))
        # report.html beside report.json, with the run's measurement; etk report makes it again
        html = out / "report.html"
        written = html.read_text()
        assert f"measured NPU cycles: {NPU_CYCLES:,}" in written
        html.unlink()
        assert main(["report", str(out), "--html"]) == 0
        assert html.read_text() == written


def test_auto_runner_without_fvp_says_why(monkeypatch, tmp_path):
    monkeypatch.setenv("ETK_FVP_PATH", str(tmp_path))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.delenv("ETK_RUNNER_ELF", raising=False)
    target = load_target("corstone-300")
    runner, note = select_runner("auto", target, target.npu())
    assert runner.name == "sim"
    assert note.startswith("sim: etk simulator")
    assert "not fvp: FVP binary FVP_Corstone_SSE-300_Ethos-U55 not found" in note
    runner, note = select_runner(
        "auto", load_target("corstone-320"), load_target("corstone-320").npu()
    )
    assert runner.name == "sim"  # the simulator runs Ethos-U85 too (issue 47)
    assert note.startswith("sim: etk simulator")


def test_deploy_on_simulator_matches_host_reference_fused_and_unfused(compiled, tmp_path):
    from toolkit.job import Job
    from toolkit.pipeline import run_job
    from toolkit.runners.sim import SimulatorRunner

    result = run_job(
        Job(model="zoo:conv2d_bn_relu6", out_dir=tmp_path, eval_samples=2), runner=SimulatorRunner()
    )
    for variant in ("fused", "unfused"):
        device = result.variants[variant].run
        assert device.outputs_match_reference and device.exact_match_rate == 1.0
        assert device.evaluation.runs[0].cycles.kind == "simulated"
    fused, unfused = (
        result.variants[v].run.evaluation.runs[0].cycles.npu_cycles for v in ("fused", "unfused")
    )
    assert fused == unfused > 0  # same NPU operations, same simulated cycles


def test_a_run_on_the_tosa_reference_model_is_not_called_checked(tmp_path):
    """Issue 45 item 3: on the TOSA reference runner (--runner tosa-ref) the runner is the host
    reference itself;
    comparing it with itself checks nothing, and its cycles are Vela's estimate over itself."""
    from toolkit.job import Job
    from toolkit.pipeline import run_job
    from toolkit.report.job_report import report_dict
    from toolkit.report.tables import notes, rows
    from toolkit.runners.tosa_ref import NOT_CHECKED, TosaReferenceRunner

    result = run_job(
        Job(model="zoo:conv2d_relu", target="corstone-320", out_dir=tmp_path, eval_samples=2),
        runner=TosaReferenceRunner(),
    )
    run = report_dict(result)["variants"]["fused"]["run"]
    assert (run["outputs_match_reference"], run["max_diff_lsb"]) == (None, None)
    assert run["not_checked"] == NOT_CHECKED
    assert "total_over_vela_estimate" not in run["cycles"]
    table = {row[0]: row[1:] for row in rows(result)[1]}
    assert table["outputs == host reference"][:2] == ["not checked", "not checked"]
    assert not any("/ Vela estimate" in label for label in table)
    assert "max diff vs host reference (LSB)" not in table
    assert f"Outputs {NOT_CHECKED}" in notes(result)
