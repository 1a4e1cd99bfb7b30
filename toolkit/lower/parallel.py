"""Compile the fused and unfused variants at the same time on two or more CPUs.

The variants are independent and each compile is mostly single-threaded Python (quantization,
ExecuTorch's passes, Vela), so the second variant is compiled in a forked child while this process
compiles the first. A fork inherits the imported modules and the loaded model (no second import of
torch and ExecuTorch). The child's Program comes back through the program store on disk: it writes
OUT/VARIANT as every compile does, and compile_variant here then finds it under the same cache key.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ..artifacts import CalibrationSet, LoadedModel, Program, Quant, Variant
from ..forked import ForkedWork, can_fork_a_worker
from ..npu import NpuConfig
from .build_variant import compile_variant


def compile_variants(
    model: LoadedModel,
    calibration: CalibrationSet,
    variants: tuple[Variant, ...],
    npu: NpuConfig,
    out_dir: Path,
    extra_vela: tuple[str, ...],
    rewrites: tuple[str, ...],
    parallel: bool,
    quant: Quant = "int8",
) -> dict[Variant, Program]:
    """variant -> Program; with parallel and two variants, the last one in a forked child."""
    args = {v: (model, calibration, v, npu, out_dir, extra_vela, rewrites, quant) for v in variants}
    if not parallel or len(variants) != 2 or not can_fork_a_worker():
        return {v: compile_variant(*args[v]) for v in variants}
    first, second = variants
    child = ForkedWork(
        lambda: compile_variant(*args[second]).timings, f"compiling the {second} variant"
    )
    try:
        programs = {first: compile_variant(*args[first])}
    except BaseException:
        child.cancel()
        raise
    timings = child.result()
    # from the store the child wrote, with the stage times of the child's compile ({}: a cache hit)
    programs[second] = replace(compile_variant(*args[second]), timings=timings)
    return programs
