"""A program decoded once: every NPU operation described by its family and planned by the shared
engines, cached per program.

What an operation reads and writes, its geometry and its bounds follow from its description
alone (which its family's decoder makes from the registers); only memory contents change
between runs, so a run replays the planned steps.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property, lru_cache

import numpy as np

from .decoded import DecodedStreams
from .engines import prepare
from .errors import PayloadError, UnsupportedError
from .families import Accelerator, families
from .families.family import RawOperation
from .memory import Memory
from .native.batch import batched
from .payload import NpuProgram, forget_payloads
from .pool import forget_tables
from .records import Step
from .run_frame import RunFrame


@dataclass(eq=False)
class Plan:
    program: NpuProgram
    accelerator: Accelerator
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


def new_memory(program: NpuProgram, accelerator: Accelerator, plan: Plan | None = None) -> Memory:
    """Memory for one run outside a plan's frame: the sizes the plan uses (without a plan, the
    payload's)."""
    if plan is not None:
        return plan.frame.memory()
    return RunFrame(program, accelerator, None, frozenset()).memory()


@lru_cache(maxsize=32)
def plan_for(program: NpuProgram, accelerator: Accelerator) -> Plan:
    """The program's plan, made on its first run in this process and kept for the next ones."""
    return _build(program, accelerator)


def forget_programs() -> None:
    """Drop every planned program and what it decoded (a fresh start, for benchmarks)."""
    plan_for.cache_clear()
    forget_payloads()
    for family in families():
        family.forget()
    forget_tables()


def _bounds(program: NpuProgram, accelerator: Accelerator) -> Memory:
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
    for region, size in accelerator.family.internal_regions(accelerator).items():
        regions[region] = _sized(size)
    return Memory(regions, accelerator.shram_bytes)


_ONE_BYTE = bytes(1)


def _sized(size: int) -> np.ndarray:
    """A read-only array of size zero bytes, all the same byte: a region's size for the bounds
    checks, with nothing allocated."""
    return np.ndarray((size,), np.uint8, buffer=_ONE_BYTE, strides=(0,))


def _build(program: NpuProgram, accelerator: Accelerator) -> Plan:
    family = accelerator.family
    memory = _bounds(program, accelerator)
    decoded = DecodedStreams(family)
    operations = family.operations(program)
    steps: list[Step] = []
    i = 0
    alone_until = 0  # operations before this are in a run that could not merge: planned alone
    while i < len(operations):
        cmd, values = operations[i]
        try:
            step = prepare(family.describe(accelerator, cmd, values), memory, decoded)
        except UnsupportedError as exc:
            exc.offset = cmd.offset
            raise
        steps.append(step)
        i += 1
        if step.byte_map is not None and i >= alone_until:
            taken, run_end = _merge_run(steps, operations, i, memory, accelerator)
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


def _merge_run(
    steps: list[Step],
    operations: list[RawOperation],
    start: int,
    memory: Memory,
    accelerator: Accelerator,
) -> tuple[int, int]:
    """Vela transposes a feature map with runs of 1x1 pools that differ only in their IFM and
    OFM addresses, each a constant step further (the family finds such runs:
    NpuFamily.address_run). With the last of steps such a pool, the operations from `start`
    that continue its run are merged into it: they keep their own records, its run does them
    all (pool.ByteMap.merged_run decides when that is exact). Returns how many operations were
    taken, and where the run of operations like the last of steps ends."""
    first = steps[-1]
    end, ifm_step, ofm_step = accelerator.family.address_run(operations, start - 1)
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
