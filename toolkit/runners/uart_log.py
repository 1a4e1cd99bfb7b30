"""Parse the UART output of ExecuTorch's Arm executor runner (arm_executor_runner).

Shared by the FVP runner and the serial-board runner. Feed bytes as they arrive
(`UartLogParser.feed`, `finish`) or parse a whole capture (`parse_uart_log`). The result is a
frozen `UartLog`: log records, PMU and CPU cycle figures, printed outputs, BundleIO test
results, the end marker, and failure markers.

Line formats (ExecuTorch 1.5.1 `arm_executor_runner.cpp`, `arm_perf_monitor.cpp`):
    I [executorch:arm_perf_monitor.cpp:168 StopMeasurements()] Ethos-U PMU report:
    ethosu_pmu_cycle_cntr :  5920305 (5920305.00 per inference)      (two spaces: "% " PRIu64)
    ethosu_pmu_cntr0 : 359921 (359921.00 per inference)
    Ethos-U PMU Events:[ETHOSU_PMU_AXI0_RD_DATA_BEAT_RECEIVED, ...]  (counter index -> event)
    Inference runtime: 6925114 CPU cycles total (6925114.00 per inference)
    Output[0][3]: (int) -12        (float|char|bool as well)
    Program complete, exiting.     then EOT (0x04) on builds without semihosting
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass
from typing import Literal

LogLevel = Literal["D", "I", "E", "F"]
FailureKind = Literal["error", "fatal", "hard-fault", "assertion", "time-limit", "reset",
                      "garbled"]
OutputValue = int | float | bool

EOT = "\x04"

_RECORD = re.compile(r"^(?P<level>[DIEF]) \[executorch:(?P<file>[^:\]]+):(?P<line>\d+)"
                     r"(?: (?P<func>[^\]]*?)\(\))?\] ?(?P<message>.*)$")
_PER_INF = r"(?: \((?P<per>[0-9.]+) per inference\))?"
_CYCLE_CNTR = re.compile(r"^ethosu_pmu_cycle_cntr :\s+(?P<total>\d+)" + _PER_INF)
_EVENT_CNTR = re.compile(r"^ethosu_pmu_cntr(?P<index>\d+) :\s+(?P<total>\d+)" + _PER_INF)
_EVENTS = re.compile(r"^Ethos-U PMU Events:\[(?P<events>[^\]]*)\]")
_CPU = re.compile(r"^Inference runtime: (?P<total>\d+) CPU cycles total" + _PER_INF)
_INFERENCES = re.compile(r"^NPU Inferences : (?P<n>\d+)")
_OUTPUT = re.compile(r"^Output\[(?P<i>\d+)\]\[(?P<j>\d+)\]: \((?P<type>int|float|char|bool)\) "
                     r"(?P<value>\S+)")
_TEST_RESULT = re.compile(r"Test_result: (?P<result>PASS|FAIL)\b")
# The runner logs the .pte's address and magic once per start: a second one means a reset.
_BANNER = re.compile(r"^PTE @ \S+ \[----.{4}\]")
_HARD_FAULT = re.compile(r"hard ?fault", re.IGNORECASE)
_END = "Program complete, exiting."
_TIME_LIMIT = "Simulation is stopping. Reason: CPU time has been exceeded"
# Text a UART can legitimately carry; anything else in a line marks it garbled.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ufffd]")


@dataclass(frozen=True)
class LogRecord:
    """One ET_LOG line: `I [executorch:file.cpp:123 func()] message`."""

    level: LogLevel
    file: str
    line: int
    func: str  # "" on runners built without function names
    message: str


@dataclass(frozen=True)
class Count:
    """A counter as the runner prints it: the total over all inferences, and per inference."""

    total: int
    per_inference: float | None  # None when the runner printed no per-inference figure


@dataclass(frozen=True)
class PmuCounter:
    index: int
    event: str | None  # from the `Ethos-U PMU Events:[...]` legend, None without one
    count: Count

    @property
    def name(self) -> str:
        return self.event or f"ethosu_pmu_cntr{self.index}"


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
    npu_cycles: Count | None  # ethosu_pmu_cycle_cntr: NPU active cycles
    pmu_counters: tuple[PmuCounter, ...]
    cpu_cycles: Count | None  # "Inference runtime: N CPU cycles total"
    inferences: int | None  # "NPU Inferences : N"
    outputs: tuple[tuple[OutputValue, ...], ...]  # Output[i][j] lines, indexed [i][j]
    test_results: tuple[bool, ...]  # BundleIO Test_result lines, PASS -> True
    complete: bool  # "Program complete, exiting." seen
    eot: bool
    banners: int  # runner starts seen; more than one means the target reset
    garbled_bytes: int  # undecodable bytes (one per U+FFFD) and stray control characters
    failures: tuple[Failure, ...]

    @property
    def ok(self) -> bool:
        return self.complete and not self.failures

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
        self._cpu_cycles: Count | None = None
        self._inferences: int | None = None
        self._outputs: dict[int, list[OutputValue]] = {}
        self._test_results: list[bool] = []
        self._complete = False
        self._eot = False
        self._banners = 0
        self._garbled = 0
        self._failures: list[Failure] = []

    @property
    def failures(self) -> tuple[Failure, ...]:
        """Failure markers seen so far."""
        return tuple(self._failures)

    @property
    def halted(self) -> bool:
        """Nothing useful can follow: the program ended, or the CPU faulted or was stopped."""
        return self._complete or self._eot or any(
            f.kind in ("hard-fault", "time-limit") for f in self._failures)

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
        counters = tuple(
            PmuCounter(i, self._events[i] if i < len(self._events) else None, count)
            for i, count in sorted(self._counters.items()))
        outputs = tuple(tuple(self._outputs.get(i, ()))
                        for i in range(max(self._outputs, default=-1) + 1))
        return UartLog(
            lines=tuple(self._lines), records=tuple(self._records),
            npu_cycles=self._npu_cycles, pmu_counters=counters, cpu_cycles=self._cpu_cycles,
            inferences=self._inferences, outputs=outputs,
            test_results=tuple(self._test_results), complete=self._complete, eot=self._eot,
            banners=self._banners, garbled_bytes=self._garbled, failures=tuple(self._failures))

    def _fail(self, kind: FailureKind, text: str) -> None:
        self._failures.append(Failure(kind, len(self._lines), text))

    def _line(self, line: str) -> None:
        self._lines.append(line)
        garbled = len(_CONTROL.findall(line))
        if garbled:
            self._garbled += garbled
            self._fail("garbled", f"{garbled} non-text characters in: "
                                  f"{_CONTROL.sub('?', line)[:60]}")
            return
        record = _RECORD.match(line)
        if record:
            self._records.append(LogRecord(
                record["level"], record["file"], int(record["line"]), record["func"] or "",
                record["message"]))
            payload = record["message"].strip()
        else:
            payload = line.strip()
        if line.startswith(("E ", "F ", "E:", "F:")):
            self._fail("fatal" if line[0] == "F" else "error", line)
        if _HARD_FAULT.search(line):
            self._fail("hard-fault", line)
        if "Assertion" in line:
            self._fail("assertion", line)
        if _TIME_LIMIT in line:
            self._fail("time-limit", line)
        self._payload(payload, line)

    def _payload(self, payload: str, line: str) -> None:
        if m := _CYCLE_CNTR.match(payload):
            self._npu_cycles = _count(m)
        elif m := _EVENT_CNTR.match(payload):
            self._counters[int(m["index"])] = _count(m)
        elif m := _EVENTS.match(payload):
            self._events = tuple(e.strip() for e in m["events"].split(","))
        elif m := _CPU.match(payload):
            self._cpu_cycles = _count(m)
        elif m := _INFERENCES.match(payload):
            self._inferences = int(m["n"])
        elif m := _OUTPUT.match(payload):
            self._outputs.setdefault(int(m["i"]), []).append(_value(m["type"], m["value"]))
        elif m := _TEST_RESULT.search(payload):
            self._test_results.append(m["result"] == "PASS")
        elif _END in payload:
            self._complete = True
        elif _BANNER.match(payload):
            self._banners += 1
            if self._banners > 1:
                self._fail("reset", line)


def _count(m: re.Match) -> Count:
    return Count(int(m["total"]), float(m["per"]) if m["per"] else None)


def _value(kind: str, text: str) -> OutputValue:
    if kind == "float":
        return float(text)
    if kind == "bool":
        return text == "true"
    return int(text)


def is_banner(line: str) -> bool:
    """The line the runner prints once per start (`PTE @ 0x... [----ET12]`)."""
    record = _RECORD.match(line)
    return bool(_BANNER.match((record["message"] if record else line).strip()))


def parse_uart_log(data: bytes | str) -> UartLog:
    parser = UartLogParser()
    parser.feed(data)
    return parser.finish()
