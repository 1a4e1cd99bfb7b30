"""Parse what Ethos-U firmware prints on its console: ExecuTorch runners and Arm's ML kits.

Shared by the FVP runner, the serial-board runner and `etk log`. Feed bytes as they arrive
(`UartLogParser.feed`, `finish`) or parse a whole capture (`parse_uart_log`). Every line is read
from the start of the capture: a banner is information, not a gate. The result is a frozen
`UartLog`: log records, PMU and CPU cycle figures, printed outputs, BundleIO test results, the
end marker and failure markers.

Formats read (from ExecuTorch's sources and published logs, tests/fixtures/real_logs/):
  log records   I [executorch:arm_executor_runner.cpp:287 main()] msg     (1.x bare-metal runner)
                I [executorch:main.cpp] msg                              (Zephyr samples)
                I executorch:runner.cpp:64] msg                          (older runners)
                INFO - msg / ERROR - msg                                 (ML Embedded Evaluation Kit)
  banners       PTE @ 0x70000000 [----ET12] | PTE at 0x... Size: N bytes |
                Model PTE at 0x..., Size: N bytes | Model in 0x70000000 $
  PMU (ET)      ethosu_pmu_cycle_cntr : N (X per inference)   ethosu_pmu_cntrK : N
                Ethos-U PMU Events:[ETHOSU_PMU_AXI0_RD_DATA_BEAT_RECEIVED, ...]
                Inference runtime: N CPU cycles total (X per inference)
  PMU (MLEK)    NPU ACTIVE cycles: N | NPU ACTIVE: N cycles | NPU AXI0_RD_DATA_BEAT_RECEIVED beats: N
  outputs       Output[0][1]: (float) 0.06 | Output[0][0]: -0.749744 | ...(Skipped)
                output[0]: tensor scalar_type=Float numel=4  then  [k] = value    (Zephyr samples)
                [1] class 92: 3.2362                                   (top-k of the MV2 sample)
  end           Program complete, exiting. (SUCCESS: ... on Zephyr), EOT (0x04),
                Application exit code: 0. (the semihosting runner; non-zero: a failure)
  failures      E/F records, ERROR - , Hard fault, Assertion, FVP `Error: (E549) ...`,
                `[critical]`, the FVP's CPU time limit (not after the program ended)
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass
from typing import Literal

from ..artifacts import CycleFigures
from .pmu_delegates import DelegatePmu, DelegatePmuReader

FailureKind = Literal[
    "error",
    "fatal",
    "hard-fault",
    "assertion",
    "simulator",
    "time-limit",
    "reset",
    "garbled",
    "damaged",  # a line whose figures no runner prints: an index far past what was printed,
    # a counter past 64 bits, cycles over zero inferences
]
OutputValue = int | float | bool

EOT = "\x04"

_RECORD = re.compile(
    r"^(?P<level>[DIWEF]) \[?executorch:(?P<file>[^:\]\s]+)(?::(?P<line>\d+))?"
    r"(?: (?P<func>[^\]]*?)\(\))?\] ?(?P<message>.*)$"
)
_MLEK_RECORD = re.compile(r"^(?P<level>DEBUG|INFO|WARN|ERROR) - (?P<message>.*)$")
_MLEK_LEVELS = {"DEBUG": "D", "INFO": "I", "WARN": "W", "ERROR": "E"}
_PER_INF = r"(?: \((?P<per>[0-9.]+) per inference\))?"
_CYCLE_CNTR = re.compile(r"^ethosu_pmu_cycle_cntr :\s+(?P<total>\d+)" + _PER_INF)
_EVENT_CNTR = re.compile(r"^ethosu_pmu_cntr(?P<index>\d+) :\s+(?P<total>\d+)" + _PER_INF)
_EVENTS = re.compile(r"^Ethos-U PMU Events:\[(?P<events>[^\]]*)\]")
_CPU = re.compile(r"^Inference runtime: (?P<total>\d+) CPU cycles total" + _PER_INF)
_INFERENCES = re.compile(r"^NPU Inferences : (?P<n>\d+)")
_MLEK_PMU = re.compile(
    r"^(?P<name>NPU [A-Z][A-Z0-9_]*)(?: (?:cycles|beats))?: (?P<total>\d+)"
    r"(?: (?:cycles|beats))?\s*$"
)
# a printed value: a number (%d, %f, %e, nan, inf) or a bool; a line cut short by a reset or a
# disconnect ("Output[0][5]: (f") is no value and is not read as one
_VALUE = r"(?P<value>[-+]?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|nan|inf)|true|false)"
_OUTPUT = re.compile(
    r"^Output\[(?P<i>\d+)\]\[(?P<j>\d+)\]: (?:\((?P<type>int|float|char|bool)\) )?"
    + _VALUE
    + r"(?:\s.*)?$",  # bools carry their hex after the value: "true  (0x1)"
    re.IGNORECASE,
)
_ZEPHYR_TENSOR = re.compile(r"^output\[(?P<i>\d+)\]: tensor scalar_type=(?P<type>\w+)")
_ZEPHYR_VALUE = re.compile(r"^\[(?P<j>\d+)\] = " + _VALUE + r"$", re.IGNORECASE)
_TOP_CLASS = re.compile(r"^\[(?P<rank>\d+)\] class (?P<cls>\d+): (?P<score>\S+)$")
_INFERENCE_MS = re.compile(r"^Inference (?:completed in|time:) (?P<ms>[0-9.]+) ms")
_ELIDED = "...(Skipped)"
# the semihosting runner's end (2024 images): the program returned from main with this code
_EXIT_CODE = re.compile(r"Application exit code: (?P<code>-?\d{1,10})\.?")
_TEST_RESULT = re.compile(r"Test_result: (?P<result>PASS|FAIL)\b")
# What a runner prints once per start; the same banner again means the target restarted.
_BANNERS = (
    re.compile(r"^PTE @ \S+ \[----.{4}\]"),
    re.compile(r"^PTE at \S+ Size: \d+ bytes"),
    re.compile(r"^Model PTE at \S+ Size: \d+ bytes"),
    re.compile(r"^Model in \S+"),
)
_HARD_FAULT = re.compile(r"hard ?fault", re.IGNORECASE)
_SIM_ERROR = re.compile(r"^(?:Error: \(E\d+\)|\[critical\s*\])")
_END = "Program complete, exiting."
_TIME_LIMIT = "Simulation is stopping. Reason: CPU time has been exceeded"
# Lines the FVP itself prints: not the program's output.
_SIMULATOR_LINE = re.compile(
    r"^(?:telnetterminal\d|Ethos-U rev |\(C\) COPYRIGHT|ALL RIGHTS RESERVED"
    r"|Info: |Warning: |\[warning\s*\]|\[run_fvp\])"
)
# Text a UART can legitimately carry; anything else in a line marks it garbled.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ufffd]")
_INT = re.compile(r"^-?\d+$")


@dataclass(frozen=True)
class LogRecord:
    """One log line: `I [executorch:file.cpp:123 func()] message`, `INFO - message`, ..."""

    level: str  # D, I, W, E, F
    file: str  # "" for ML-kit records
    line: int | None  # None on runners that log without line numbers (Zephyr samples)
    func: str  # "" on runners built without function names
    message: str


@dataclass(frozen=True)
class Count:
    """A counter as the runner prints it: the total over all inferences, and per inference."""

    total: int
    per_inference: float | None  # None when the runner printed no per-inference figure


@dataclass(frozen=True)
class PmuCounter:
    index: int | None  # ExecuTorch's ethosu_pmu_cntrK; None for ML-kit counters
    event: str | None  # the legend's event, or the ML kit's name ("NPU ACTIVE"); None without
    count: Count

    @property
    def name(self) -> str:
        return self.event or f"ethosu_pmu_cntr{self.index}"


# The AXI beat counters under the key names report.json uses (run.cycles.beats).
_BEAT_EVENTS = {
    "axi0_read": "AXI0_RD_DATA_BEAT_RECEIVED",
    "axi0_write": "AXI0_WR_DATA_BEAT_WRITTEN",
    "axi1_read": "AXI1_RD_DATA_BEAT_RECEIVED",
}


def axi_beats(counters: tuple[PmuCounter, ...]) -> dict[str, int]:
    """axi0_read/axi0_write/axi1_read per inference from ET (ETHOSU_PMU_AXI0_...) or ML-kit
    (NPU AXI0_...) counter names. U85's SRAM/EXT ports are other counters: kept raw only."""
    beats = {}
    for key, event in _BEAT_EVENTS.items():
        for counter in counters:
            if counter.event in (f"ETHOSU_PMU_{event}", f"NPU {event}"):
                beats[key] = per_inference(counter.count)
    return beats


def per_inference(count: Count) -> int:
    return round(count.per_inference) if count.per_inference is not None else count.total


NO_PMU_NOTE = "the runner printed no PMU report (built without the Ethos-U PMU?)"


def measured_cycles(log: UartLog, source: str, note: str) -> CycleFigures:
    """The PMU figures the firmware printed, per inference: its NPU cycle counter (NPU TOTAL),
    the CPU's, and the AXI beat counters. kind "none" when it printed no PMU report."""
    if log.npu_cycles is None and log.cpu_cycles is None:
        return CycleFigures(kind="none", source=source, note=NO_PMU_NOTE)
    return CycleFigures(
        kind="measured",
        source=source,
        npu_cycles=per_inference(log.npu_cycles) if log.npu_cycles else None,
        cpu_cycles=per_inference(log.cpu_cycles) if log.cpu_cycles else None,
        note=note,
        beats=axi_beats(log.pmu_counters) or None,
    )


@dataclass(frozen=True)
class Failure:
    kind: FailureKind
    line_no: int  # 1-based index into UartLog.lines
    text: str

    def __str__(self) -> str:
        return f"{self.kind} (line {self.line_no}): {self.text}"


@dataclass(frozen=True)
class UartLog:
    lines: tuple[str, ...]  # every line, EOT removed, undecodable bytes as U+FFFD
    records: tuple[LogRecord, ...]
    npu_cycles: Count | None  # ethosu_pmu_cycle_cntr, or the ML kit's NPU TOTAL (else ACTIVE)
    pmu_counters: tuple[PmuCounter, ...]
    cpu_cycles: Count | None  # "Inference runtime: N CPU cycles total"
    inferences: int | None  # "NPU Inferences : N"
    outputs: tuple[tuple[OutputValue, ...], ...]  # printed values of output i, by index j
    output_indices: tuple[tuple[int, ...], ...]  # the j of each printed value
    outputs_elided: bool  # the runner skipped some values ("...(Skipped)")
    top_classes: tuple[tuple[int, float], ...]  # (class, score) from a top-k report
    inference_ms: float | None  # "Inference completed in N ms" (Zephyr samples)
    test_results: tuple[bool, ...]  # BundleIO Test_result lines, PASS -> True
    complete: bool  # "Program complete, exiting." seen
    eot: bool
    banners: int  # runner starts seen
    garbled_bytes: int  # undecodable bytes (one per U+FFFD) and stray control characters
    failures: tuple[Failure, ...]
    recognised: int  # lines that carry something a runner prints (record, figure, marker)
    last_program_line: str  # the last non-blank line not printed by the FVP itself
    delegations: int | None = None  # "NPU delegations: N": command streams the NPU ran
    delegates: tuple[DelegatePmu, ...] = ()  # per-delegate PMU figures (executorch#22511)
    pmu_events: tuple[str, ...] = ()  # the legend: the event each ethosu_pmu_cntrK counts

    @property
    def ok(self) -> bool:
        return self.complete and not self.failures

    @property
    def inference_done(self) -> bool:
        """Something only a finished inference prints: PMU figures, outputs, a timing, results."""
        return bool(
            self.npu_cycles
            or self.cpu_cycles
            or self.pmu_counters
            or self.outputs
            or self.top_classes
            or self.inference_ms is not None
            or self.test_results
        )

    def tail(self, n: int = 15) -> str:
        """The last n lines, non-text characters shown as '?'."""
        return "\n".join(_CONTROL.sub("?", line) for line in self.lines[-n:])


class UartLogParser:
    """Incremental parser: feed() chunks of bytes or text as they arrive, then finish()."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending = ""
        self._lines: list[str] = []
        self._records: list[LogRecord] = []
        self._npu_cycles: Count | None = None
        self._counters: dict[int, Count] = {}
        self._events: tuple[str, ...] = ()
        self._mlek: dict[str, int] = {}
        self._cpu_cycles: Count | None = None
        self._inferences: int | None = None
        self._outputs: dict[int, dict[int, OutputValue]] = {}
        self._zephyr_tensor: tuple[int, str] | None = None  # (output index, scalar type)
        self._elided = False
        self._top: list[tuple[int, float]] = []
        self._inference_ms: float | None = None
        self._test_results: list[bool] = []
        self._complete = False
        self._eot = False
        self._banner_kinds: set[int] = set()
        self._banners = 0
        self._garbled = 0
        self._failures: list[Failure] = []
        self._recognised = 0
        self._last_program_line = ""
        self._delegates = DelegatePmuReader()

    @property
    def failures(self) -> tuple[Failure, ...]:
        """Failure markers seen so far."""
        return tuple(self._failures)

    @property
    def recognised(self) -> int:
        return self._recognised

    @property
    def halted(self) -> bool:
        """Nothing useful can follow: the program ended, or the CPU faulted or was stopped."""
        return (
            self._complete
            or self._eot
            or any(f.kind in ("hard-fault", "time-limit") for f in self._failures)
        )

    def feed(self, chunk: bytes | str) -> None:
        text = self._decoder.decode(chunk) if isinstance(chunk, bytes) else chunk
        if EOT in text:
            self._eot = True
            text = text.replace(EOT, "")
        *complete, self._pending = (self._pending + text).split("\n")
        for line in complete:
            self._line(line.rstrip("\r"))

    def finish(self) -> UartLog:
        """The parsed log; a last line without a newline counts as a line."""
        self.feed(self._decoder.decode(b"", final=True))
        if self._pending:
            self._line(self._pending.rstrip("\r"))
            self._pending = ""
        counters = [
            PmuCounter(i, self._events[i] if i < len(self._events) else None, count)
            for i, count in sorted(self._counters.items())
        ]
        counters += [PmuCounter(None, name, Count(n, None)) for name, n in self._mlek.items()]
        npu = self._npu_cycles
        mlek_npu = self._mlek.get("NPU TOTAL", self._mlek.get("NPU ACTIVE"))
        if npu is None and mlek_npu is not None:
            npu = Count(mlek_npu, None)
        if self._inferences == 0 and (npu is not None or self._cpu_cycles is not None):
            self._fail("damaged", "cycle counts over 0 inferences (NPU Inferences : 0)")
        n_outputs = max(self._outputs, default=-1) + 1
        printed = [sorted(self._outputs.get(i, {}).items()) for i in range(n_outputs)]
        return UartLog(
            lines=tuple(self._lines),
            records=tuple(self._records),
            npu_cycles=npu,
            pmu_counters=tuple(counters),
            cpu_cycles=self._cpu_cycles,
            inferences=self._inferences,
            outputs=tuple(tuple(v for _, v in values) for values in printed),
            output_indices=tuple(tuple(j for j, _ in values) for values in printed),
            outputs_elided=self._elided,
            top_classes=tuple(self._top),
            inference_ms=self._inference_ms,
            test_results=tuple(self._test_results),
            complete=self._complete,
            eot=self._eot,
            banners=self._banners,
            garbled_bytes=self._garbled,
            failures=tuple(self._failures),
            recognised=self._recognised,
            last_program_line=self._last_program_line,
            delegations=self._delegates.delegations,
            delegates=self._delegates.delegates(),
            pmu_events=self._events,
        )

    def _fail(self, kind: FailureKind, text: str) -> None:
        self._failures.append(Failure(kind, len(self._lines), text))

    def _line(self, line: str) -> None:
        self._lines.append(line)
        garbled = len(_CONTROL.findall(line))
        if garbled:
            self._garbled += garbled
            self._fail(
                "garbled", f"{garbled} non-text characters in: {_CONTROL.sub('?', line)[:60]}"
            )
            return
        stripped = line.strip()
        simulator = bool(_SIMULATOR_LINE.match(stripped))
        if stripped and not simulator:
            self._last_program_line = stripped
        failures_before = len(self._failures)
        if record := _RECORD.match(line):
            self._records.append(
                LogRecord(
                    record["level"],
                    record["file"],
                    int(record["line"]) if record["line"] and len(record["line"]) < 10 else None,
                    record["func"] or "",
                    record["message"],
                )
            )
            payload = record["message"].strip()
        elif record := _MLEK_RECORD.match(line):
            self._records.append(
                LogRecord(_MLEK_LEVELS[record["level"]], "", None, "", record["message"])
            )
            payload = record["message"].strip()
        else:
            payload = stripped
        self._failure_markers(line, stripped, record)
        if self._payload(payload, line) or record or len(self._failures) > failures_before:
            self._recognised += 1

    def _failure_markers(self, line: str, stripped: str, record: re.Match | None) -> None:
        # As ExecuTorch's own checks (runner_utils.py, run_fvp.sh) read a log.
        level = record["level"] if record else ""
        if level in ("E", "ERROR") or line.startswith(("E ", "E:")):
            self._fail("error", line)
        elif level == "F" or line.startswith(("F ", "F:")):
            self._fail("fatal", line)
        if _HARD_FAULT.search(line):
            self._fail("hard-fault", line)
        if "Assertion" in line:
            self._fail("assertion", line)
        if _SIM_ERROR.match(stripped):
            self._fail("simulator", line)
        if _TIME_LIMIT in line and not (self._complete or self._eot):
            self._fail("time-limit", line)  # after the end it only stopped an idle CPU

    def _payload(self, payload: str, line: str) -> bool:
        """Read one line's content; False when it is nothing a runner is known to print. A line
        whose figures no runner prints is a "damaged" failure, its figures not taken."""
        try:
            return self._read(payload, line)
        except _Damaged as exc:
            self._fail("damaged", f"{exc}: {_CONTROL.sub('?', line)[:80]}")
            return True

    def _output_index(self, text: str) -> int:
        return _index(text, len(self._outputs), _OUTPUT_SLACK, "output index")

    def _value_index(self, i: int, text: str) -> int:
        return _index(text, len(self._outputs.get(i, ())), _VALUE_SLACK, "value index")

    def _read(self, payload: str, line: str) -> bool:
        """Whether payload is a line a runner prints (its figures recorded), in the order the
        patterns are tried: counters, outputs, then timing, test results and the run's end."""
        return (
            self._read_counters(payload)
            or self._read_outputs(payload)
            or self._read_status(payload, line)
        )

    def _read_counters(self, payload: str) -> bool:
        if m := _CYCLE_CNTR.match(payload):
            self._npu_cycles = _count(m)
        elif m := _EVENT_CNTR.match(payload):
            self._counters[_index(m["index"], len(self._counters), 16, "counter index")] = _count(m)
        elif m := _EVENTS.match(payload):
            self._events = tuple(e.strip() for e in m["events"].split(","))
        elif m := _CPU.match(payload):
            self._cpu_cycles = _count(m)
        elif m := _INFERENCES.match(payload):
            self._inferences = _number(m["n"], "inference count")
        elif self._delegates.read(payload):
            pass
        elif m := _MLEK_PMU.match(payload):
            self._mlek[m["name"]] = _number(m["total"], "counter")
        else:
            return False
        return True

    def _read_outputs(self, payload: str) -> bool:
        if m := _OUTPUT.match(payload):
            i = self._output_index(m["i"])
            j = self._value_index(i, m["j"])
            self._outputs.setdefault(i, {})[j] = _value(m["type"], m["value"])
        elif m := _ZEPHYR_TENSOR.match(payload):
            i = self._output_index(m["i"])
            self._zephyr_tensor = (i, m["type"])
            self._outputs.setdefault(i, {})
        elif self._zephyr_tensor and (m := _ZEPHYR_VALUE.match(payload)):
            i, scalar_type = self._zephyr_tensor
            kind = "float" if scalar_type in ("Float", "Double", "Half") else "int"
            self._outputs[i][self._value_index(i, m["j"])] = _value(kind, m["value"])
        elif m := _TOP_CLASS.match(payload):
            self._top.append((_number(m["cls"], "class"), _float(m["score"], "score")))
        else:
            return False
        return True

    def _read_status(self, payload: str, line: str) -> bool:
        if m := _INFERENCE_MS.match(payload):
            self._inference_ms = _float(m["ms"], "inference time")
        elif payload == _ELIDED:
            self._elided = True
        elif m := _TEST_RESULT.search(payload):
            self._test_results.append(m["result"] == "PASS")
        elif _END in payload:
            self._complete = True
        elif m := _EXIT_CODE.search(payload):
            if int(m["code"]) == 0:
                self._complete = True  # a time limit after it only stopped an idle CPU
            else:
                self._fail("error", line)
        elif (banner := _banner_kind(payload)) is not None:
            self._banner(banner, line)
        else:
            return False
        return True

    def _banner(self, kind: int, line: str) -> None:
        self._banners += 1
        if kind in self._banner_kinds:
            self._fail("reset", line)
        self._banner_kinds.add(kind)


# What a capture can claim, whatever it says: memory and time stay linear in its size.
_COUNTER_LIMIT = 1 << 64  # a PMU or CPU counter is at most 64 bits
_DIGITS = 20  # digits of a 64-bit counter; a longer number is not read (Python's int limit)
_OUTPUT_SLACK = 64  # an output index at most this far past the outputs printed so far
_VALUE_SLACK = 4096  # a value index at most this far past the values printed of its output


class _Damaged(ValueError):
    """A line whose figures cannot be what a runner printed; the message says which."""


def _number(text: str, what: str) -> int:
    """A counter's digits as an int; _Damaged past 64 bits."""
    if len(text) > _DIGITS or int(text) >= _COUNTER_LIMIT:
        raise _Damaged(f"{what} {text[:24]}{'...' if len(text) > 24 else ''} is past 64 bits")
    return int(text)


def _float(text: str, what: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise _Damaged(f"{what} {text[:24]} is not a number") from None


def _count(m: re.Match) -> Count:
    total = _number(m["total"], "counter")
    per = _float(m["per"], "per-inference figure") if m["per"] else None
    if per is not None and not per < _COUNTER_LIMIT:
        raise _Damaged(f"per-inference figure {m['per'][:24]} is past 64 bits")
    return Count(total, per)


def _index(text: str, printed: int, slack: int, what: str) -> int:
    """An output's or a value's index, at most slack past the `printed` ones seen so far."""
    if len(text) > _DIGITS or int(text) > printed + slack:
        raise _Damaged(f"{what} {text[:24]} is far past the {printed} printed before it")
    return int(text)


def _value(kind: str | None, text: str) -> OutputValue:
    if kind is None:  # untyped: older runners print every value with %f or %d
        kind = "int" if _INT.match(text) else "float"
    if kind == "float":
        return float(text)
    if kind == "bool":
        return text == "true"
    if len(text.lstrip("+-")) > _DIGITS:
        raise _Damaged(f"integer value {text[:24]}... has {len(text)} digits")
    return int(text)


def _banner_kind(payload: str) -> int | None:
    return next((k for k, banner in enumerate(_BANNERS) if banner.match(payload)), None)


def parse_uart_log(data: bytes | str) -> UartLog:
    parser = UartLogParser()
    parser.feed(data)
    return parser.finish()
