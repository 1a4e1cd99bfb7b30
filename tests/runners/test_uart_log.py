"""The executor runner's UART log, line by line and as a whole."""

from __future__ import annotations

import pytest

from toolkit.runners.uart_log import Count, LogRecord, UartLogParser, parse_uart_log

RUN = "I [executorch:arm_executor_runner.cpp:{line} main()] {msg}"
PERF = "I [executorch:arm_perf_monitor.cpp:{line} StopMeasurements()] {msg}"

# A U55 run as ExecuTorch 1.5.1's semihosting runner prints it, two inferences.
U55_LOG = (
    "\n".join(
        [
            RUN.format(line=560, msg="Running executor with parameter:"),
            RUN.format(line=566, msg="   executor_runner"),
            RUN.format(line=568, msg="   -m program.pte"),
            RUN.format(line=640, msg="PTE @ 0x70000000 [----ET12]"),
            PERF.format(line=211, msg="NPU Inferences : 2"),
            PERF.format(
                line=236,
                msg="Inference runtime: 13850228 CPU cycles total (6925114.00 per inference)",
            ),
            PERF.format(
                line=240,
                msg="NOTE: CPU cycle values and ratio calculations require FPGA and "
                "identical CPU/NPU frequency",
            ),
            PERF.format(line=266, msg="Ethos-U PMU report:"),
            PERF.format(
                line=271, msg="ethosu_pmu_cycle_cntr : 11840610 (5920305.00 per inference)"
            ),
            PERF.format(line=279, msg="ethosu_pmu_cntr0 : 719842 (359921.00 per inference)"),
            PERF.format(line=279, msg="ethosu_pmu_cntr1 : 0 (0.00 per inference)"),
            PERF.format(line=279, msg="ethosu_pmu_cntr2 : 12 (6.00 per inference)"),
            PERF.format(line=279, msg="ethosu_pmu_cntr3 : 1006 (503.00 per inference)"),
            PERF.format(
                line=318,
                msg="Ethos-U PMU Events:[ETHOSU_PMU_AXI0_RD_DATA_BEAT_RECEIVED, "
                "ETHOSU_PMU_AXI1_RD_DATA_BEAT_RECEIVED, "
                "ETHOSU_PMU_AXI0_WR_DATA_BEAT_WRITTEN, ETHOSU_PMU_NPU_IDLE]",
            ),
            RUN.format(line=900, msg="2 inferences finished"),
            RUN.format(line=1010, msg="Writing output to file: out-0.bin"),
            RUN.format(line=1200, msg="Program complete, exiting."),
        ]
    )
    + "\n"
)


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
    assert log.line_count == len(log.records) == log.record_count == 17
    assert log.records[0] == LogRecord(
        "I", "arm_executor_runner.cpp", 560, "main", "Running executor with parameter:"
    )


def test_log_record_levels_and_older_format_without_function():
    log = parse_uart_log(
        "D [executorch:method.cpp:12 init()] debug text\n"
        "I [executorch:arm_executor_runner.cpp:177] Program complete, exiting.\n"
    )
    assert log.records == (
        LogRecord("D", "method.cpp", 12, "init", "debug text"),
        LogRecord("I", "arm_executor_runner.cpp", 177, "", "Program complete, exiting."),
    )
    assert log.complete


def test_cycle_counter_as_printed_with_and_without_per_inference():
    # "% " PRIu64: the space flag does nothing for an unsigned conversion, so one space
    one_space = parse_uart_log("ethosu_pmu_cycle_cntr : 42 (42.00 per inference)\n")
    assert one_space.npu_cycles == Count(42, 42.0)
    bare = parse_uart_log("ethosu_pmu_cycle_cntr : 7\n")  # older runners: no per-inference
    assert bare.npu_cycles == Count(7, None)


@pytest.mark.parametrize(
    "line, record",
    [
        (
            "I [executorch:main.cpp] Model loaded, has 1 methods",
            LogRecord("I", "main.cpp", None, "", "Model loaded, has 1 methods"),
        ),
        (
            "I executorch:runner.cpp:64] Model executed successfully.",
            LogRecord("I", "runner.cpp", 64, "", "Model executed successfully."),
        ),
        (
            "W [executorch:method.cpp:9 init()] slow",
            LogRecord("W", "method.cpp", 9, "init", "slow"),
        ),
        ("INFO - NPU IDLE: 635 cycles", LogRecord("I", "", None, "", "NPU IDLE: 635 cycles")),
    ],
)
def test_record_forms_of_zephyr_older_runners_and_the_ml_kit(line, record):
    assert parse_uart_log(line + "\n").records == (record,)


def test_ml_kit_pmu_in_both_word_orders_keeps_the_counter_names():
    log = parse_uart_log(
        "INFO - NPU ACTIVE cycles: 1081007\nINFO - NPU IDLE: 626 cycles\n"
        "INFO - NPU AXI0_RD_DATA_BEAT_RECEIVED beats: 628122\n"
    )
    assert [(c.name, c.count) for c in log.pmu_counters] == [
        ("NPU ACTIVE", Count(1081007, None)),
        ("NPU IDLE", Count(626, None)),
        ("NPU AXI0_RD_DATA_BEAT_RECEIVED", Count(628122, None)),
    ]
    assert log.npu_cycles == Count(1081007, None)  # no NPU TOTAL: the active cycles


def test_untyped_and_zephyr_sample_outputs():
    untyped = parse_uart_log(
        "Output[0][0]: -0.749744\nOutput[0][1]: 3\n...(Skipped)\nOutput[0][9]: 1.5\n"
    )
    assert untyped.outputs == ((-0.749744, 3, 1.5),)
    assert untyped.output_indices == ((0, 1, 9),) and untyped.outputs_elided
    zephyr = parse_uart_log(
        "I [executorch:arm_executor_runner.cpp] Model outputs:\n"
        "I [executorch:arm_executor_runner.cpp]   output[0]: tensor scalar_type=Float numel=2\n"
        "I [executorch:arm_executor_runner.cpp]     [0] = 0.250000\n"
        "I [executorch:arm_executor_runner.cpp]     [1] = -1.000000\n"
        "I [executorch:arm_executor_runner.cpp]   output[1]: tensor scalar_type=Char numel=1\n"
        "I [executorch:arm_executor_runner.cpp]     [0] = -128\n"
        "I [executorch:arm_executor_runner.cpp] SUCCESS: Program complete, exiting.\n"
    )
    assert zephyr.outputs == ((0.25, -1.0), (-128,))
    assert zephyr.complete and zephyr.ok


def test_time_limit_after_the_program_ended_is_not_a_failure():
    log = parse_uart_log(
        "Program complete, exiting.\n"
        "Info: Simulation is stopping. Reason: CPU time has been exceeded.\n"
    )
    assert log.ok and log.failures == ()


@pytest.mark.parametrize(
    "banner",
    [
        "PTE @ 0x70000000 [----ET12]",
        "PTE at 0x80000000 Size: 1200 bytes",
        "Model PTE at 0x800774a0, Size: 3380576 bytes",
        "Model in 0x70000000 $",
    ],
)
def test_every_banner_form_counts_and_repeats_as_a_reset(banner):
    line = f"I [executorch:main.cpp] {banner}\n"
    assert parse_uart_log(line).banners == 1
    assert [f.kind for f in parse_uart_log(line + line).failures] == ["reset"]


def test_u85_legend_maps_seven_counters_and_counters_without_legend_keep_their_index():
    counters = "".join(
        f"ethosu_pmu_cntr{i} : {i * 10} ({i * 10}.00 per inference)\n" for i in range(7)
    )
    legend = (
        "Ethos-U PMU Events:[ETHOSU_PMU_SRAM_RD_DATA_BEAT_RECEIVED, "
        "ETHOSU_PMU_SRAM_WR_DATA_BEAT_WRITTEN, ETHOSU_PMU_EXT_RD_DATA_BEAT_RECEIVED, "
        "ETHOSU_PMU_EXT_WR_DATA_BEAT_WRITTEN, ETHOSU_PMU_NPU_IDLE, ETHOSU_PMU_MAC_ACTIVE, "
        "ETHOSU_PMU_WD_ACTIVE]\n"
    )
    log = parse_uart_log(counters + legend)
    assert [c.name for c in log.pmu_counters][4:] == [
        "ETHOSU_PMU_NPU_IDLE",
        "ETHOSU_PMU_MAC_ACTIVE",
        "ETHOSU_PMU_WD_ACTIVE",
    ]
    assert log.pmu_counters[6].count == Count(60, 60.0)
    no_legend = parse_uart_log(counters)
    assert [c.name for c in no_legend.pmu_counters][:2] == ["ethosu_pmu_cntr0", "ethosu_pmu_cntr1"]


def test_output_lines_of_every_type():
    log = parse_uart_log(
        "Output[0][0]: (int) -3\nOutput[0][1]: (int) 127\n"
        "Output[1][0]: (float) 0.250000\n"
        "Output[2][0]: (char) -128\n"
        "Output[3][0]: (bool) true  (0x1)\nOutput[3][1]: (bool) false (0x0)\n"
    )
    assert log.outputs == ((-3, 127), (0.25,), (-128,), (True, False))


def test_bundleio_test_results():
    log = parse_uart_log(
        RUN.format(line=1, msg="TEST: BundleIO index[0] Test_result: PASS")
        + "\n"
        + "E [executorch:arm_executor_runner.cpp:2 verify_result()] TEST: BundleIO index[1] "
        "Test_result: FAIL\n"
    )
    assert log.test_results == (True, False)
    assert [f.kind for f in log.failures] == ["error"]


def test_end_marker_and_eot():
    log = parse_uart_log(
        RUN.format(line=1, msg="Program complete, exiting.")
        + "\n"
        + RUN.format(line=2, msg="\x04")
        + "\n"
    )
    assert log.complete and log.eot and log.ok
    assert all("\x04" not in line for line in log.tail_lines)


@pytest.mark.parametrize(
    "line, kind",
    [
        ("E [executorch:method.cpp:1375 execute()] KernelCall failed", "error"),
        (
            "F [executorch:arm_executor_runner.cpp:520 run_model()] In function run_model(), "
            "assert failed (status == Error::Ok)",
            "fatal",
        ),
        ("Hard fault. irq=-13, pc=0x1000c2a4", "hard-fault"),
        ("Assertion failed: (x), function f, file a.c, line 3.", "assertion"),
        ("Info: Simulation is stopping. Reason: CPU time has been exceeded.", "time-limit"),
        ("Error: (E549) Cannot open file 'program.pte'", "simulator"),
        ("[critical ] ethosu: illegal command stream", "simulator"),
        ("ERROR - Failed to initialise the NPU", "error"),
    ],
)
def test_failure_markers(line, kind):
    log = parse_uart_log(
        RUN.format(line=1, msg="PTE @ 0x70000000 [----ET12]")
        + "\n"
        + line
        + "\n"
        + RUN.format(line=2, msg="Program complete, exiting.")
        + "\n"
    )
    assert [(f.kind, f.line_no, f.text) for f in log.failures] == [(kind, 2, line)]
    assert not log.ok


def test_lines_merely_mentioning_errors_are_not_failures():
    log = parse_uart_log(RUN.format(line=1, msg="Error stats: 0 errors") + "\nEverything fine\n")
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
    assert log.tail_lines[2] == "ok"


def test_incremental_feed_matches_whole_text_even_across_multibyte_characters():
    data = (U55_LOG + "I [executorch:a.cpp:1 f()] 5 \u00b5s\r\n").encode()
    parser = UartLogParser()
    for i in range(len(data)):
        parser.feed(data[i : i + 1])
    incremental = parser.finish()
    assert incremental == parse_uart_log(data)
    assert incremental.garbled_bytes == 0
    assert incremental.tail_lines[-1] == "I [executorch:a.cpp:1 f()] 5 \u00b5s"  # CR stripped


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
    assert log.complete and log.tail_lines == ("Program complete, exiting.",)


def test_tail_gives_the_last_lines():
    log = parse_uart_log("".join(f"line {i}\n" for i in range(30)))
    assert log.tail(3) == "line 27\nline 28\nline 29"


def test_output_line_cut_short_is_no_value():
    # a disconnect or reset mid-line leaves "Output[0][5]: (f": not a value, and no crash
    log = parse_uart_log(b"Output[0][4]: (float) -1.5e-03\nOutput[0][5]: (f\n[1] = 2.0x\n")
    assert log.outputs == ((-0.0015,),)


# A capture's figures are held to what a runner can print: memory and time stay linear in the
# capture's size, and a figure no runner prints is a "damaged" failure, never taken as a result.
@pytest.mark.parametrize(
    "capture, failure",
    [
        (
            "Output[9999999][0]: (float) 1.0",
            "damaged (line 1): output index 9999999 is far past the 0 printed before it: "
            "Output[9999999][0]: (float) 1.0",
        ),
        (
            "Output[0][9999999999]: (float) 1.0",
            "damaged (line 1): value index 9999999999 is far past the 0 printed before it: "
            "Output[0][9999999999]: (float) 1.0",
        ),
        (
            "Output[0][0]: (int) " + "9" * 100_000,
            "damaged (line 1): integer value 999999999999999999999999... has 100000 digits: "
            "Output[0][0]: (int) " + "9" * 60,
        ),
        (
            "ethosu_pmu_cycle_cntr : " + "9" * 400 + "\nProgram complete, exiting.",
            "damaged (line 1): counter 999999999999999999999999... is past 64 bits: "
            "ethosu_pmu_cycle_cntr : " + "9" * 56,
        ),
        (
            "ethosu_pmu_cycle_cntr : " + "1" * 23 + "\nProgram complete, exiting.",
            "damaged (line 1): counter 11111111111111111111111 is past 64 bits: "
            "ethosu_pmu_cycle_cntr : " + "1" * 23,
        ),
        (
            "ethosu_pmu_cycle_cntr : 1000\nNPU Inferences : 0\nProgram complete, exiting.",
            "damaged (line 3): cycle counts over 0 inferences (NPU Inferences : 0)",
        ),
        (
            "Inference completed in 1.2.3 ms",
            "damaged (line 1): inference time 1.2.3 is not a number: "
            "Inference completed in 1.2.3 ms",
        ),
    ],
)
def test_implausible_figures_are_named_not_passed(capture, failure):
    log = parse_uart_log(capture)
    assert [str(f) for f in log.failures] == [failure]
    assert (
        not log.ok
        and log.outputs == ()
        and log.npu_cycles is None
        or (failure.endswith("(NPU Inferences : 0)") and log.npu_cycles.total == 1000)
    )


def test_a_capture_of_indices_far_apart_stays_small():
    """Lines whose value indices step 4000 apart: the second is within reach of the first
    (4096), the rest are damaged, so what is kept grows with the lines, not the indices."""
    lines = "".join(f"Output[0][{k * 4000}]: (int) 1\n" for k in range(2000))
    log = parse_uart_log(lines)
    assert len(log.outputs[0]) == 2 and log.failures[0].text.startswith("value index 8000")
