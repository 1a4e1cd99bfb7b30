"""--baseline: a doctored baseline must fail with exit 1 and name the regression."""

from __future__ import annotations

import json

from toolkit.bench.results import decode_codes, encode_codes
from toolkit.cli import main


def _doctor(out, tmp_path, change) -> tuple[str, dict]:
    baseline = json.loads((out / "baseline.json").read_text())
    key = sorted(baseline["runs"])[0]
    original = json.loads(json.dumps(baseline["runs"][key]))
    change(baseline["runs"][key])
    path = tmp_path / "BASELINE.json"
    path.write_text(json.dumps(baseline))
    return str(path), {
        "label": original["label"],
        "before": original,
        "after": baseline["runs"][key],
    }


def _scale_cycles(factor):
    def change(run):
        run["cycles"]["run"]["npu_cycles"] = round(run["cycles"]["run"]["npu_cycles"] * factor)

    return change


def test_own_baseline_passes(tiny_bench, capsys):
    suite, out, _ = tiny_bench
    assert (
        main(
            [
                "bench",
                str(suite),
                "--out",
                str(out),
                "--resume",
                "--baseline",
                str(out / "baseline.json"),
            ]
        )
        == 0
    )
    assert "no regression" in capsys.readouterr().err


def test_cycles_raised_beyond_tolerance_exit_1_and_named(tiny_bench, tmp_path, capsys):
    suite, out, _ = tiny_bench
    baseline, run = _doctor(out, tmp_path, _scale_cycles(1 / 1.10))  # now looks 10% slower
    code = main(
        [
            "bench",
            str(suite),
            "--out",
            str(out),
            "--resume",
            "--baseline",
            baseline,
            "--tolerance-cycles",
            "2%",
        ]
    )
    table = capsys.readouterr().out
    now, doctored = (r["cycles"]["run"]["npu_cycles"] for r in (run["before"], run["after"]))
    assert code == 1
    assert "1 regression(s)" in table and run["label"] in table
    row = next(line for line in table.splitlines() if run["label"] in line)
    assert "NPU cycles (simulated, run)" in row and "+2.0%" in row
    assert f"{doctored:,}" in row and f"{now:,}" in row and f"{now / doctored - 1:+.1%}" in row


def test_cycles_within_tolerance_pass(tiny_bench, tmp_path):
    suite, out, _ = tiny_bench
    baseline, _ = _doctor(out, tmp_path, _scale_cycles(1 / 1.01))
    assert (
        main(
            [
                "bench",
                str(suite),
                "--out",
                str(out),
                "--resume",
                "--baseline",
                baseline,
                "--tolerance-cycles",
                "2%",
            ]
        )
        == 0
    )


def test_output_codes_checked_in_lsb(tiny_bench, tmp_path, capsys):
    suite, out, _ = tiny_bench

    def shift_one_code(run):
        codes = decode_codes(run["outputs"][0]["codes"]).copy()
        codes[3] += 1
        run["outputs"][0]["codes"] = encode_codes(codes)

    baseline, _ = _doctor(out, tmp_path, shift_one_code)
    args = ["bench", str(suite), "--out", str(out), "--resume", "--baseline", baseline]
    assert main(args + ["--tolerance-lsb", "0"]) == 1
    assert "1 LSB" in capsys.readouterr().out
    assert main(args + ["--tolerance-lsb", "1"]) == 0


def test_bench_refuses_to_mix_suites_without_resume(tiny_bench, capsys):
    suite, out, _ = tiny_bench
    assert main(["bench", str(suite), "--out", str(out)]) == 2
    assert "--resume" in capsys.readouterr().err
