"""Captures whose lines end in a lone CR, and outputs printed twice.

On main a CR-only capture was one line: "Program complete, exiting." somewhere in it made the run
"ran and passed" with nothing read (no cycles, no outputs); and a second, different value for
Output[0][0] silently replaced the first.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from toolkit.runners.console_log import console_cycles, run_entry
from toolkit.runners.uart_log import UartLogParser, parse_uart_log

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "stand_ins"))
from board_emulator import transcript


def _entry(data: bytes) -> dict:
    log = parse_uart_log(data)
    entry = run_entry(log, Path("capture.log"), console_cycles(log, Path("capture.log")))
    return {**entry, "details": {**entry["details"], "log": ""}}


@pytest.mark.parametrize("ending", [b"\r", b"\r\n", b"\r\r\n"])
def test_a_capture_with_other_line_ends_reads_as_with_lf(ending):
    lines = b"".join(transcript(1000, [np.arange(-3, 5, dtype=np.int8)], passed=True))
    lines = lines.replace(b"\r\n", b"\n")  # the emulator's UART writes CR LF
    with_lf = _entry(lines)
    assert with_lf["verdict"] == "ran and passed" and with_lf["cycles"]["kind"] == "measured"
    assert _entry(lines.replace(b"\n", ending)) == with_lf


def test_a_cr_lf_split_across_chunks_is_one_line_end():
    text = b"I [executorch:a.cpp:1 f()] one\r\nI [executorch:a.cpp:2 f()] two\r\n"
    parser = UartLogParser()
    for k in range(len(text)):
        parser.feed(text[k : k + 1])
    log = parser.finish()
    assert log.line_count == 2 and [r.message for r in log.records] == ["one", "two"]


def test_two_values_for_one_output_are_a_damaged_line():
    log = parse_uart_log(
        "Output[0][0]: (float) 0.5\n"
        "Output[0][1]: (float) 0.25\n"
        "Output[0][0]: (float) 0.75\n"
        "Output[0][1]: (float) 0.25\n"
        "Program complete, exiting.\n"
    )
    assert [str(f) for f in log.failures] == [
        "damaged (line 3): Output[0][0] printed twice, 0.5 then 0.75: Output[0][0]: (float) 0.75"
    ]
    assert log.outputs == ((0.5, 0.25),)
    assert run_entry(log, Path("c.log"), console_cycles(log, Path("c.log")))["status"] == "failed"
