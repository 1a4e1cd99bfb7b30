"""Vela's own per-operation estimate, keyed by command-stream offset, next to our cycle model.

Vela 5.1 and 5.2 compile TOSA with their C++ core; `regor.compile` returns an optimiser
database whose `queue` table maps the command-stream offset of the last NPU_OP of each scheduled
operation to that operation's `perf` row. We run Vela's own command line (so its option handling applies) and
keep the compiled model it produces.
"""

from __future__ import annotations

import contextlib
import io
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

from ..errors import ToolError
from ..npu import npu_config
from .families import Accelerator
from .families import accelerator as configuration
from .memory_system import MemorySystem
from .records import OpRecord

# Vela's C++ estimator books the output-stage activation cost by the fused sub-operation:
# table lookups -> index 0, the ReLU family -> 1, anything else (a fused Clamp) -> 2 (free).
# With NO fused operation Vela 5.1 booked index 0, the table-lookup cost, although the registers
# then select plain clip; Vela 5.2 books it free, as the registers say (its estimate of a conv
# with no fused operation equals our cycle model's: tests/sim/test_cycle_model.py).
_LUT_OPS = frozenset({"Sigmoid", "Tanh", "LUT"})
_RELU_OPS = frozenset({"Relu", "Relu0To1", "Relu6", "ReluN1To1"})


def books_lut_without_fused_operation(vela: str) -> bool:
    """Whether this Vela version charges an operation with no fused one a table lookup."""
    major, minor = (int(part) for part in vela.split(".")[:2])
    return (major, minor) < (5, 2)


@lru_cache(maxsize=1)
def _installed_vela_books_lut() -> bool:
    from importlib.metadata import version

    return books_lut_without_fused_operation(version("ethos-u-vela"))


class VelaOpEstimate(NamedTuple):
    offset: int  # command-stream offset of the operation's last NPU_OP command
    operator: str  # TOSA operator Vela scheduled ("Conv2D", "Transpose", ...)
    name: str
    op_cycles: int
    npu_cycles: int
    macs: int
    fused: tuple[str, ...] = ()  # operators Vela fused into this one (its sub-operations)

    def activation_cost(self, accelerator: Accelerator) -> float:
        """Cycles per output element Vela books for the activation."""
        lut, relu = accelerator.activation_cycles
        fused = self.fused[0] if self.fused else None
        if fused is None:
            return lut if _installed_vela_books_lut() else 0.0
        if fused in _LUT_OPS:
            return lut
        return relu if fused in _RELU_OPS else 0.0


class CycleComparison(NamedTuple):
    offset: int
    operator: str
    ours: int
    vela: int
    npu_ops: int  # how many NPU operations of ours the Vela operation covers
    note: str = ""  # why a disagreement is expected, when it is

    @property
    def ratio(self) -> float:
        return self.ours / self.vela if self.vela else float("inf")

    @property
    def disagrees(self) -> bool:
        return abs(self.ratio - 1.0) > 0.10


def vela_estimates(
    tosa_path: str | Path,
    accelerator: str,
    system_config: str | None = None,
    memory_mode: str | None = None,
) -> tuple[VelaOpEstimate, ...]:
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
                vela.main(
                    [
                        *cfg.vela_flags,
                        "--output-format=raw",
                        "--enable-debug-db",
                        f"--output-dir={out}",
                        str(tosa_path),
                    ]
                )
        except SystemExit as exc:
            raise ToolError(f"Vela failed on {tosa_path} (exit {exc.code})") from None
        finally:
            vela.regor.compile = original
    if "model" not in captured:
        raise ToolError(f"Vela did not use its C++ core for {tosa_path}: no per-op database")
    tables = captured["model"].opt_database.tables
    columns = tables["perf"].header
    idx = {
        name: columns.index(name)
        for name in ("operator", "name", "op_cycles", "npu_cycles", "mac_count")
    }
    queued = {row[3]: int(row[0]) for row in tables["queue"].data}
    estimates = []
    for row in tables["perf"].data:
        if row[0] in queued:
            estimates.append(
                VelaOpEstimate(
                    queued[row[0]],
                    row[idx["operator"]],
                    row[idx["name"]],
                    int(row[idx["op_cycles"]]),
                    int(row[idx["npu_cycles"]]),
                    int(row[idx["mac_count"]]),
                )
            )
        elif estimates:  # sub-operations follow the operation they are fused into
            last = estimates[-1]
            estimates[-1] = VelaOpEstimate(
                last.offset,
                last.operator,
                last.name,
                last.op_cycles,
                last.npu_cycles,
                last.macs,
                last.fused + (row[idx["operator"]],),
            )
    return tuple(sorted(estimates, key=lambda e: e.offset))


@lru_cache(maxsize=64)
def _cached_estimates(
    tosa_path: str, accelerator: str, system_config: str | None, memory_mode: str | None
) -> tuple[VelaOpEstimate, ...]:
    from ..lower.tosa_probe import compiled_here

    if compiled_here(Path(tosa_path).read_bytes()):
        return vela_estimates(tosa_path, accelerator, system_config, memory_mode)
    from .vela_estimate_isolated import estimates_in_child  # a stored file: Vela reads it there

    return estimates_in_child(tosa_path, accelerator, system_config, memory_mode)


def scheduled_operations(tosa_path: str | Path, npu) -> tuple[VelaOpEstimate, ...]:
    """vela_estimates for the delegate's NpuConfig, one Vela run per TOSA file and config."""
    return _cached_estimates(str(tosa_path), npu.accelerator, npu.system_config, npu.memory_mode)


def scheduled_operation(tosa_path: str | Path, npu, offset: int) -> VelaOpEstimate | None:
    """The operation Vela scheduled the command at `offset` for (the first whose last NPU_OP
    is at or after it), or None when Vela cannot say."""
    try:
        ops = scheduled_operations(tosa_path, npu)
    except ToolError:
        return None
    return next((op for op in ops if op.offset >= offset), None)


def compare_cycles(
    operations: tuple[OpRecord, ...],
    estimates: tuple[VelaOpEstimate, ...],
    accelerator: str | Accelerator,
    memory: MemorySystem,
) -> tuple[CycleComparison, ...]:
    """Our ops grouped under the Vela operation whose last NPU_OP they precede or are, with the
    known reasons for disagreement."""
    npu = configuration(accelerator)
    rows = []
    ops = sorted(operations, key=lambda r: r.offset)
    start = 0
    for est in estimates:
        group = [r for r in ops[start:] if r.offset <= est.offset]
        start += len(group)
        ours = sum(r.cycles for r in group)
        rows.append(
            CycleComparison(
                est.offset,
                est.operator,
                ours,
                est.op_cycles,
                len(group),
                _known_bias(est, group, ours, npu, memory),
            )
        )
    return tuple(rows)


def _known_bias(
    est: VelaOpEstimate,
    group: list[OpRecord],
    ours: int,
    accelerator: Accelerator,
    memory: MemorySystem,
) -> str:
    if est.operator == "Transpose":
        return (
            f"Vela estimates a Transpose from its memory traffic only; ours costs the "
            f"{len(group)} NPU operations it runs"
        )
    cost = est.activation_cost(accelerator)
    as_vela = sum(
        r.cycles
        if r.kind == "dma" or r.activation != 0
        else accelerator.family.op_timing(r, accelerator, memory, activation_cost=cost).total
        for r in group
    )
    notes = []
    if as_vela != ours:
        fused = "+".join(est.fused) or "no fused operation"
        notes.append(
            f"Vela books {cost} cycles/element of activation ({fused}) where the "
            f"ACTIVATION register selects plain clipping; with that cost ours would be "
            f"{as_vela} ({as_vela / est.op_cycles:.2f}x Vela)"
        )
    dma = sum(r.cycles for r in group if r.kind == "dma")
    if dma:
        notes.append(
            f"{dma} of ours are weight DMA, which Vela partly hides under the previous operation"
        )
    return "; ".join(notes)
