"""Real console logs (tests/fixtures/real_logs/, sources in its README) through `etk log --json`.

Each expectation is the README's "a correct parser should extract" column for that log.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolkit.cli import main

REAL_LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "real_logs"

EXPECTED = {
    "01-et-docs-mv2-u55-pmu-2024.log": {
        "status": "passed",
        "npu": 5920305,
        "cpu": 6925114,
        "counters": {
            "ETHOSU_PMU_EXT0_RD_DATA_BEAT_RECEIVED": 359921,
            "ETHOSU_PMU_EXT1_RD_DATA_BEAT_RECEIVED": 0,
            "ETHOSU_PMU_EXT0_WR_DATA_BEAT_WRITTEN": 0,
            "ETHOSU_PMU_NPU_IDLE": 503,
        },
        "beats": {},  # EXT0/EXT1 are not the AXI0/AXI1 counters' names: kept raw only
        "outputs_head": [-0.749744, -0.019224, 0.134570],
        "elided": True,
        "complete": True,
    },
    "05-et-issue7568-semihosting-timelimit-excerpt.log": {
        "status": "failed",
        "npu": None,
        "cpu": None,
        "counters": {},
        "beats": {},
        "outputs_head": [],
        "reason": "Info: Simulation is stopping. Reason: CPU time has been exceeded.",
        "complete": False,
    },
    "06-tinycnn-fvp-u55-pmu-modern.log": {
        "status": "passed",
        "npu": 247553,
        "cpu": 1070301,
        "counters": {
            "ETHOSU_PMU_AXI0_RD_DATA_BEAT_RECEIVED": 44542,
            "ETHOSU_PMU_AXI1_RD_DATA_BEAT_RECEIVED": 3629,
            "ETHOSU_PMU_AXI0_WR_DATA_BEAT_WRITTEN": 42419,
            "ETHOSU_PMU_NPU_IDLE": 501,
        },
        "beats": {"axi0_read": 44542, "axi0_write": 42419, "axi1_read": 3629},
        "outputs_head": [-0.020373, 0.067080, -0.059627, 0.062111],
        "banners": 1,
        "complete": True,
    },
    "09-et-issue7177-rp2040-board-mv2-alloc-fatal.log": {
        "status": "failed",
        "npu": None,
        "cpu": None,
        "counters": {},
        "beats": {},
        "outputs_head": [],
        "reason": "E [executorch:memory_allocator.h:88] Memory allocation failed: 1785600B "
        "requested (adjusted for alignment), 1024B available",
        "failure_kinds": ["error", "error", "fatal"],
        "complete": False,
    },
    "11-et-docs-alif-e8-zephyr-mv2-board.log": {  # no end marker, nothing to check it by
        "status": "read",
        "verdict": "read top classes and an inference time; nothing checked (no end, no "
        "compared outputs, no test result)",
        "npu": None,
        "cpu": None,
        "counters": {},
        "beats": {},
        "outputs_head": [],
        "inference_ms": 30.0,
        "top_classes": [92, 21, 127, 22, 18],
        "banners": 1,
        "complete": False,
    },
    "13-alif-mlek-e8-kws-board-pmu.log": {  # an ML kit profile block only
        "status": "read",
        "verdict": "read cycles; nothing checked (no end, no compared outputs, no test result)",
        "npu": 405608,
        "cpu": None,
        "counters": {
            "NPU ACTIVE": 404973,
            "NPU AXI0_RD_DATA_BEAT_RECEIVED": 125388,
            "NPU AXI0_WR_DATA_BEAT_WRITTEN": 48254,
            "NPU AXI1_RD_DATA_BEAT_RECEIVED": 17493,
            "NPU IDLE": 635,
            "NPU TOTAL": 405608,
        },
        "beats": {"axi0_read": 125388, "axi0_write": 48254, "axi1_read": 17493},
        "outputs_head": [],
        "complete": False,
    },
}


def etk_log(capsys, *args) -> tuple[int, str, str]:
    code = main(["log", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def test_every_real_log_has_an_expectation():
    assert sorted(p.name for p in REAL_LOGS.glob("*.log")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_real_log_parses_to_the_readme_row(capsys, name):
    want = EXPECTED[name]
    code, out, _ = etk_log(capsys, REAL_LOGS / name, "--json")
    entry = json.loads(out)

    assert code == (0 if want["status"] in ("passed", "read") else 1)
    assert (entry["runner"], entry["status"]) == ("log", want["status"])
    cycles = entry["cycles"]
    assert cycles["kind"] == ("measured" if want["npu"] or want["cpu"] else "none")
    assert (cycles["npu_cycles"], cycles["cpu_cycles"]) == (want["npu"], want["cpu"])
    assert cycles["counters"] == want["counters"]
    assert cycles["beats"] == want["beats"]
    details = entry["details"]
    printed = details["printed_outputs"][0] if details["printed_outputs"] else []
    assert printed[: len(want["outputs_head"])] == want["outputs_head"]
    assert details["complete"] is want["complete"]
    if want["status"] == "passed":
        assert entry["verdict"] == "ran and passed" and details["failures"] == []
    elif want["status"] == "read":
        assert entry["verdict"] == want["verdict"] and details["failures"] == []
    else:
        assert entry["verdict"] == f"failed: {want['reason']}"
        assert entry["reason"] == want["reason"]
    if "elided" in want:
        assert details["outputs_elided"] is True
        assert details["output_indices"][0] == [0, 1, 2, 996, 997, 998, 999]
    if "banners" in want:
        assert details["banners"] == want["banners"]
    if "failure_kinds" in want:
        assert [f.split(" ")[0] for f in details["failures"]] == want["failure_kinds"]
        assert details["failures"][-1].endswith("assert failed: hasValue_")
    if "inference_ms" in want:
        assert details["inference_ms"] == want["inference_ms"]
        assert [c for c, _ in details["top_classes"]] == want["top_classes"]


def test_log_without_a_run_exits_2_with_one_line(capsys, tmp_path):
    capture = tmp_path / "build.txt"
    capture.write_text("[100%] Built target arm_executor_runner\nexecutable_text: 203592 bytes\n")
    code, out, err = etk_log(capsys, capture)
    assert code == 2 and out == ""
    assert err == (
        f"etk: error: {capture} holds no run: none of its 2 lines is an ExecuTorch or "
        f"ML-kit log record, PMU report, output or failure; pass the firmware's console "
        f"capture (UART or FVP output)\n"
    )


def test_failing_run_exits_1_naming_the_firmwares_error_line(capsys):
    code, out, _ = etk_log(capsys, REAL_LOGS / "09-et-issue7177-rp2040-board-mv2-alloc-fatal.log")
    assert code == 1
    assert out.splitlines()[0].endswith(
        ": failed: E [executorch:memory_allocator.h:88] Memory allocation failed: 1785600B "
        "requested (adjusted for alignment), 1024B available"
    )


def test_a_run_that_stops_midway_is_hung_after_its_last_line(capsys, tmp_path):
    capture = tmp_path / "uart.txt"
    lines = (REAL_LOGS / "11-et-docs-alif-e8-zephyr-mv2-board.log").read_text().splitlines()
    capture.write_text("\n".join(lines[:19]) + "\n")  # up to "--- Starting inference ---"
    code, out, _ = etk_log(capsys, capture, "--json")
    entry = json.loads(out)
    assert code == 1
    assert entry["verdict"] == "hung after --- Starting inference ---"


def test_terminal_summary_of_a_zephyr_board_log(capsys):
    path = REAL_LOGS / "11-et-docs-alif-e8-zephyr-mv2-board.log"
    code, out, _ = etk_log(capsys, path)
    assert code == 0
    assert out.splitlines() == [
        f"{path}: read top classes and an inference time; nothing checked (no end, no "
        "compared outputs, no test result)",
        "  top classes: 92, 21, 127, 22, 18",
        "  inference: 30 ms (as the firmware timed it)",
    ]
