"""Each NPU operation's cycles, MACs and traffic: from etk's cycle model where the simulator runs
the NPU, else from Vela's per-operation estimate.

This is the one place the per-layer profile reads the simulator: a simulated run's per-operation
records (`SimResult.operations`, which depend on the command stream only) and what each
operation moves (its NPU family's `transfers`). An NPU family the simulator does not run yet
(Ethos-U85) gets Vela's estimate per scheduled operation, labelled "estimate": once its
simulation exists, its records feed the same figures.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..artifacts import Delegate, DelegateAttribution, Program


class OpShape(NamedTuple):
    """What the MAC array works on in one operation (the simulator's decoded registers)."""

    kind: str  # "conv", "depthwise", "pool.average", "elementwise.add", ...
    ifm: tuple[int, int, int]  # h, w, c
    ofm: tuple[int, int, int]
    kernel: tuple[int, int, int, int]  # kh, kw, stride y, stride x
    block: tuple[int, int, int]  # OFM block h, w, c
    ublock: tuple[int, int, int]  # the MAC array's u-block h, w, c
    ifm_bytes: int  # bytes per IFM element
    output_cycles: float  # the output stage's cycles per OFM element
    part_kernel_first: bool = False  # Vela's traversal for shallow IFMs: 8 channels a step


class OpFigures(NamedTuple):
    """One NPU operation (a kernel or a DMA), or one scheduled operation of an estimate."""

    offset: int  # command-stream offset of its NPU_OP command
    kind: str  # the simulator's kind ("conv", "dma", ...); "" for an estimate
    cycles: int  # the longest of its compute and each memory's traffic
    compute: int  # the NPU's own work
    macs: int
    memory_bound: bool  # traffic takes longer than compute
    traffic: dict[str, tuple[int, int]]  # memory -> (bytes read, bytes written)
    shape: OpShape | None = None  # None for a DMA or an estimate
    kernels: int = 1  # NPU kernel operations it stands for (an estimate's: its queue rows)


class DelegateFigures(NamedTuple):
    operations: tuple[OpFigures, ...]  # in command-stream order
    kind: str  # "simulated" or "estimate"
    pmu_total: int | None  # the predicted PMU NPU TOTAL of one run (simulated only)


def _zeros(program) -> list[np.ndarray]:
    return [np.zeros(t.squeezed_shape, t.dtype) for t in program.inputs]


def _simulated(delegate: Delegate, program: Program) -> DelegateFigures:
    """Our cycle model's figures for each operation of the delegate's command stream."""
    from ..sim import load_payload, simulate
    from ..sim.memory_system import memory_system

    npu = program.npu
    stream = load_payload(delegate.payload or delegate.vela_npz_path)
    result = simulate(
        stream, _zeros(stream), npu.accelerator, npu.system_config, npu.memory_mode, npu.config_ini
    )
    ports = memory_system(npu.accelerator, *result.system)
    configuration = result.accelerator
    family, ublock = configuration.family, configuration.ublock
    operations = []
    for rec in result.operations:
        traffic: dict[str, tuple[int, int]] = {}
        for move in family.transfers(rec, configuration):
            if move.region < 0:  # the SHRAM: a lookup table
                continue
            name = ports.port(move.region).name
            read, written = traffic.get(name, (0, 0))
            traffic[name] = (
                (read, written + move.nbytes) if move.write else (read + move.nbytes, written)
            )
        shape = None
        if rec.kind != "dma":
            shape = OpShape(
                rec.kind,
                rec.ifm_shape,
                rec.ofm_shape,
                rec.kernel[:4],
                rec.block,
                ublock,
                rec.ifm_elem_size,
                family.output_cycles(rec, configuration),
                rec.part_kernel_first,
            )
        operations.append(
            OpFigures(
                rec.offset,
                rec.kind,
                rec.cycles,
                rec.compute_cycles,
                rec.macs,
                rec.cycles > rec.compute_cycles,
                traffic,
                shape,
            )
        )
    return DelegateFigures(tuple(operations), "simulated", result.pmu.total)


def _kernels(delegate: Delegate, program: Program, attribution: DelegateAttribution):
    """Per scheduled operation, the NPU kernel commands of its queued operations: counted in the
    decoded command stream where the decoder knows the NPU, else one per queued operation."""
    from ..lower.npu_ops import KERNEL_OPERATIONS
    from ..sim.families import commands, decodes
    from ..sim.payload import load_payload

    rows = sorted(attribution.operations, key=lambda o: o.offset)
    if not decodes(program.npu.accelerator):
        offsets = [row.offset for row in rows]
    else:
        stream = load_payload(delegate.payload or delegate.vela_npz_path).command_stream
        decoded = commands(program.npu.accelerator).decode(stream)
        offsets = [c.offset for c in decoded if c.name in KERNEL_OPERATIONS]
    counts: dict[int, int] = {}
    i = 0
    for offset in offsets:  # each belongs to the first queued operation at or after it
        while i < len(rows) and rows[i].offset < offset:
            i += 1
        if i < len(rows):
            counts[rows[i].scheduled] = counts.get(rows[i].scheduled, 0) + 1
    return counts


def _estimated(delegate: Delegate, program: Program) -> DelegateFigures:
    """Vela's estimate of each scheduled operation, at the offset of its last queued operation;
    memory-bound where an access-cycle figure exceeds its NPU cycles (as MLIA reads it)."""
    attribution = delegate.attribution
    assert attribution is not None
    last = {
        op.scheduled: op.offset for op in sorted(attribution.operations, key=lambda o: o.offset)
    }
    kernels = _kernels(delegate, program, attribution)
    operations = [
        OpFigures(
            last[e.scheduled],
            "",
            e.op_cycles,
            e.npu_cycles,
            e.macs,
            max(e.access_cycles.values(), default=0) > e.npu_cycles,
            {},
            None,
            kernels.get(e.scheduled, 0),
        )
        for e in attribution.estimates
        if e.scheduled in last
    ]
    operations.sort(key=lambda o: o.offset)
    return DelegateFigures(tuple(operations), "estimate", None)


def delegate_figures(delegate: Delegate, program: Program) -> DelegateFigures | None:
    """The delegate's per-operation figures: simulated where the simulator runs the NPU and the
    program, else Vela's estimate; None without an attribution to place an estimate."""
    from ..sim import SimError, simulates

    if simulates(program.npu.accelerator):
        try:
            return _simulated(delegate, program)
        except SimError:
            pass  # a program the simulator refuses: Vela's estimate, labelled
    if delegate.attribution is None:
        return None
    return _estimated(delegate, program)
