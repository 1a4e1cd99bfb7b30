"""`etk log --program`: a capture's printed outputs against the program's host reference."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from toolkit.cli import main

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "stand_ins"))
from board_emulator import output_lines, transcript, zephyr_transcript


@pytest.fixture(scope="module")
def program(compiled):
    return compiled("zoo:conv2d_relu").variants["fused"].program


def reference_outputs(program) -> list[np.ndarray]:
    return [
        np.load(program.out_dir / "reference" / f"output_0_{i}.npy")
        for i in range(len(program.output_specs))
    ]


def etk_log(capsys, capture: Path, program) -> tuple[int, dict]:
    code = main(["log", str(capture), "--program", str(program.out_dir), "--json"])
    return code, json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("form", ["et", "zephyr"])
def test_outputs_equal_to_the_host_reference(tmp_path, capsys, program, form):
    outputs = reference_outputs(program)
    lines = (
        transcript(1000, outputs, passed=True) if form == "et" else zephyr_transcript(1000, outputs)
    )
    capture = tmp_path / "uart.log"
    capture.write_bytes(b"".join(lines))
    code, entry = etk_log(capsys, capture, program)
    assert code == 0 and entry["verdict"] == "ran and passed"
    assert (entry["outputs_match_reference"], entry["max_diff_lsb"], entry["exact_match_rate"]) == (
        True,
        0.0,
        1.0,
    )
    assert entry["details"]["outputs"].startswith(
        f"equal to the host reference of {program.out_dir} (sample 0, max diff 0 LSB)"
    )


def test_one_lsb_off_is_a_mismatch_with_exit_1(tmp_path, capsys, program):
    outputs = reference_outputs(program)
    scale = program.output_quant[0].scale
    flat = outputs[0].reshape(-1)
    k = int(np.argmax(flat))  # a value above the ReLU floor: one step down stays on the grid
    flat[k] = np.float32(flat[k] - np.float32(scale))
    capture = tmp_path / "uart.log"
    capture.write_bytes(b"".join(output_lines(outputs)) + b"Program complete, exiting.\n")
    code, entry = etk_log(capsys, capture, program)
    assert code == 1
    assert entry["status"] == "differ" and entry["outputs_match_reference"] is False
    assert entry["max_diff_lsb"] == pytest.approx(1.0, abs=1e-3)
    assert entry["verdict"].startswith(
        f"ran, outputs differ: differ from the host reference of "
        f"{program.out_dir} (sample 0, max diff 1"
    )


def test_missing_values_are_named_not_compared(tmp_path, capsys, program):
    outputs = reference_outputs(program)
    capture = tmp_path / "uart.log"
    capture.write_bytes(b"".join(output_lines(outputs)[:3]) + b"Program complete, exiting.\n")
    code, entry = etk_log(capsys, capture, program)
    n = outputs[0].size
    assert code == 0 and entry["outputs_match_reference"] is None
    assert entry["details"]["outputs"] == (
        f"cannot compare with the host reference: output 0: 3 of {n} values printed"
    )


def test_measured_cycles_beside_prediction_and_estimate(tmp_path, capsys, program):
    from board_emulator import CPU_CYCLES, NPU_CYCLES, PMU_EVENT_COUNTS

    from toolkit.runners.sim import SimulatorRunner
    from toolkit.targets import load_target

    capture = tmp_path / "uart.log"
    capture.write_bytes(b"".join(transcript(1000, reference_outputs(program), passed=True)))
    code, entry = etk_log(capsys, capture, program)
    check = entry["cycles"]["check"]
    # the prediction without running equals the simulator's figure after a real run
    inputs = [np.load(program.out_dir / "reference" / "input_0_0.npy")]
    simulated = SimulatorRunner(self_check=False).run(program, inputs, load_target("corstone-300"))
    predicted = simulated.cycles.total_cycles
    estimate = sum(d.estimate.total_cycles for d in program.delegates)
    assert check["measured_npu_total"] == NPU_CYCLES
    assert (check["predicted_npu_total"], check["vela_estimate_total"]) == (predicted, estimate)
    assert check["measured_over_predicted"] == round(NPU_CYCLES / predicted, 4)
    assert check["measured_over_vela_estimate"] == round(NPU_CYCLES / estimate, 4)
    # the stand-in's legend: AXI0 read, AXI1 read, AXI0 write, ... (counts 1201, 2302, 3403)
    measured_beats = {"axi0_read": 1201, "axi1_read": 2302, "axi0_write": 3403}
    assert PMU_EVENT_COUNTS[:3] == (1201, 2302, 3403)
    for key, value in simulated.cycles.beats.items():
        assert check["beats"][key] == {
            "measured": measured_beats[key],
            "predicted": value,
            "measured_over_predicted": round(measured_beats[key] / value, 4) if value else None,
        }
    assert main(["log", str(capture), "--program", str(program.out_dir)]) == 0
    text = capsys.readouterr().out
    assert (
        f"  NPU TOTAL measured {NPU_CYCLES:,}; etk prediction {predicted:,} "
        f"(x{NPU_CYCLES / predicted:.3f}); Vela estimate {estimate:,} "
        f"(x{NPU_CYCLES / estimate:.3f})\n"
    ) in text
    assert CPU_CYCLES != NPU_CYCLES and code == 0


def test_the_capture_is_read_for_cycles_once(tmp_path, capsys, program, monkeypatch):
    from board_emulator import NPU_CYCLES

    from toolkit.runners import console_log, uart_log

    calls, measured_cycles = [], uart_log.measured_cycles

    def counted(log, source, note):
        calls.append(source)
        return measured_cycles(log, source, note)

    for module in (console_log, uart_log):  # uart_log: where a lazy import would find it
        monkeypatch.setattr(module, "measured_cycles", counted)
    capture = tmp_path / "uart.log"
    capture.write_bytes(b"".join(transcript(1000, reference_outputs(program), passed=True)))
    code, entry = etk_log(capsys, capture, program)
    assert calls == [f"console log {capture}"]
    assert (entry["cycles"]["npu_cycles"], entry["cycles"]["check"]["measured_npu_total"]) == (
        NPU_CYCLES,
        NPU_CYCLES,
    )
    assert code == 0


def test_exit_code_0_then_the_time_limit_is_a_completed_run(tmp_path):
    """The 2024 semihosting runner prints its exit code, then the FVP runs on to its time
    limit: the program completed."""
    from toolkit.runners.console_log import verdict
    from toolkit.runners.uart_log import parse_uart_log

    done = parse_uart_log(
        "I [executorch:arm_executor_runner.cpp:100 main()] Model executed successfully.\n"
        "Application exit code: 0.\n\n"
        "Info: Simulation is stopping. Reason: CPU time has been exceeded.\n"
    )
    assert done.complete and done.failures == () and verdict(done).text == "ran and passed"
    failed = parse_uart_log("Application exit code: 3.\n")
    assert [str(f) for f in failed.failures] == ["error (line 1): Application exit code: 3."]


def test_a_pmu_only_capture_says_what_was_read():
    from toolkit.runners.console_log import verdict
    from toolkit.runners.uart_log import parse_uart_log

    result = verdict(parse_uart_log("NPU ACTIVE cycles: 12345\nNPU IDLE cycles: 10\n"))
    assert (result.status, result.text) == (
        "read",
        "read cycles; nothing checked (no end, no compared outputs, no test result)",
    )
