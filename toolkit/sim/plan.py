"""A program decoded once: every NPU operation planned from its registers, cached per program.

What an operation reads and writes, its geometry and its bounds follow from the registers
alone; only memory contents change between runs, so a run replays the planned steps.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np

from . import derived_store
from .commands import SYNC_OPERATIONS, Command, operation_registers
from .conv import prepare_conv
from .decoded import DecodedStreams
from .dma import prepare_dma
from .elementwise import prepare_elementwise
from .errors import PayloadError, UnsupportedError, at
from .families import accelerator as architecture
from .memory import Memory, shram_bytes
from .native.batch import batched
from .payload import NpuProgram, forget_payloads
from .pool import forget_tables, prepare_pool
from .records import Step, with_fields
from .registers import Registers
from .run_frame import RunFrame
from .weights import forget_formats

_CACHE: OrderedDict[tuple[int, str], tuple[NpuProgram, Plan]] = OrderedDict()
_CACHE_SIZE = 32


@dataclass(eq=False)  # not frozen: a frozen init's setattr per field cost a cold run 2 us
class Plan:
    program: NpuProgram
    accelerator: str
    decoded: DecodedStreams
    extent: dict[int, int]  # per region, the bytes the program uses (Memory.extent)
    operation_count: int
    steps: tuple[Step, ...]  # convolutions hold the plan's DecodedStreams: decoded on first use
    timed: dict = field(default_factory=dict)  # simulator.MemorySystem -> its Timing
    store: str | None = None  # derived_store file kept next to the compiled program
    # what the store holds (timing keyed by memory system and ini content), and its size as
    # (decoded streams, timing entries) when it was last read or written
    stored: derived_store.Derived = field(default_factory=derived_store.Derived)
    saved: list = field(default_factory=lambda: [0, 0])

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

    def save_if_new(self) -> None:
        """Write what this process derived to the store, when it holds something new."""
        if self.store is None:
            return
        size = [self.decoded.size, len(self.stored.timing)]
        if size == self.saved:
            return
        self.decoded.export(self.stored)
        derived_store.save(self.store, self.stored, self.program.weights)
        self.saved[:] = size


def new_memory(program: NpuProgram, accelerator: str, plan: Plan | None = None) -> Memory:
    """Memory for one run outside a plan's frame: the sizes the plan uses (without a plan, the
    payload's)."""
    if plan is not None:
        return plan.frame.memory()
    return RunFrame(program, accelerator, None, frozenset()).memory()


def plan_for(program: NpuProgram, accelerator: str, store_folder: Path | None = None) -> Plan:
    """The program's plan; with store_folder (the compiled program's folder), what an earlier
    process derived from the program is read from there, and what this one derives is kept."""
    # by the program object (kept alive in the entry, so its id is not reused): hashing the
    # program's fields at each lookup cost more than the rest of a small run's bookkeeping
    key = (id(program), accelerator)
    entry = _CACHE.get(key)
    if entry is not None and entry[0] is program:
        plan: Plan | None = entry[1]
        _CACHE.move_to_end(key)
    else:
        plan = None
    if store_folder is not None and (plan is None or plan.store is None):
        plan = _with_store(plan, program, accelerator, store_folder)
    elif plan is None:
        plan = _build(program, accelerator)
    if entry is None or entry[1] is not plan:
        _CACHE[key] = (program, plan)
        _CACHE.move_to_end(key)
        if len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return plan


def forget_programs() -> None:
    """Drop every planned program and what it decoded (a fresh start, for benchmarks)."""
    _CACHE.clear()
    forget_payloads()
    forget_formats()
    forget_tables()


def _with_store(plan: Plan | None, program: NpuProgram, accelerator: str, folder: Path) -> Plan:
    """The program's plan (planned now, unless given), reading and keeping what it derives in
    folder's store for the program."""
    store = derived_store.store_file(folder, program, accelerator)
    stored = derived_store.load(store, program.weights)
    if plan is None:
        plan = _build(program, accelerator)
    # timed afresh: figures computed before the store was known go into it too
    if stored is None:
        return dataclasses.replace(plan, timed={}, store=store)
    plan.decoded.add(stored)  # the steps hold this DecodedStreams
    saved = [plan.decoded.size, len(stored.timing)]
    return dataclasses.replace(plan, timed={}, store=store, stored=stored, saved=saved)


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
    """A read-only array of size zero bytes, all the same byte (np.broadcast_to's 10 us a call
    were a twentieth of planning a small program)."""
    return np.ndarray((size,), np.uint8, buffer=_ONE_BYTE, strides=(0,))


def _build(program: NpuProgram, accelerator: str) -> Plan:
    memory = _bounds(program, accelerator)
    decoded = DecodedStreams()
    operations = _operations(program)
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
        step = step._replace(record=with_fields(step.record, registers=values))
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
    return Plan(program, accelerator, decoded, dict(memory.extent), len(steps), tuple(steps))


def _constant_regions(program: NpuProgram, memory: Memory, steps: list[Step]) -> frozenset[int]:
    """The regions that no operation writes and no input is placed in (a region that aliases a
    written one is written)."""
    written = {r for s in steps for r, _ in s.record.bytes_written}
    written.update(t.region for t in program.inputs)
    changing = {id(memory.regions[r]) for r in written if r in memory.regions}
    return frozenset(r for r, buffer in memory.regions.items() if id(buffer) not in changing)


def _operations(program: NpuProgram) -> list[tuple[Command, dict[str, int]]]:
    """(command, register values) of every operation that does something, up to NPU_OP_STOP
    (no Registers for each: a merged run's members are never prepared on their own)."""
    operations: list[tuple[Command, dict[str, int]]] = []
    for cmd, values in operation_registers(program.command_stream, SYNC_OPERATIONS):
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
        Step(with_fields(record, offset=cmd.offset, registers=values), _merged)
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
