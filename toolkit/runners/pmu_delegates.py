"""Per-delegate PMU figures, as ExecuTorch's Arm perf monitor prints them with per-delegate
profiling (pytorch/executorch#22511, built with ET_ARM_ETHOSU_PER_DELEGATE_PROFILING), and the
per-run delegation count every 1.x runner prints.

From examples/arm/executor_runner/arm_perf_monitor.cpp (StopMeasurements), after the run's own
`ethosu_pmu_cntrK` lines and before the `Ethos-U PMU Events:[...]` legend:

  NPU delegations: 2 (2.00 per inference)
  Ethos-U per-delegate PMU report:
  Ethos-U delegate 0: 1 backend invocations, 1 NPU invocations
  Ethos-U delegate 0 PMU cycles: 1234
  Ethos-U delegate 0 PMU counter 0: 56            (one line per counter the run reports)
  E [...] Ethos-U per-delegate profiling exceeded its capacity of N delegates

Delegates are numbered in the order they first ran; the figures are totals over the
measurement (one inference per measurement in server mode). The counter index is the same
`ethosu_pmu_cntrK` index the legend names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_DELEGATIONS = re.compile(r"^NPU delegations: (?P<n>\d{1,20})")
_INVOCATIONS = re.compile(
    r"^Ethos-U delegate (?P<d>\d{1,4}): (?P<backend>\d{1,20}) backend invocations, "
    r"(?P<npu>\d{1,20}) NPU invocations"
)
_CYCLES = re.compile(r"^Ethos-U delegate (?P<d>\d{1,4}) PMU cycles: (?P<n>\d{1,20})$")
_COUNTER = re.compile(
    r"^Ethos-U delegate (?P<d>\d{1,4}) PMU counter (?P<k>\d{1,2}): (?P<n>\d{1,20})$"
)
_HEADER = "Ethos-U per-delegate PMU report:"
_OVERFLOW = "per-delegate profiling exceeded its capacity"
_LIMIT = 1 << 64


@dataclass(frozen=True)
class DelegatePmu:
    """One delegate's figures over a measurement."""

    index: int  # the order it first ran in
    backend_invocations: int | None
    npu_invocations: int | None
    npu_cycles: int | None  # the NPU's cycle counter while this delegate ran
    counters: tuple[tuple[int, int], ...]  # (ethosu_pmu_cntr index, count)

    def named_counters(self, events: tuple[str, ...]) -> dict[str, int]:
        """The counters under the legend's event names (cntrK without a legend)."""
        return {
            events[k] if k < len(events) else f"ethosu_pmu_cntr{k}": count
            for k, count in self.counters
        }


class DelegatePmuReader:
    """Collects per-delegate lines; read() says whether a payload was one of them."""

    def __init__(self) -> None:
        self.delegations: int | None = None
        self.truncated = False  # the firmware ran out of delegate slots
        self._figures: dict[int, dict] = {}

    def read(self, payload: str) -> bool:
        if m := _DELEGATIONS.match(payload):
            self.delegations = _int(m["n"])
        elif payload == _HEADER:
            self._figures.clear()  # a new measurement's report
        elif m := _INVOCATIONS.match(payload):
            entry = self._entry(m["d"])
            entry["backend"], entry["npu"] = _int(m["backend"]), _int(m["npu"])
        elif m := _CYCLES.match(payload):
            self._entry(m["d"])["cycles"] = _int(m["n"])
        elif m := _COUNTER.match(payload):
            self._entry(m["d"])["counters"][int(m["k"])] = _int(m["n"])
        elif _OVERFLOW in payload:
            self.truncated = True
        else:
            return False
        return True

    def _entry(self, index: str) -> dict:
        return self._figures.setdefault(
            int(index), {"backend": None, "npu": None, "cycles": None, "counters": {}}
        )

    def delegates(self) -> tuple[DelegatePmu, ...]:
        return tuple(
            DelegatePmu(
                index,
                entry["backend"],
                entry["npu"],
                entry["cycles"],
                tuple(sorted(entry["counters"].items())),
            )
            for index, entry in sorted(self._figures.items())
        )


def _int(text: str) -> int | None:
    """A counter; None when it is past 64 bits (no firmware prints that)."""
    value = int(text)
    return value if value < _LIMIT else None
