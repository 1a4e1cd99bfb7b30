"""What a job asks for: the model, target and options of one compile/compare/deploy or bench run."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .artifacts import QUANTS, Quant, Variant
from .errors import UserError

# What a job (a command line, an API call, a bench suite's settings) may ask: each evaluation
# sample is a run on the runner, each seed a compile; a seed stays a 32-bit generator seed with
# the evaluation's offset added.
MAX_SAMPLES = 10_000
MAX_SEEDS = 100
MAX_SEED = 2**31 - 1


def shown(value: int) -> str:
    """An integer as the user wrote it, cut when it is longer than a line can hold."""
    text = str(value)
    return text if len(text) <= 40 else f"{text[:20]}... ({len(text):,} digits)"


def check_range(name: str, value: int, low: int, high: int) -> None:
    """UserError unless low <= value <= high (name: the flag, e.g. --eval-samples)."""
    if value < low:
        raise UserError(f"{name} must be at least {low}, got {shown(value)}")
    if value > high:
        raise UserError(f"{name} {shown(value)} is out of range: give {low} to {high:,}")


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
    quant: Quant = "int8"  # "a16w8": int16 activations, int8 weights


def job_for(
    model: str,
    variants: tuple[Variant, ...],
    *,
    out_dir: Path = Path("etk-out"),
    target: str = "corstone-300",
    npu: str | None = None,
    system_config: str | None = None,
    memory_mode: str | None = None,
    vela_config: Path | None = None,
    input_shape: str | None = None,
    calibration_samples: int | None = None,
    calibration_data: Path | None = None,
    eval_data: Path | None = None,
    seeds: int = 1,
    seed: int = 0,
    eval_samples: int = 8,
    vela_options: tuple[str, ...] = (),
    rewrites: str = "default",
    io_layout: str = "nchw",
    parallel_variants: bool = True,
    quant: str = "int8",
) -> Job:
    """A Job from the options as the user names them (the CLI's flags, the Python API's keywords):
    with calibration data, calibration_samples is the size of each seed's subset."""
    return Job(
        model=model,
        target=target,
        variants=variants,
        npu=npu,
        system_config=system_config,
        memory_mode=memory_mode,
        vela_config=None if vela_config is None else Path(vela_config),
        input_shape=input_shape,
        calibration_samples=8 if calibration_samples is None else calibration_samples,
        calibration_dir=None if calibration_data is None else Path(calibration_data),
        seed=seed,
        eval_data=None if eval_data is None else Path(eval_data),
        seeds=seeds,
        calibration_subset=calibration_samples if calibration_data is not None else None,
        eval_samples=eval_samples,
        out_dir=Path(out_dir),
        extra_vela=tuple(vela_options),
        rewrites=rewrites,
        io_layout=io_layout,
        parallel_variants=parallel_variants,
        quant=check_quant(quant),
    )


def check_quant(quant: str) -> Quant:
    for known in QUANTS:
        if quant == known:
            return known
    raise UserError(f"--quant '{quant}' is not one of {', '.join(QUANTS)}")
