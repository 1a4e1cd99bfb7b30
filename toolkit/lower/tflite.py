"""A .tflite model compiled by Vela as it is: the reference side of the PyTorch-vs-TFLite gap.

There is no fusion A/B and no TOSA graph: Vela reads the TFLite file directly. The Program has one
delegate (Vela's raw output), the operators Vela leaves to the CPU, and no host graph: it runs on
runners that execute Vela's command stream (the simulator).
"""

from __future__ import annotations

import csv
import dataclasses
import shutil
from pathlib import Path

import numpy as np

from ..artifacts import CpuOp, Delegate, Program, TensorQuant, TensorSpec
from ..errors import ToolError, UserError
from ..npu import NpuConfig
from .compiled_tflite import load_compiled_program
from .npu_ops import command_stream_operations, kernel_operation_count
from .staging import move_into_place, new_staging
from .tflite_check import check_tflite
from .vela import read_estimate, run_vela, vela_flags

INT_TYPES = {1: "int8", 2: "int16", 4: "int32"}
# Vela's raw output holds one NPU command stream and nothing else
_CPU_OPS_IN_RAW = "RawWriter expects a graph without passthrough/CPU operations"


def _io(data, prefix: str) -> tuple[tuple[TensorSpec, ...], tuple[TensorQuant, ...]]:
    specs, quants = [], []
    for shape, size, quant in zip(
        data[f"{prefix}_shape"], data[f"{prefix}_elem_size"], data[f"{prefix}_quantization"]
    ):
        dims = [int(d) for d in shape]
        while len(dims) > 1 and dims[0] == 1:
            dims.pop(0)
        dtype = INT_TYPES[int(size)]
        specs.append(TensorSpec((1, *dims), dtype))
        info = np.iinfo(dtype)
        quants.append(
            TensorQuant(
                float(quant["scale"][0]),
                int(quant["zero_point"][0]),
                int(info.min),
                int(info.max),
                dtype,
            )
        )
    return tuple(specs), tuple(quants)


def _cpu_ops(per_layer_csv: Path, source: str) -> tuple[CpuOp, ...]:
    with open(per_layer_csv, newline="") as handle:
        return tuple(
            CpuOp(row["Original Operator"], row["Name"], source, "Vela leaves it to the CPU")
            for row in csv.DictReader(handle)
            if row.get("Target") != "NPU"
        )


def compile_tflite(
    path: Path, npu: NpuConfig, out_dir: Path, extra_vela: tuple[str, ...] = ()
) -> Program:
    path = Path(path)
    if not path.is_file():
        raise UserError(f"model file {path} not found")
    check_tflite(path)
    final = Path(out_dir) / "tflite"
    staging = new_staging(final)
    shutil.copyfile(path, staging / path.name)
    flags = vela_flags(npu, extra_vela)
    vela_dir = staging / "vela_delegate0"
    try:
        npz = run_vela(staging / path.name, vela_dir, flags)
    except ToolError as exc:
        if _CPU_OPS_IN_RAW not in str(exc):
            raise
        return _with_cpu_ops(path, npu, staging, final, vela_dir, flags)
    estimate, _ = read_estimate(vela_dir, path.stem)
    operations = command_stream_operations(npz, npu)
    with np.load(npz, allow_pickle=True) as data:  # *_quantization are object arrays
        input_specs, input_quant = _io(data, "input")
        output_specs, output_quant = _io(data, "output")
    cpu_ops = _cpu_ops(vela_dir / f"{path.stem}_per-layer.csv", path.name)
    move_into_place(staging, final)
    delegate = Delegate(
        0,
        None,
        final / vela_dir.name / npz.name,
        b"",
        {},
        kernel_operation_count(operations),
        operations,
        estimate,
        input_quant,
        output_quant,
    )
    return Program(
        "tflite",
        path.stem,
        npu,
        final,
        final / path.name,
        (delegate,),
        cpu_ops,
        flags,
        input_specs,
        output_specs,
        input_quant,
        output_quant,
    )


def _with_cpu_ops(
    path: Path, npu: NpuConfig, staging: Path, final: Path, vela_dir: Path, flags: tuple[str, ...]
) -> Program:
    """A file with CPU operators (QUANTIZE/DEQUANTIZE at float edges, ...): Vela's TFLite output,
    the NPU part as ethos-u operators, the rest run on the host (toolkit.sim.vela_tflite)."""
    flags = tuple(f for f in flags if not f.startswith("--output-format")) + (
        "--output-format=tflite",
    )
    shutil.rmtree(vela_dir, ignore_errors=True)
    run_vela(staging / path.name, vela_dir, flags)
    estimate, _ = read_estimate(vela_dir, path.stem)
    cpu_ops = _cpu_ops(vela_dir / f"{path.stem}_per-layer.csv", path.name)
    move_into_place(staging, final)
    compiled = final / vela_dir.name / f"{path.stem}_vela.tflite"
    program = load_compiled_program(compiled, npu, final.parent, npu_given=True)
    delegates = tuple(
        dataclasses.replace(d, estimate=estimate if d.index == 0 else None)
        for d in program.delegates
    )
    return dataclasses.replace(
        program, model_name=path.stem, delegates=delegates, cpu_ops=cpu_ops, vela_flags=flags
    )
