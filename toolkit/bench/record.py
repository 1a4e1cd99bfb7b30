"""One line of results.jsonl as a typed record; to_json/from_json keep the on-disk keys and their
order (CHANGELOG: bench records, schema 1).

Three kinds share the type: an ok run (every field), a failed run (where and when it ran, the
reason; no figures), and a lost run whose worker never reported (key, spec, reason only).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

_WHERE = ("started", "host", "pid", "out_dir", "versions")  # absent in a lost run's record
_FIGURES = ("model_hash", "vela", "runner", "cycles", "layers", "npu_ops", "outputs")  # ok runs


@dataclass(frozen=True)
class BenchRecord:
    schema: int
    key: str  # run_key(spec)
    label: str
    spec: dict[str, Any]  # the RunSpec as JSON (dataclasses.asdict)
    status: str  # "ok" or "failed"
    reason: str | None  # why it failed; None when ok
    # where and when it ran (None in a lost run's record)
    started: str | None = None  # ISO time, UTC
    host: str | None = None
    pid: int | None = None
    out_dir: str | None = None
    versions: dict[str, Any] | None = None
    # an ok run's figures (None when it failed)
    model_hash: str | None = None
    vela: dict[str, Any] | None = None
    runner: dict[str, Any] | None = None  # {"name", "note"}
    cycles: dict[str, Any] | None = None  # {"estimate": {...}, "run": {...}}
    layers: dict[str, Any] | None = None  # {"kind", "source", "rows"}
    npu_ops: Any = None
    outputs: dict[str, Any] | None = None  # accuracy keys, reference match, "quantized" codes
    duration_s: float | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "schema": self.schema,
            "key": self.key,
            "label": self.label,
            "spec": self.spec,
        }
        ran = self.started is not None
        if ran:
            data.update({name: getattr(self, name) for name in _WHERE})
        data.update(status=self.status, reason=self.reason)
        if self.ok:
            data.update({name: getattr(self, name) for name in _FIGURES})
        if ran:
            data["duration_s"] = self.duration_s
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BenchRecord:
        return cls(
            schema=data["schema"],
            key=data["key"],
            label=data["label"],
            spec=data["spec"],
            status=data["status"],
            reason=data.get("reason"),
            **{name: data.get(name) for name in (*_WHERE, *_FIGURES, "duration_s")},
        )
