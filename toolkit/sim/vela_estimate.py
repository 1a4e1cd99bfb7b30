"""Vela's own per-operation estimate, keyed by command-stream offset, next to our cycle model.

Vela 5.1 compiles TOSA with its C++ core; `regor.compile` returns an optimiser database whose
`queue` table maps the command-stream offset of the last NPU_OP of each scheduled operation to
that operation's `perf` row. We run Vela's own command line (so its option handling applies) and
keep the compiled model it produces.
"""

from __future__ import annotations

import contextlib
import io
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..errors import ToolError
from ..npu import npu_config
from .records import OpRecord


@dataclass(frozen=True)
class VelaOpEstimate:
    offset: int  # command-stream offset of the operation's last NPU_OP command
    operator: str  # TOSA operator Vela scheduled ("Conv2D", "Transpose", ...)
    name: str
    op_cycles: int
    npu_cycles: int
    macs: int


@dataclass(frozen=True)
class CycleComparison:
    offset: int
    operator: str
    ours: int
    vela: int
    npu_ops: int  # how many NPU operations of ours the Vela operation covers

    @property
    def ratio(self) -> float:
        return self.ours / self.vela if self.vela else float("inf")

    @property
    def disagrees(self) -> bool:
        return abs(self.ratio - 1.0) > 0.10


def vela_estimates(tosa_path: str | Path, accelerator: str, system_config: str | None = None,
                   memory_mode: str | None = None) -> tuple[VelaOpEstimate, ...]:
    """Compile the TOSA file with Vela and return its per-operation estimate."""
    from ethosu.vela import vela

    cfg = npu_config(accelerator, system_config, memory_mode)
    captured = {}
    original = vela.regor.compile

    def keep(*args, **kwargs):
        captured["model"] = original(*args, **kwargs)
        return captured["model"]

    with tempfile.TemporaryDirectory() as out:
        vela.regor.compile = keep
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                vela.main([*cfg.vela_flags, "--output-format=raw", "--enable-debug-db",
                           f"--output-dir={out}", str(tosa_path)])
        except SystemExit as exc:
            raise ToolError(f"Vela failed on {tosa_path} (exit {exc.code})") from None
        finally:
            vela.regor.compile = original
    if "model" not in captured:
        raise ToolError(f"Vela did not use its C++ core for {tosa_path}: no per-op database")
    tables = captured["model"].opt_database.tables
    perf = {row[0]: row for row in tables["perf"].data}
    columns = tables["perf"].header
    idx = {name: columns.index(name) for name in ("operator", "name", "op_cycles", "npu_cycles",
                                                  "mac_count")}
    estimates = []
    for offset, _stream, _optimised, scheduled in tables["queue"].data:
        row = perf.get(scheduled)
        if row is None:
            continue
        estimates.append(VelaOpEstimate(
            int(offset), row[idx["operator"]], row[idx["name"]], int(row[idx["op_cycles"]]),
            int(row[idx["npu_cycles"]]), int(row[idx["mac_count"]])))
    return tuple(sorted(estimates, key=lambda e: e.offset))


def compare_cycles(operations: tuple[OpRecord, ...],
                   estimates: tuple[VelaOpEstimate, ...]) -> tuple[CycleComparison, ...]:
    """Our ops grouped under the Vela operation whose last NPU_OP they precede or are."""
    rows = []
    ops = sorted(operations, key=lambda r: r.offset)
    start = 0
    for est in estimates:
        group = [r for r in ops[start:] if r.offset <= est.offset]
        start += len(group)
        rows.append(CycleComparison(est.offset, est.operator, sum(r.cycles for r in group),
                                    est.op_cycles, len(group)))
    return tuple(rows)
