"""The interpreter: place inputs, run the command stream, read outputs back."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from . import cycles as cycle_model
from ..npu import npu_config
from .commands import decode
from .conv import run_conv
from .dma import run_dma
from .errors import PayloadError, SimError, UnsupportedError, at
from .memory import Memory
from .payload import NpuProgram
from .pool import run_pool
from .records import OpRecord
from .registers import RegisterFile

ACCELERATORS = ("ethos-u55-32", "ethos-u55-64", "ethos-u55-128", "ethos-u55-256", "ethos-u65-256")
_NO_OP = frozenset({"NPU_OP_DMA_WAIT", "NPU_OP_KERNEL_WAIT", "NPU_OP_PMU_MASK", "NPU_OP_IRQ"})


@dataclass(frozen=True)
class SimResult:
    outputs: list[np.ndarray]
    operations: tuple[OpRecord, ...]
    cycles: int  # total of our cycle model
    accelerator: str


def check_accelerator(program: NpuProgram, accelerator: str) -> None:
    if accelerator not in ACCELERATORS:
        raise SimError(f"the simulator runs {', '.join(ACCELERATORS)}, not '{accelerator}'")
    if program.config is not None and program.config.accelerator != accelerator:
        raise SimError(f"{program.source} was compiled for {program.config.accelerator}, "
                       f"not {accelerator}: compile for the NPU you simulate")


def _memory(program: NpuProgram) -> Memory:
    regions = {0: np.frombuffer(program.weights, dtype=np.uint8).copy(),
               1: np.zeros(program.scratch_size, dtype=np.uint8)}
    if program.scratch_fast_size:
        regions[2] = np.zeros(program.scratch_fast_size, dtype=np.uint8)
    return Memory(regions)


def _place_inputs(program: NpuProgram, memory: Memory, inputs: Sequence[np.ndarray]) -> None:
    if len(inputs) != len(program.inputs):
        raise SimError(f"{program.source} takes {len(program.inputs)} inputs, got {len(inputs)}")
    for i, (tensor, value) in enumerate(zip(program.inputs, inputs)):
        value = np.asarray(value)
        if value.size != int(np.prod(tensor.shape)):
            raise SimError(f"input {i} has shape {value.shape} ({value.size} elements); the "
                           f"program expects {tensor.squeezed_shape}")
        if not np.issubdtype(value.dtype, np.integer) or value.dtype.itemsize != tensor.elem_size:
            raise SimError(f"input {i} is {value.dtype}; the program expects "
                           f"{tensor.dtype} (quantize it first)")
        raw = np.ascontiguousarray(value.astype(tensor.dtype, copy=False)).reshape(-1)
        memory.write_bytes(tensor.region, tensor.offset, raw.view(np.uint8), f"input {i}")


def _read_outputs(program: NpuProgram, memory: Memory) -> list[np.ndarray]:
    outputs = []
    for i, tensor in enumerate(program.outputs):
        raw = memory.read_bytes(tensor.region, tensor.offset, tensor.nbytes, f"output {i}")
        outputs.append(raw.copy().view(tensor.dtype).reshape(tensor.squeezed_shape))
    return outputs


def simulate(program: NpuProgram, inputs: Sequence[np.ndarray], accelerator: str,
             system_config: str | None = None, memory_mode: str | None = None) -> SimResult:
    """Run the program; system config and memory mode (Vela's, for the cycle model) default to
    ExecuTorch's defaults for the NPU family."""
    check_accelerator(program, accelerator)
    npu = npu_config(accelerator, system_config, memory_mode)
    memory_ports = cycle_model.memory_system(accelerator, npu.system_config, npu.memory_mode)
    commands = decode(program.command_stream)
    memory = _memory(program)
    _place_inputs(program, memory, inputs)
    registers = RegisterFile()
    records: list[OpRecord] = []
    stopped = False
    for cmd in commands:
        if not cmd.is_operation:
            registers.write(cmd)
            continue
        if cmd.name == "NPU_OP_STOP":
            stopped = True
            break
        if cmd.name in _NO_OP:
            continue
        regs = registers.snapshot(cmd)
        if cmd.name == "NPU_OP_CONV":
            record = run_conv(regs, memory, accelerator, depthwise=False)
        elif cmd.name == "NPU_OP_DEPTHWISE":
            record = run_conv(regs, memory, accelerator, depthwise=True)
        elif cmd.name == "NPU_OP_POOL":
            record = run_pool(regs, memory)
        elif cmd.name == "NPU_OP_DMA_START":
            record = run_dma(regs, memory)
        else:
            raise UnsupportedError(f"{at(cmd.offset, cmd.name, cmd.param)} is not implemented "
                                   "by the simulator")
        record = dataclasses.replace(
            record, registers=tuple(sorted(regs.values.items())),
            cycles=cycle_model.op_cycles(record, accelerator, memory_ports))
        records.append(record)
    if not stopped:
        raise PayloadError(f"{program.source}: the command stream ends without NPU_OP_STOP "
                           "(truncated?)")
    return SimResult(_read_outputs(program, memory), tuple(records),
                     sum(r.cycles for r in records), accelerator)
