"""The timeline of an Ethos-U85 command stream: its NPU cycles and AXI beats for one run, with
the memories of the Vela ini (Corstone-320's system config: SRAM behind AXI0, DRAM behind AXI1).

The command processor issues commands in order; a DMA runs on the DMA engine while kernels run;
NPU_OP_DMA_WAIT n / NPU_OP_KERNEL_WAIT n stop it until at most n DMAs / kernels are outstanding.
A kernel starts when the previous one ends, less the overlap BLOCKDEP allows (the previous
kernel's last OFM block write under this one's first IFM block read); an operation that reads
the previous one's OFM from a chaining buffer runs with it, block by block: the pair takes the
longer of the producer's compute and their output stages together (Vela: the op group's summed
output cycles). Simulated, not checked against an FVP.
"""

from __future__ import annotations

from math import ceil

from ...fvp_timing import FvpMemory, PmuPrediction
from ...memory import INTERNAL, MEMORY_REGIONS
from ...records import OpRecord
from ..accelerator_config import Accelerator
from . import cycles
from .registers import COMMANDS


def _count_beats(record: OpRecord, memory: FvpMemory, beat: int, counts: dict) -> None:
    for moves, direction in ((record.bytes_read, "read"), (record.bytes_written, "write")):
        for region, nbytes in moves:
            if region == INTERNAL or region >= MEMORY_REGIONS:
                continue
            key = f"{memory.port_of(region)}_{direction}"
            counts[key] = counts.get(key, 0) + ceil(nbytes / beat)


def predict_pmu(
    command_stream: bytes,
    records: tuple[OpRecord, ...],
    memory: FvpMemory,
    accelerator: Accelerator,
) -> PmuPrediction:
    beat = accelerator.beat_bytes
    ini = memory.compute_memory
    by_offset = {r.offset: r for r in records}
    counts = {f"{memory.region_port['command_stream']}_read": ceil(len(command_stream) / beat)}
    cp = 0.0
    dma_ends: list[float] = []
    kernel_ends: list[float] = []
    last: tuple[float, int, int, float] | None = None  # start, compute, output total, drain
    for cmd in COMMANDS.decode(command_stream):
        if cmd.name == "NPU_OP_DMA_WAIT":
            if len(dma_ends) > cmd.param:
                cp = max(cp, dma_ends[len(dma_ends) - cmd.param - 1])
            continue
        if cmd.name == "NPU_OP_KERNEL_WAIT":
            if len(kernel_ends) > cmd.param:
                cp = max(cp, kernel_ends[len(kernel_ends) - cmd.param - 1])
            continue
        record = by_offset.get(cmd.offset)
        if record is None:
            continue
        _count_beats(record, memory, beat, counts)
        if record.kind == "dma":
            start = max(cp, dma_ends[-1] if dma_ends else 0.0)
            dma_ends.append(start + record.cycles)
            continue
        fill, drain = cycles.pipeline_ends(record, accelerator, ini)
        ao = cycles.output_total(record, accelerator)
        if last is not None and cycles.chained_in(record):
            start, compute, chain_ao, _ = last
            chain_ao += ao
            kernel_ends[-1] = max(kernel_ends[-1], start + max(compute, chain_ao))
            last = (start, compute, chain_ao, drain)
            continue
        ready = 0.0
        if kernel_ends:
            overlap = min(fill, last[3]) if last is not None and record.register("BLOCKDEP") else 0
            ready = kernel_ends[-1] - overlap
        start = max(cp, ready)
        kernel_ends.append(start + record.cycles)
        cp, last = start, (start, record.cycles, ao, drain)
    end = max([cp, *dma_ends, *kernel_ends])
    get = counts.get
    return PmuPrediction(round(end), 0, get("axi0_read", 0), get("axi0_write", 0),
                         get("axi1_read", 0))  # fmt: skip
