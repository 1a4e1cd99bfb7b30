"""Vela: compile a delegate's TOSA graph and read its estimates.

For ExecuTorch's delegates, ExecuTorch's own Vela run is kept (vela_runs.py); run_vela compiles
a .tflite file, whose payload and reports are that one run's output.
"""

from __future__ import annotations

import csv
from importlib.metadata import version
from pathlib import Path

import numpy as np

from ..artifacts import LayerEstimate, VelaEstimate
from ..console_capture import capture_fds
from ..errors import ToolError
from ..npu import NpuConfig
from .vela_runs import REPORT_FLAGS


def vela_version() -> str:
    return version("ethos-u-vela")


def vela_flags(npu: NpuConfig, extra: tuple[str, ...] = ()) -> tuple[str, ...]:
    return (*extra, *npu.vela_flags, "--output-format=raw")


def run_vela(tosa_path: Path, out_dir: Path, flags: tuple[str, ...]) -> Path:
    """Compile tosa_path into out_dir; returns the _vela.npz (or, with --output-format=tflite,
    the _vela.tflite). Vela's console report goes to a log."""
    from ethosu.vela import vela

    out_dir.mkdir(parents=True, exist_ok=True)
    args = [*flags, *REPORT_FLAGS, f"--output-dir={out_dir}", str(tosa_path)]
    status, error = None, None
    with capture_fds() as log:
        try:
            status = vela.main(args)
        except SystemExit as exc:
            status = exc.code
        except Exception as exc:  # Vela raises its own and builtin types alike
            error = exc
    (out_dir / "vela.log").write_text(log.text)
    if error is not None:
        raise ToolError(
            f"Vela failed on {tosa_path.name}: {type(error).__name__}: {error}"
        ) from error
    suffix = ".tflite" if "--output-format=tflite" in flags else ".npz"
    npz = out_dir / f"{tosa_path.stem}_vela{suffix}"
    if status not in (0, None) or not npz.is_file():
        tail = "\n".join(log.text.splitlines()[-5:])
        raise ToolError(f"Vela failed on {tosa_path.name} (status {status}):\n{tail}")
    return npz


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return 0.0


def read_estimate(out_dir: Path, stem: str) -> tuple[VelaEstimate, int]:
    """Vela's summary and per-layer CSVs -> (estimate, number of NPU operations)."""
    summaries = list(out_dir.glob(f"{stem}_summary_*.csv"))
    per_layer = out_dir / f"{stem}_per-layer.csv"
    if not summaries or not per_layer.is_file():
        raise ToolError(f"Vela wrote no performance report in {out_dir}")
    with open(summaries[0], newline="") as handle:
        summary = next(csv.DictReader(handle))
    with open(per_layer, newline="") as handle:
        rows = list(csv.DictReader(handle))
    layers = tuple(
        LayerEstimate(
            name=row["Name"],
            operator=row["NNG Operator"],
            npu_cycles=int(_number(row["NPU"])),
            op_cycles=int(_number(row["Op Cycles"])),
            macs=int(_number(row["MAC Count"])),
        )
        for row in rows
        if row.get("Target") == "NPU"
    )
    estimate = VelaEstimate(
        npu_cycles=int(_number(summary["cycles_npu"])),
        total_cycles=int(_number(summary["cycles_total"])),
        sram_traffic_bytes=int(_number(summary["sram_total_bytes"])),
        off_chip_flash_bytes=int(_number(summary["off_chip_flash_total_bytes"])),
        macs=int(_number(summary["nn_macs"])),
        layers=layers,
        sram_used_bytes=round(_number(summary["sram_memory_used"]) * 1024),  # KiB in the CSV
        arena_bytes=_arena_bytes(out_dir, stem),
    )
    return estimate, len(layers)


def _arena_bytes(out_dir: Path, stem: str) -> int:
    """Scratch plus fast scratch, as Vela sized them for the runtime: from the raw .npz, or from
    the ethos-u operators of Vela's .tflite output (a file with CPU operators)."""
    npz = out_dir / f"{stem}_vela.npz"
    if not npz.is_file():
        from ..sim.vela_tflite import load_compiled_tflite  # the command-stream decoder package

        graph = load_compiled_tflite(out_dir / f"{stem}_vela.tflite")
        return sum(p.scratch_size + p.scratch_fast_size for p in graph.npu_programs)
    with np.load(npz, allow_pickle=False) as data:
        return sum(
            int(data[k][0])
            for k in ("scratch_shape", "scratch_fast_shape")
            if k in data.files and len(data[k])
        )
