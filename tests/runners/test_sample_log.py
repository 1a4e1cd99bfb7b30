"""Per-sample and per-delegate parsing: a published capture (the per-run PMU block and the
delegation count), and consoles written from ExecuTorch's own format strings for what no
published capture shows yet (server mode, #21913; per-delegate PMU, #22511)."""

from __future__ import annotations

from pathlib import Path

from toolkit.runners.samples import BUNDLE_DONE, SERVER_DONE, SampleLog, segment_details
from toolkit.runners.uart_log import parse_uart_log

REAL_LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "real_logs"
U55_EVENTS = (
    "ETHOSU_PMU_AXI0_RD_DATA_BEAT_RECEIVED, ETHOSU_PMU_AXI1_RD_DATA_BEAT_RECEIVED, "
    "ETHOSU_PMU_AXI0_WR_DATA_BEAT_WRITTEN, ETHOSU_PMU_NPU_IDLE"
)


def _record(message: str, level: str = "I", line: int = 160) -> str:
    """arm_executor_runner.cpp's et_pal_emit_log_message format."""
    return f"{level} [executorch:arm_perf_monitor.cpp:{line} StopMeasurements()] {message}\n"


def _inference(npu: int, delegates: list[tuple[int, int]], n: int) -> str:
    """One server-mode inference: StopMeasurements(1) with per-delegate profiling, then the
    outputs written and the server's marker (format strings of arm_perf_monitor.cpp and
    arm_executor_runner.cpp run_model_server)."""
    text = _record("NPU Inferences : 1")
    text += _record(f"NPU delegations: {len(delegates)} ({len(delegates):.2f} per inference)")
    text += _record("Ethos-U PMU report:")
    text += _record(f"ethosu_pmu_cycle_cntr : {npu} ({npu:.2f} per inference)")
    for k, count in enumerate((100, 200, 300, 4)):
        text += _record(f"ethosu_pmu_cntr{k} : {count} ({count:.2f} per inference)")
    text += _record("Ethos-U per-delegate PMU report:")
    for d, (cycles, axi0) in enumerate(delegates):
        text += _record(f"Ethos-U delegate {d}: 1 backend invocations, 1 NPU invocations")
        text += _record(f"Ethos-U delegate {d} PMU cycles: {cycles}")
        for k, count in enumerate((axi0, 0, 7, 1)):
            text += _record(f"Ethos-U delegate {d} PMU counter {k}: {count}")
    text += _record(f"Ethos-U PMU Events:[{U55_EVENTS}]")
    text += _record("Writing output to file: out-0.bin", line=1166)
    text += _record(f"SERVER_INFERENCE_DONE {n}", line=1391)
    return text


def test_published_capture_delegation_count_and_per_run_pmu():
    data = (REAL_LOGS / "06-tinycnn-fvp-u55-pmu-modern.log").read_bytes()
    log = parse_uart_log(data)
    assert (log.delegations, log.delegates) == (1, ())
    assert log.npu_cycles.total == 247553
    console = SampleLog(SERVER_DONE)  # a one-shot run: no server marker, all in the rest
    console.feed(data)
    assert console.segments == []
    rest = console.rest()
    assert rest.npu_cycles.total == 247553 and rest.complete
    details = segment_details(rest)
    assert details["pmu_counters"]["ETHOSU_PMU_AXI0_RD_DATA_BEAT_RECEIVED"] == 44542
    assert details["delegations"] == 1 and details["delegates"] == []


def test_server_console_is_cut_per_inference_with_per_delegate_figures():
    text = "I [executorch:arm_executor_runner.cpp:1365 run_model_server()] Running in semihosting server mode.\n"
    text += _inference(5000, [(3000, 60), (2000, 40)], 0)
    text += _inference(5100, [(3100, 61), (2000, 40)], 1)
    text += _record("Program complete, exiting.", line=1548)
    console = SampleLog(SERVER_DONE)
    for k in range(0, len(text), 37):  # arrives in pieces, lines cut anywhere
        console.feed(text[k : k + 37].encode())
    first, second = console.segments
    assert (first.number, second.number) == (0, 1)
    assert (first.log.npu_cycles.total, second.log.npu_cycles.total) == (5000, 5100)
    details = segment_details(second.log)
    assert details["delegations"] == 2
    assert [d["npu_cycles"] for d in details["delegates"]] == [3100, 2000]
    assert details["delegates"][0]["counters"] == {
        "ETHOSU_PMU_AXI0_RD_DATA_BEAT_RECEIVED": 61,
        "ETHOSU_PMU_AXI1_RD_DATA_BEAT_RECEIVED": 0,
        "ETHOSU_PMU_AXI0_WR_DATA_BEAT_WRITTEN": 7,
        "ETHOSU_PMU_NPU_IDLE": 1,
    }
    assert first.log.failures == () and console.rest().complete


def test_per_delegate_capacity_overflow_is_a_failure_and_a_flag():
    text = _record("Ethos-U per-delegate PMU report:")
    text += _record("Ethos-U delegate 0 PMU cycles: 10")
    text += _record("Ethos-U per-delegate profiling exceeded its capacity of 8 delegates", "E")
    log = parse_uart_log(text)
    assert [d.npu_cycles for d in log.delegates] == [10]
    assert [f.kind for f in log.failures] == ["error"]


def test_bundle_marker_is_the_runners_verdict_line():
    line = "I [executorch:arm_executor_runner.cpp:1300 verify_result()] TEST: BundleIO index[3] Test_result: PASS"
    assert BUNDLE_DONE.search(line)["n"] == "3"
    failed = "E [executorch:arm_executor_runner.cpp:1308 verify_result()] TEST: BundleIO index[12] Test_result: FAIL"
    assert BUNDLE_DONE.search(failed)["n"] == "12"
    assert SERVER_DONE.search("SERVER_INFERENCE_DONE 41")["n"] == "41"
