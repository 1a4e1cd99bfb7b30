"""What a job asks for: the model, target and options of one compile/compare/deploy or bench run."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .artifacts import Variant


@dataclass(frozen=True)
class Job:
    model: str
    target: str = "corstone-300"
    variants: tuple[Variant, ...] = ("fused", "unfused")
    npu: str | None = None
    system_config: str | None = None
    memory_mode: str | None = None
    vela_config: Path | None = None  # a vendor's Vela ini (--vela-config)
    input_shape: str | None = None
    calibration_samples: int = 8
    calibration_dir: Path | None = None
    seed: int = 0
    eval_samples: int = 8
    out_dir: Path = Path("etk-out")
    extra_vela: tuple[str, ...] = ()
    rewrites: str = "default"  # "default", "none" or comma-separated names (toolkit/rewrites)
    io_layout: str = "nchw"  # "nhwc": channels-last model interface (models/layout.py)
    eval_data: Path | None = None  # x.npy + y.npy: task accuracy (top-1 or ROC AUC)
    seeds: int = 1  # calibrations (seeds, or subsets of calibration_dir) to evaluate each variant
    calibration_subset: int | None = None  # samples per seed's subset of calibration_dir
    parallel_variants: bool = False  # compile the two variants at once (lower/parallel.py)
