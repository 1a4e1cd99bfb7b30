"""Build one variant: quantize (fused or unfused), lower through ExecuTorch, TOSA and Vela:
LoadedModel + calibration + variant + NPU -> Program (files in OUT).

Each delegate's payload and its estimate come from the same Vela run (vela_runs.py).
Results are cached by content hash of model, calibration, options and tool versions: in-process
(a program compiled earlier into another folder is copied from there), on disk in OUT/VARIANT
(program_store.py), which is written atomically: complete or absent, and, when ETK_CACHE_DIR is
set, in a cache shared between processes (compile_cache.py).
"""

from __future__ import annotations

import hashlib
import shutil
import sys
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

from ..artifacts import CalibrationSet, Delegate, LoadedModel, Program, Quant, Variant
from ..console_capture import COMPILER_SIDE, quiet_torch_import
from ..npu import NpuConfig, vela_ini_path
from ..rewrites import DEFAULT_REWRITES
from ..versions import tool_versions, toolkit_source_hash
from .compile_cache import PublishFailed, held_entry, mark_used, publish
from .npu_ops import command_stream_operations, kernel_operation_count
from .program_store import StoreDamaged, copy_stored_program, load_stored_program, save_program
from .staging import move_into_place, new_staging
from .tosa_graph import read_tosa
from .tosa_probe import trust_compiled
from .vela import read_estimate, vela_flags

_CACHE: dict[str, Program] = {}


def print_note(text: str) -> None:
    print(f"etk: {text}", file=sys.stderr)


@contextmanager
def _timed(timings: dict[str, float], stage: str):
    start = time.perf_counter()
    yield
    timings[stage] = timings.get(stage, 0.0) + time.perf_counter() - start


def cache_key(
    model: LoadedModel,
    calibration: CalibrationSet,
    variant: Variant,
    npu: NpuConfig,
    extra_vela: tuple[str, ...],
    rewrites: tuple[str, ...],
    quant: Quant = "int8",
) -> str:
    """Everything the compiled result depends on, tool versions included: what the model computes
    (its content hash digests the traced graph, its tensors and inputs) and its name, which the
    stored program carries."""
    ini = hashlib.sha256(vela_ini_path(npu.config_ini).read_bytes()).hexdigest()  # edits count
    parts = (
        model.content_hash,
        model.name,
        calibration.content_hash,
        variant,
        repr(npu),
        ini,
        repr(extra_vela),
        repr(rewrites),
        quant,
        toolkit_source_hash(),
        *sorted(tool_versions().items()),
    )
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:24]


def _copy_compiled(
    source: Path, final: Path, key: str, note: Callable[[str], None]
) -> Program | None:
    """The same program compiled earlier into another folder (by this process, or by another into
    the shared cache), copied into final: cheaper than compiling again. None if that folder is
    absent, gone or changed (said in a note when it is damaged)."""
    staging = new_staging(final)
    if not copy_stored_program(source, staging):
        shutil.rmtree(staging, ignore_errors=True)
        return None
    move_into_place(staging, final)
    try:
        program = load_stored_program(final, key)
    except StoreDamaged as damage:
        note(f"note: the stored program in {source} is damaged ({damage}): compiling it again")
        return None
    if program is not None:
        _CACHE[key] = program
    return program


def compile_variant(
    model: LoadedModel,
    calibration: CalibrationSet,
    variant: Variant,
    npu: NpuConfig,
    out_dir: Path,
    extra_vela: tuple[str, ...] = (),
    rewrites: tuple[str, ...] = DEFAULT_REWRITES,
    quant: Quant = "int8",
    note: Callable[[str], None] = print_note,
) -> Program:
    key = cache_key(model, calibration, variant, npu, extra_vela, rewrites, quant)
    final = Path(out_dir) / variant
    cached = _CACHE.get(key)
    if cached is not None and cached.out_dir == final and final.is_dir():
        return cached
    if cached is not None and cached.out_dir != final:
        copied = _copy_compiled(cached.out_dir, final, key, note)
        if copied is not None:
            return copied
    try:
        stored = load_stored_program(final, key)
    except StoreDamaged as damage:
        note(f"note: the stored program in {final} is damaged ({damage}): compiling it again")
    else:
        if stored is not None:
            _CACHE[key] = stored
            return stored
    with held_entry(key) as shared:
        if shared is not None and (copied := _copy_compiled(shared, final, key, note)) is not None:
            mark_used(shared)
            return copied
        program = _build(model, calibration, variant, npu, final, key, extra_vela, rewrites, quant)
        if shared is not None:
            try:
                publish(final, shared)
            except PublishFailed as failure:
                note(f"note: the compiled program was not kept in the compile cache: {failure}")
        return program


def _build(
    model: LoadedModel,
    calibration: CalibrationSet,
    variant: Variant,
    npu: NpuConfig,
    final: Path,
    key: str,
    extra_vela: tuple[str, ...],
    rewrites: tuple[str, ...],
    quant: Quant,
) -> Program:
    """Compile into a staging folder, store the program there and move it into final."""
    quiet_torch_import(COMPILER_SIDE)
    from .compiler import lower, quantize, upstream_speedups

    staging = new_staging(final)
    timings: dict[str, float] = {}
    with upstream_speedups():  # same bytes, less repeated upstream work
        with _timed(timings, "quantize"):
            quantized = quantize(model, calibration, variant, npu, rewrites=rewrites, quant=quant)
        with _timed(timings, "lower"):
            lowered = lower(quantized, npu, staging, rewrites=rewrites, extra_vela=extra_vela)
    flags = vela_flags(npu, extra_vela)
    delegates = []
    with _timed(timings, "reports"):
        for index, (tosa, payload, vela_dir, (d_in, d_out)) in enumerate(
            zip(lowered.tosa_files, lowered.payloads, lowered.vela_dirs, lowered.delegate_io)
        ):
            trust_compiled(tosa.read_bytes())
            npz = vela_dir / f"{tosa.stem}_vela.npz"
            estimate, vela_layers = read_estimate(vela_dir, tosa.stem)
            operations = command_stream_operations(payload, npu)
            delegates.append(
                Delegate(
                    index=index,
                    tosa_path=final / tosa.name,
                    vela_npz_path=final / vela_dir.name / npz.name,
                    payload=payload,
                    tosa_ops=read_tosa(tosa).histogram(),
                    npu_ops=kernel_operation_count(operations) if operations else vela_layers,
                    command_ops=operations,
                    estimate=estimate,
                    inputs=d_in,
                    outputs=d_out,
                )
            )
    (staging / "model.pte").write_bytes(lowered.pte)
    program = Program(
        variant=variant,
        model_name=model.name,
        npu=npu,
        out_dir=final,
        pte_path=final / "model.pte",
        delegates=tuple(delegates),
        cpu_ops=lowered.cpu_ops,
        vela_flags=flags,
        input_specs=lowered.input_specs,
        output_specs=lowered.output_specs,
        input_quant=lowered.input_quant,
        output_quant=lowered.output_quant,
        decisions=quantized.decisions,
        rewrites=quantized.rewrites + lowered.rewrites,
        graph_module=lowered.graph_module,
        timings=timings,
    )
    save_program(program, staging, key)
    move_into_place(staging, final)
    _CACHE[key] = program
    return program
