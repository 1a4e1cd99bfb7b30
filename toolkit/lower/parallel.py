"""Compile the fused and unfused variants at the same time on two or more CPUs.

The variants are independent and each compile is mostly single-threaded Python (quantization,
ExecuTorch's passes, Vela), so the second variant is compiled in a forked child while this process
compiles the first. A fork inherits the imported modules and the loaded model (no second import of
torch and ExecuTorch). The child's Program comes back through the program store on disk: it writes
OUT/VARIANT as every compile does, and compile_variant here then finds it under the same cache key.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
from dataclasses import replace
from pathlib import Path

from ..artifacts import CalibrationSet, LoadedModel, Program, Quant, Variant
from ..child_process import end_with_parent
from ..errors import ToolError
from ..npu import NpuConfig
from .build_variant import compile_variant


def _child(connection, args, parent: int) -> None:
    end_with_parent(parent)
    import torch

    # GNU OpenMP's worker threads do not survive a fork: a parallel region in the child would
    # wait for them forever. One thread each, and the two processes use the two CPUs.
    torch.set_num_threads(1)
    try:
        connection.send(compile_variant(*args).timings)
    except BaseException as exc:  # noqa: BLE001 - re-raised in the parent
        try:
            connection.send(pickle.loads(pickle.dumps(exc)))
        except Exception:  # noqa: BLE001 - one that does not pickle (any type): its text
            connection.send(ToolError(f"{type(exc).__name__}: {exc}"))
    finally:
        connection.close()


def can_compile_in_parallel() -> bool:
    return (
        (os.cpu_count() or 1) >= 2
        and "fork" in multiprocessing.get_all_start_methods()
        and not multiprocessing.current_process().daemon
    )


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
    if not parallel or len(variants) != 2 or not can_compile_in_parallel():
        return {v: compile_variant(*args[v]) for v in variants}
    first, second = variants
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=_child, args=(send, args[second], os.getpid()), daemon=True)
    child.start()
    send.close()
    try:
        programs = {first: compile_variant(*args[first])}
    except BaseException:
        child.terminate()
        child.join()
        raise
    try:
        outcome = receive.recv()
    except EOFError:  # the child died before it could report
        child.join()
        raise ToolError(
            f"compiling the {second} variant in a child process failed (exit code {child.exitcode})"
        ) from None
    child.join()
    if isinstance(outcome, BaseException):
        raise outcome
    # from the store the child wrote, with the stage times of the child's compile ({}: a cache hit)
    programs[second] = replace(compile_variant(*args[second]), timings=outcome)
    return programs
