"""A .tflite file Vela already compiled (the ethos-u custom operator inside): run as it is.

Nothing is recompiled: the command stream, weights and arena plan are the file's own
(toolkit.sim.vela_tflite reads them). The NPU configuration is the one the stream was compiled
for; the operators around the NPU part run on the host.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections import Counter
from pathlib import Path

import numpy as np

from ..artifacts import CpuOp, Delegate, Program, TensorQuant, TensorSpec
from ..errors import UserError
from ..npu import NpuConfig

# the simulator package is also the command-stream decoder (payloads, registers, Vela .tflite)
from ..sim.families import commands
from ..sim.vela_tflite import TfliteGraph, load_compiled_tflite
from .npu_ops import kernel_operation_count


def _quant(t) -> TensorQuant | None:
    if t.scale is None or not np.issubdtype(t.dtype, np.integer):
        return None
    info = np.iinfo(t.dtype)
    return TensorQuant(t.scale, t.zero_point, int(info.min), int(info.max), t.dtype.name)


def compiled_npu(graph: TfliteGraph, npu: NpuConfig, npu_given: bool) -> NpuConfig:
    """The NPU the file's streams were compiled for (an explicit --npu must agree with it)."""
    compiled = {p.config.accelerator for p in graph.npu_programs if p.config is not None}
    if len(compiled) != 1:
        return npu
    (accelerator,) = compiled
    if npu_given and accelerator != npu.accelerator:
        raise UserError(
            f"{graph.source} was compiled by Vela for {accelerator}, not "
            f"{npu.accelerator}: pass --npu {accelerator} (or drop --npu)"
        )
    return dataclasses.replace(npu, accelerator=accelerator)


def load_compiled_program(
    path: Path, npu: NpuConfig, out_dir: Path, npu_given: bool = False
) -> Program:
    graph = load_compiled_tflite(path)
    npu = compiled_npu(graph, npu, npu_given)
    final = Path(out_dir) / "tflite"
    final.mkdir(parents=True, exist_ok=True)
    copy = final / Path(path).name
    if Path(path).resolve() != copy.resolve():
        shutil.copyfile(path, copy)
    delegates = []
    for i, npu_program in enumerate(graph.npu_programs):
        decoded = commands(npu.accelerator).decode(npu_program.command_stream)
        counts = Counter(c.name for c in decoded if c.is_operation)
        ops = dict(sorted(counts.items()))
        delegates.append(
            Delegate(i, None, copy, b"", npu_ops=kernel_operation_count(ops), command_ops=ops)
        )
    cpu_ops = tuple(
        CpuOp(
            op.op,
            graph.tensors[op.outputs[0]].name,
            copy.name,
            "outside the ethos-u operator: runs on the CPU (host here)",
        )
        for op in graph.cpu_ops
    )

    def specs(indices):
        return tuple(
            TensorSpec(graph.tensors[i].shape, graph.tensors[i].dtype.name) for i in indices
        )

    return Program(
        "tflite",
        copy.stem,
        npu,
        final,
        copy,
        tuple(delegates),
        cpu_ops,
        (),
        specs(graph.inputs),
        specs(graph.outputs),
        tuple(_quant(graph.tensors[i]) for i in graph.inputs),
        tuple(_quant(graph.tensors[i]) for i in graph.outputs),
    )
