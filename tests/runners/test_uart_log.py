"""The executor runner's UART log, line by line and as a whole."""

from __future__ import annotations

import pytest

from toolkit.runners.uart_log import Count, LogRecord, UartLogParser, parse_uart_log

RUN = "I [executorch:arm_executor_runner.cpp:{line} main()] {msg}"
PERF = "I [executorch:arm_perf_monitor.cpp:{line} StopMeasurements()] {msg}"

# A U55 run as ExecuTorch 1.5.1's semihosting runner prints it, two inferences.
U55_LOG = "\n".join([
    RUN.format(line=560, msg="Running executor with parameter:"),
    RUN.format(line=566, msg="   executor_runner"),
    RUN.format(line=568, msg="   -m program.pte"),
    RUN.format(line=640, msg="PTE @ 0x70000000 [----ET12]"),
    PERF.format(line=211, msg="NPU Inferences : 2"),
    PERF.format(line=236, msg="Inference runtime: 13850228 CPU cycles total "
                              "(6925114.00 per inference)"),
    PERF.format(line=240, msg="NOTE: CPU cycle values and ratio calculations require FPGA and "
                              "identical CPU/NPU frequency"),
    PERF.format(line=266, msg="Ethos-U PMU report:"),
    PERF.format(line=271, msg="ethosu_pmu_cycle_cntr :  11840610 (5920305.00 per inference)"),
    PERF.format(line=279, msg="ethosu_pmu_cntr0 : 719842 (359921.00 per inference)"),
    PERF.format(line=279, msg="ethosu_pmu_cntr1 : 0 (0.00 per inference)"),
    PERF.format(line=279, msg="ethosu_pmu_cntr2 : 12 (6.00 per inference)"),
    PERF.format(line=279, msg="ethosu_pmu_cntr3 : 1006 (503.00 per inference)"),
    PERF.format(line=318, msg="Ethos-U PMU Events:[ETHOSU_PMU_AXI0_RD_DATA_BEAT_RECEIVED, "
                              "ETHOSU_PMU_AXI1_RD_DATA_BEAT_RECEIVED, "
                              "ETHOSU_PMU_AXI0_WR_DATA_BEAT_WRITTEN, ETHOSU_PMU_NPU_IDLE]"),
    RUN.format(line=900, msg="2 inferences finished"),
    RUN.format(line=1010, msg="Writing output to file: out-0.bin"),
    RUN.format(line=1200, msg="Program complete, exiting."),
]) + "\n"


def test_whole_u55_log():
    log = parse_uart_log(U55_LOG)
    assert log.ok and log.complete and not log.eot
    assert log.banners == 1 and log.garbled_bytes == 0
    assert log.inferences == 2
    assert log.npu_cycles == Count(11840610, 5920305.0)
    assert log.cpu_cycles == Count(13850228, 6925114.0)
    assert [(c.index, c.name, c.count.total, c.count.per_inference) for c in log.pmu_counters] == [
        (0, "ETHOSU_PMU_AXI0_RD_DATA_BEAT_RECEIVED", 719842, 359921.0),
        (1, "ETHOSU_PMU_AXI1_RD_DATA_BEAT_RECEIVED", 0, 0.0),
        (2, "ETHOSU_PMU_AXI0_WR_DATA_BEAT_WRITTEN", 12, 6.0),
        (3, "ETHOSU_PMU_NPU_IDLE", 1006, 503.0),
    ]
    assert len(log.lines) == len(log.records) == 17
    assert log.records[0] == LogRecord("I", "arm_executor_runner.cpp", 560, "main",
                                       "Running executor with parameter:")


def test_log_record_levels_and_older_format_without_function():
    log = parse_uart_log(
        "D [executorch:method.cpp:12 init()] debug text\n"
        "I [executorch:arm_executor_runner.cpp:177] Program complete, exiting.\n")
    assert log.records == (LogRecord("D", "method.cpp", 12, "init", "debug text"),
                           LogRecord("I", "arm_executor_runner.cpp", 177, "",
                                     "Program complete, exiting."))
    assert log.complete


def test_cycle_counter_needs_the_two_space_format_and_tolerates_none_per_inference():
    two_spaces = parse_uart_log("ethosu_pmu_cycle_cntr :  42 (42.00 per inference)\n")
    assert two_spaces.npu_cycles == Count(42, 42.0)
    bare = parse_uart_log("ethosu_pmu_cycle_cntr : 7\n")  # older runners: printf, no per-inference
    assert bare.npu_cycles == Count(7, None)


def test_u85_legend_maps_seven_counters_and_counters_without_legend_keep_their_index():
    counters = "".join(f"ethosu_pmu_cntr{i} : {i * 10} ({i * 10}.00 per inference)\n"
                       for i in range(7))
    legend = ("Ethos-U PMU Events:[ETHOSU_PMU_SRAM_RD_DATA_BEAT_RECEIVED, "
              "ETHOSU_PMU_SRAM_WR_DATA_BEAT_WRITTEN, ETHOSU_PMU_EXT_RD_DATA_BEAT_RECEIVED, "
              "ETHOSU_PMU_EXT_WR_DATA_BEAT_WRITTEN, ETHOSU_PMU_NPU_IDLE, ETHOSU_PMU_MAC_ACTIVE, "
              "ETHOSU_PMU_WD_ACTIVE]\n")
    log = parse_uart_log(counters + legend)
    assert [c.name for c in log.pmu_counters][4:] == [
        "ETHOSU_PMU_NPU_IDLE", "ETHOSU_PMU_MAC_ACTIVE", "ETHOSU_PMU_WD_ACTIVE"]
    assert log.pmu_counters[6].count == Count(60, 60.0)
    no_legend = parse_uart_log(counters)
    assert [c.name for c in no_legend.pmu_counters][:2] == ["ethosu_pmu_cntr0", "ethosu_pmu_cntr1"]


def test_output_lines_of_every_type():
    log = parse_uart_log(
        "Output[0][0]: (int) -3\nOutput[0][1]: (int) 127\n"
        "Output[1][0]: (float) 0.250000\n"
        "Output[2][0]: (char) -128\n"
        "Output[3][0]: (bool) true  (0x1)\nOutput[3][1]: (bool) false (0x0)\n")
    assert log.outputs == ((-3, 127), (0.25,), (-128,), (True, False))


def test_bundleio_test_results():
    log = parse_uart_log(
        RUN.format(line=1, msg="TEST: BundleIO index[0] Test_result: PASS") + "\n"
        + "E [executorch:arm_executor_runner.cpp:2 verify_result()] TEST: BundleIO index[1] "
          "Test_result: FAIL\n")
    assert log.test_results == (True, False)
    assert [f.kind for f in log.failures] == ["error"]


def test_end_marker_and_eot():
    log = parse_uart_log(RUN.format(line=1, msg="Program complete, exiting.") + "\n"
                         + RUN.format(line=2, msg="\x04") + "\n")
    assert log.complete and log.eot and log.ok
    assert all("\x04" not in line for line in log.lines)


@pytest.mark.parametrize("line, kind", [
    ("E [executorch:method.cpp:1375 execute()] KernelCall failed", "error"),
    ("F [executorch:arm_executor_runner.cpp:520 run_model()] In function run_model(), "
     "assert failed (status == Error::Ok)", "fatal"),
    ("Hard fault. irq=-13, pc=0x1000c2a4", "hard-fault"),
    ("Assertion failed: (x), function f, file a.c, line 3.", "assertion"),
    ("Info: Simulation is stopping. Reason: CPU time has been exceeded.", "time-limit"),
])
def test_failure_markers(line, kind):
    log = parse_uart_log(RUN.format(line=1, msg="PTE @ 0x70000000 [----ET12]") + "\n" + line
                         + "\n" + RUN.format(line=2, msg="Program complete, exiting.") + "\n")
    assert [(f.kind, f.line_no, f.text) for f in log.failures] == [(kind, 2, line)]
    assert not log.ok


def test_lines_merely_mentioning_errors_are_not_failures():
    log = parse_uart_log(RUN.format(line=1, msg="Error stats: 0 errors") + "\n"
                         "Everything fine\n")
    assert log.failures == ()


def test_second_banner_is_a_reset():
    banner = RUN.format(line=640, msg="PTE @ 0x70000000 [----ET12]") + "\n"
    log = parse_uart_log(banner + "some output\n" + banner)
    assert log.banners == 2
    assert [(f.kind, f.line_no) for f in log.failures] == [("reset", 3)]


def test_garbled_bytes_are_counted_and_flagged():
    log = parse_uart_log(b"I [executorch:a.cpp:1 f()] fine\n\xff\xfe\x80garbage\x01\nok\n")
    assert log.garbled_bytes == 4
    assert [(f.kind, f.line_no) for f in log.failures] == [("garbled", 2)]
    assert log.lines[2] == "ok"


def test_incremental_feed_matches_whole_text_even_across_multibyte_characters():
    data = (U55_LOG + "I [executorch:a.cpp:1 f()] 5 \u00b5s\r\n").encode()
    parser = UartLogParser()
    for i in range(len(data)):
        parser.feed(data[i:i + 1])
    incremental = parser.finish()
    assert incremental == parse_uart_log(data)
    assert incremental.garbled_bytes == 0
    assert incremental.lines[-1] == "I [executorch:a.cpp:1 f()] 5 \u00b5s"  # CR stripped


def test_halted_after_end_marker_or_hard_fault_and_last_line_without_newline():
    parser = UartLogParser()
    parser.feed(b"PTE @ 0x70000000 [----ET12]\nrunning")
    assert not parser.halted
    parser.feed(b"\nHard fault\n")
    assert parser.halted
    ended = UartLogParser()
    ended.feed("Program complete, exiting.")
    assert not ended.halted  # the line is not finished yet
    log = ended.finish()
    assert log.complete and log.lines == ("Program complete, exiting.",)


def test_tail_gives_the_last_lines():
    log = parse_uart_log("".join(f"line {i}\n" for i in range(30)))
    assert log.tail(3) == "line 27\nline 28\nline 29"
