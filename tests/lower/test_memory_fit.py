"""SRAM: the peak use and the arena are reported as such, and a program that cannot fit the
target's SRAM is refused before anything runs."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

from toolkit.cli import main

USER = Path(__file__).parents[1] / "fixtures" / "user_models.py"


def test_sram_used_and_arena_are_vela_s_figures(compiled):
    result = compiled("zoo:conv2d_relu")
    program = result.variants["fused"].program
    report = json.loads(result.report_path.read_text())
    estimate = report["variants"]["fused"]["estimate"]
    summary_csv = next((program.out_dir / "vela_delegate0").glob("*_summary_*.csv"))
    with open(summary_csv, newline="") as handle:
        summary = next(csv.DictReader(handle))
    assert estimate["sram_used_bytes"] == round(float(summary["sram_memory_used"]) * 1024)
    assert estimate["sram_traffic_bytes"] == int(summary["sram_total_bytes"])
    # Shared_Sram: the scratch arena is all the program keeps in SRAM (Vela 5.1.0: 4 KiB here)
    assert estimate["sram_used_bytes"] == estimate["arena_bytes"] == 4096
    assert "sram_bytes" not in estimate and report["schema"] == 2


def test_a_program_too_big_for_the_target_is_refused_before_it_runs(tmp_path, capsys):
    out = tmp_path / "out"
    code = main(
        [
            "compile",
            f"{USER}:SmallNet",
            "--input-shape",
            "1,3,600,600",
            "--io-layout",
            "nhwc",
            "--calibration-samples",
            "2",
            "--eval-samples",
            "1",
            "-o",
            str(out),
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 2
    # 600x600x3 input + 600x600x4 output, int8, both in SRAM (Shared_Sram): 2,520,000 and a
    # few bytes Vela adds (which vary with the graph's node names)
    found = re.fullmatch(
        r"etk: error: fused needs ([\d,]+) bytes of SRAM \(Vela's peak SRAM use, delegate 0; "
        r"arena ([\d,]+) bytes\) but corstone-300 has 2,097,152 \(memory.sram_bytes in "
        r"corstone-300.toml\): use a smaller input or a target with more SRAM",
        err,
    )
    assert found and found.group(1) == found.group(2)
    assert 2_520_000 <= int(found.group(1).replace(",", "")) < 2_521_000
    assert not (out / "fused" / "reference").exists() and not (out / "report.json").exists()
