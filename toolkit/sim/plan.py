"""A program decoded once: every NPU operation planned from its registers, cached per program.

What an operation reads and writes, its geometry and its bounds follow from the registers
alone; only memory contents change between runs, so a run replays the planned steps.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from .commands import decode
from .conv import prepare_conv
from .decoded import DecodedStreams
from .dma import prepare_dma
from .elementwise import prepare_elementwise
from .errors import PayloadError, UnsupportedError, at
from .memory import Memory, shram_bytes
from .payload import NpuProgram, load_npz
from .pool import forget_tables, prepare_pool
from .records import Step
from .registers import RegisterFile
from .weights import forget_formats

_NO_OP = frozenset({"NPU_OP_DMA_WAIT", "NPU_OP_KERNEL_WAIT", "NPU_OP_PMU_MASK", "NPU_OP_IRQ"})
_CACHE: OrderedDict[tuple, Plan] = OrderedDict()
_CACHE_SIZE = 32


@dataclass(frozen=True)
class Plan:
    steps: tuple[Step, ...]  # convolutions hold the plan's DecodedStreams: decoded on first use
    timed: dict = field(default_factory=dict)  # (system config, memory mode, ini) -> records


def new_memory(program: NpuProgram, accelerator: str) -> Memory:
    regions = {
        0: np.frombuffer(program.weights, dtype=np.uint8).copy(),
        1: np.zeros(program.scratch_size, dtype=np.uint8),
    }
    if program.fast_scratch_aliases_scratch:
        regions[2] = regions[1]
    elif program.scratch_fast_size:
        regions[2] = np.zeros(program.scratch_fast_size, dtype=np.uint8)
    return Memory(regions, shram_bytes(accelerator))


def plan_for(program: NpuProgram, accelerator: str) -> Plan:
    key = (program, accelerator)
    plan = _CACHE.get(key)
    if plan is None:
        plan = _build(program, accelerator)
        _CACHE[key] = plan
        if len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    else:
        _CACHE.move_to_end(key)
    return plan


def forget_programs() -> None:
    """Drop every planned program and what it decoded (a fresh start, for benchmarks)."""
    _CACHE.clear()
    load_npz.cache_clear()
    forget_formats()
    forget_tables()


def _build(program: NpuProgram, accelerator: str) -> Plan:
    memory = new_memory(program, accelerator)  # region sizes for the bounds checks
    registers = RegisterFile()
    decoded = DecodedStreams()
    steps = []
    for cmd in decode(program.command_stream):
        if not cmd.is_operation:
            registers.write(cmd)
            continue
        if cmd.name == "NPU_OP_STOP":
            return Plan(tuple(steps))
        if cmd.name in _NO_OP:
            continue
        regs = registers.snapshot(cmd)
        try:
            step = _prepare(cmd, regs, memory, accelerator, decoded)
        except UnsupportedError as exc:
            exc.offset = cmd.offset
            raise
        record = dataclasses.replace(step.record, registers=tuple(regs.values.items()))
        steps.append(Step(record, step.run))
    raise PayloadError(
        f"{program.source}: the command stream ends without NPU_OP_STOP (truncated?)"
    )


def _prepare(cmd, regs, memory: Memory, accelerator: str, decoded: DecodedStreams):
    if cmd.name == "NPU_OP_CONV":
        return prepare_conv(regs, memory, accelerator, False, decoded)
    if cmd.name == "NPU_OP_DEPTHWISE":
        return prepare_conv(regs, memory, accelerator, True, decoded)
    if cmd.name == "NPU_OP_POOL":
        return prepare_pool(regs, memory)
    if cmd.name == "NPU_OP_ELEMENTWISE":
        return prepare_elementwise(regs, memory)
    if cmd.name == "NPU_OP_DMA_START":
        return prepare_dma(regs, memory)
    raise UnsupportedError(
        f"{at(cmd.offset, cmd.name, cmd.param)} is not implemented by the simulator"
    )
