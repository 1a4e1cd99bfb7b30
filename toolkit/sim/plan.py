"""A program decoded once: every NPU operation planned from its registers, cached per program.

What an operation reads and writes, its geometry and its bounds follow from the registers
alone; only memory contents change between runs, so a run replays the planned steps.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property, lru_cache

import numpy as np

from .commands import SYNC_OPERATIONS, Command
from .conv import prepare_conv
from .decoded import DecodedStreams
from .dma import prepare_dma
from .elementwise import prepare_elementwise
from .errors import PayloadError, UnsupportedError, at
from .families import accelerator as architecture
from .families import commands
from .memory import Memory, shram_bytes
from .native.batch import batched
from .payload import NpuProgram, forget_payloads
from .pool import forget_tables, prepare_pool
from .records import Step
from .registers import Registers
from .run_frame import RunFrame
from .weights import forget_formats


@dataclass(eq=False)
class Plan:
    program: NpuProgram
    accelerator: str
    decoded: DecodedStreams
    extent: dict[int, int]  # per region, the bytes the program uses (Memory.extent)
    steps: tuple[Step, ...]  # convolutions hold the plan's DecodedStreams: decoded on first use
    timed: dict = field(default_factory=dict)  # simulator.VelaSystem -> its Timing

    # the runs of the second run on (native.batch.batched of the steps' runs), made after the
    # first: a convolution's streams are fixed only once it has read them
    batched: list = field(default_factory=list)

    def execute(self, memory: Memory) -> None:
        """Run every step on memory (a merged run's members are done by its first)."""
        if self.batched:
            for run in self.batched:
                run(memory)
            return
        for number, step in enumerate(self.steps):
            try:
                step.run(memory)
            except PayloadError as exc:  # a stream read as it runs (a corrupt weight stream)
                record = step.record
                raise PayloadError(
                    f"operation {number} ({record.kind} at command-stream offset "
                    f"{record.offset:#x}): {exc}"
                ) from None
        # replaced whole, never extended: two first runs at once leave one copy, not two
        self.batched[:] = batched([s.run for s in self.steps if s.run is not _merged])

    @cached_property
    def frame(self) -> RunFrame:
        """Memory for this plan's runs (the weights region shared where nothing writes it)."""
        return RunFrame(self.program, self.accelerator, self.extent, self.decoded.constant_regions)

    @cached_property
    def blas(self) -> bool:
        """Whether a run makes BLAS products (numpy convolutions, where no native kernel runs)."""
        return any(step.blas for step in self.steps)


def new_memory(program: NpuProgram, accelerator: str, plan: Plan | None = None) -> Memory:
    """Memory for one run outside a plan's frame: the sizes the plan uses (without a plan, the
    payload's)."""
    if plan is not None:
        return plan.frame.memory()
    return RunFrame(program, accelerator, None, frozenset()).memory()


@lru_cache(maxsize=32)
def plan_for(program: NpuProgram, accelerator: str) -> Plan:
    """The program's plan, made on its first run in this process and kept for the next ones."""
    return _build(program, accelerator)


def forget_programs() -> None:
    """Drop every planned program and what it decoded (a fresh start, for benchmarks)."""
    plan_for.cache_clear()
    forget_payloads()
    forget_formats()
    forget_tables()


def _bounds(program: NpuProgram, accelerator: str) -> Memory:
    """A Memory with the program's region sizes, for the bounds checks of planning; nothing is
    allocated or copied (new_memory's copy of the weights and zeroed scratch are for runs)."""
    regions = {
        0: np.frombuffer(program.weights, dtype=np.uint8),
        1: _sized(program.scratch_size),
    }
    if program.fast_scratch_aliases_scratch:
        regions[2] = regions[1]
    elif program.scratch_fast_size:
        regions[2] = _sized(program.scratch_fast_size)
    return Memory(regions, shram_bytes(accelerator))


_ONE_BYTE = bytes(1)


def _sized(size: int) -> np.ndarray:
    """A read-only array of size zero bytes, all the same byte: a region's size for the bounds
    checks, with nothing allocated."""
    return np.ndarray((size,), np.uint8, buffer=_ONE_BYTE, strides=(0,))


def _build(program: NpuProgram, accelerator: str) -> Plan:
    memory = _bounds(program, accelerator)
    decoded = DecodedStreams()
    operations = _operations(program, accelerator)
    steps: list[Step] = []
    i = 0
    alone_until = 0  # operations before this are in a run that could not merge: planned alone
    while i < len(operations):
        cmd, values = operations[i]
        try:
            step = _prepare(cmd, Registers(values, cmd), memory, accelerator, decoded)
        except UnsupportedError as exc:
            exc.offset = cmd.offset
            raise
        steps.append(step)
        i += 1
        if step.byte_map is not None and i >= alone_until:
            taken, run_end = _merge_run(steps, operations, i, memory)
            # a run refused whole is not tried again from each of its operations: its tails
            # have the same overlap (and each try lists their bytes: quadratic in the run)
            alone_until = i if taken else run_end
            i += taken
        if steps[-1] is step and step.byte_map is not None:  # not merged: a copy on its own
            copied = step.byte_map.copy_run(memory)
            if copied is not None:
                steps[-1] = Step(step.record, copied, step.byte_map)
    for tensor in (*program.inputs, *program.outputs):
        memory.reach(tensor.region, tensor.offset + tensor.nbytes)
    decoded.constant_regions = _constant_regions(program, memory, steps)
    return Plan(program, accelerator, decoded, dict(memory.extent), tuple(steps))


def _constant_regions(program: NpuProgram, memory: Memory, steps: list[Step]) -> frozenset[int]:
    """The regions that no operation writes and no input is placed in (a region that aliases a
    written one is written)."""
    written = {r for s in steps for r, _ in s.record.bytes_written}
    written.update(t.region for t in program.inputs)
    changing = {id(memory.regions[r]) for r in written if r in memory.regions}
    return frozenset(r for r, buffer in memory.regions.items() if id(buffer) not in changing)


def _operations(program: NpuProgram, accelerator: str) -> list[tuple[Command, dict[str, int]]]:
    """(command, register values) of every operation that does something, up to NPU_OP_STOP
    (no Registers for each: a merged run's members are never prepared on their own)."""
    operations: list[tuple[Command, dict[str, int]]] = []
    stream = program.command_stream
    for cmd, values in commands(accelerator).operation_registers(stream, SYNC_OPERATIONS):
        if cmd.name == "NPU_OP_STOP":
            return operations
        if values is not None:
            operations.append((cmd, values))
    raise PayloadError(
        f"{program.source}: the command stream ends without NPU_OP_STOP (truncated?)"
    )


def _merge_run(steps: list[Step], operations: list, start: int, memory: Memory) -> tuple[int, int]:
    """Vela transposes a feature map with runs of 1x1 pools that differ only in their IFM and
    OFM addresses, each a constant step further (MobileNet's input: 96 of them). With the last
    of steps such a pool, the operations from `start` that continue its run are merged into
    it: they keep their own records, its run does them all (pool.ByteMap.merged_run decides
    when that is exact). Returns how many operations were taken, and where the run of
    operations like the last of steps ends."""
    first = steps[-1]
    cmd0, values0 = operations[start - 1]
    ifm0, ofm0 = values0.get("IFM_BASE0", 0), values0.get("OFM_BASE0", 0)
    ifm_step = ofm_step = 0
    expected = dict(values0)  # the registers of the run's next operation
    end = start  # the run so far: operations[start - 1 : end]
    for cmd, values in operations[start:]:
        if end == start:  # the second operation sets the steps
            ifm_step = values.get("IFM_BASE0", 0) - ifm0
            ofm_step = values.get("OFM_BASE0", 0) - ofm0
        count = end - start + 1
        expected["IFM_BASE0"] = ifm0 + count * ifm_step
        expected["OFM_BASE0"] = ofm0 + count * ofm_step
        if cmd.name != cmd0.name or cmd.param != cmd0.param or values != expected:
            break
        end += 1
    if end == start:
        return 0, end
    assert first.byte_map is not None
    run = first.byte_map.merged_run(end - start + 1, ifm_step, ofm_step, memory)
    if run is None:
        return 0, end
    steps[-1] = Step(first.record, run, first.byte_map)
    record = first.record
    steps.extend(
        Step(record._replace(offset=cmd.offset, registers=values), _merged)
        for cmd, values in operations[start:end]
    )
    return end - start, end


def _merged(mem: Memory) -> None:
    """An operation its run's first operation did (_merge_run)."""


def _prepare(cmd, regs, memory: Memory, accelerator: str, decoded: DecodedStreams):
    cores = architecture(accelerator).cores  # Vela sets PARALLEL_MODE = cores - 1 once, up front
    mode = regs.get("PARALLEL_MODE", 0)
    if mode != cores - 1:
        raise UnsupportedError(
            f"PARALLEL_MODE = {mode} is not implemented on {accelerator}, which has {cores} "
            f"core{'s' if cores > 1 else ''} (in {at(cmd.offset, cmd.name, cmd.param)})"
        )
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
