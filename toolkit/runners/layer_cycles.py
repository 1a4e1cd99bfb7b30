"""Per layer: our simulated cycles beside Vela's own estimate of the same program (Vela's
optimiser database, sim/vela_estimate.py), for the families whose cycle model no FVP figure
has checked (Ethos-U85): each row is one operation Vela scheduled, with the NPU operations of
the stream that run it."""

from __future__ import annotations

from typing import Any

from ..artifacts import Delegate


def layer_rows(delegate: Delegate, npu, result) -> list[dict[str, Any]]:
    """Rows of one delegate's run (result: sim.SimResult); [] when Vela's database is not
    available (no TOSA graph)."""
    from ..sim.memory_system import memory_system
    from ..sim.vela_estimate import compare_cycles, scheduled_operations

    if delegate.tosa_path is None:
        return []
    estimates = scheduled_operations(delegate.tosa_path, npu)
    memory = memory_system(npu.accelerator, npu.system_config, npu.memory_mode, npu.config_ini)
    rows = compare_cycles(result.operations, estimates, npu.accelerator, memory)
    return [
        {
            "delegate": delegate.index,
            "offset": row.offset,
            "operator": row.operator,
            "npu_operations": row.npu_ops,
            "sim_cycles": row.ours,
            "vela_estimate_cycles": row.vela,
        }
        for row in rows
    ]


def layer_lines(rows: list[dict[str, Any]]) -> list[str]:
    """The console's table of rows."""
    lines = [
        f"{'delegate':>8} {'offset':>7} {'operator':<18} {'NPU ops':>7} {'sim':>9} "
        f"{'Vela est.':>9} {'sim/Vela':>8}"
    ]
    for r in rows:
        vela = r["vela_estimate_cycles"]
        ratio = f"{r['sim_cycles'] / vela:.2f}x" if vela else "-"
        lines.append(
            f"{r['delegate']:>8} {r['offset']:>#7x} {r['operator']:<18} "
            f"{r['npu_operations']:>7} {r['sim_cycles']:>9,} {vela:>9,} {ratio:>8}"
        )
    return lines
