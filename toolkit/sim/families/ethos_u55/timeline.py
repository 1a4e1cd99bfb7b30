"""The timeline of an Ethos-U55/U65 command stream on the FVP's AXI ports (fvp_timing.py): what
its PMU counts for one run, NPU cycles and AXI beats.

Timeline: the command processor issues commands in order. A DMA runs on the DMA engine (one at a
time) while kernels run; NPU_OP_DMA_WAIT n and NPU_OP_KERNEL_WAIT n stop the command processor
until at most n DMAs / kernels are outstanding. A kernel takes the longest of its compute and its
traffic on each port; a DMA the slower of its read and write sides. A kernel starts when the
previous kernel ends, unless its BLOCKDEP is above 0: then the hardware may start its first OFM
blocks before the previous kernel's last ones are done (Vela sets BLOCKDEP, at most 3, to how many
of them do not read what those last blocks write: register_command_stream_util.calc_blockdep).
The MAC array and the output stage still work on one kernel at a time, so what overlaps is the
pipeline's ends: the kernel's fill (first IFM block fetch and first step, cycles.pipeline_ends)
runs during the previous kernel's drain (last step and last OFM block write), the shorter of the
two hidden under the longer.
"""

from __future__ import annotations

from ...fvp_timing import FvpMemory, PmuPrediction, Transfer
from ...memory import INTERNAL
from ...records import OpRecord
from ..accelerator_config import Accelerator
from . import cycles as cycle_model
from .registers import COMMANDS
from .traffic import op_transfers


def _port_times(transfers: tuple[Transfer, ...], memory: FvpMemory) -> dict[str, float]:
    times: dict[str, float] = {}
    for t in transfers:
        if t.region == INTERNAL:
            continue
        port = memory.port_of(t.region)
        times[port] = times.get(port, 0.0) + memory.ports[port].cycles(t)
    return times


def predict_pmu(
    command_stream: bytes,
    records: tuple[OpRecord, ...],
    memory: FvpMemory,
    accelerator: Accelerator,
) -> PmuPrediction:
    """Beats and NPU cycles for one run of the command stream; `records` carry each kernel's
    compute cycles (our cycle model's)."""
    beat = accelerator.beat_bytes
    by_offset = {r.offset: r for r in records}
    counts = {"axi0_read": 0, "axi0_write": 0, "axi1_read": 0, "axi1_write": 0}
    counts[f"{memory.region_port['command_stream']}_read"] += -(-len(command_stream) // beat)
    cp = 0.0  # command processor
    dma_ends: list[float] = []
    kernel_ends: list[float] = []
    drain = 0.0  # the previous kernel's
    for cmd in COMMANDS.decode(command_stream):
        if cmd.name == "NPU_OP_DMA_WAIT":
            if len(dma_ends) > cmd.param:
                cp = max(cp, dma_ends[len(dma_ends) - cmd.param - 1])
            continue
        if cmd.name == "NPU_OP_KERNEL_WAIT":
            if len(kernel_ends) > cmd.param:
                cp = max(cp, kernel_ends[len(kernel_ends) - cmd.param - 1])
            continue
        rec = by_offset.get(cmd.offset)
        if rec is None:
            continue
        transfers = op_transfers(rec, beat)
        for t in transfers:
            if t.region != INTERNAL:
                key = f"{memory.port_of(t.region)}_{'write' if t.write else 'read'}"
                counts[key] += t.beats
        ports = _port_times(transfers, memory)
        if rec.kind == "dma":
            start = max(cp, dma_ends[-1] if dma_ends else 0.0)
            dma_ends.append(
                start
                + max(ports.values(), default=0.0)
                + memory.ports[memory.port_of(rec.bytes_read[0][0])].adapter.read_latency
            )
        else:
            fill, next_drain = cycle_model.pipeline_ends(rec, accelerator, memory.compute_memory)
            ready = 0.0
            if kernel_ends:
                overlap = min(fill, drain) if rec.register("BLOCKDEP") else 0.0
                ready = kernel_ends[-1] - overlap
            start = max(cp, ready)
            kernel_ends.append(start + max(rec.compute_cycles, *ports.values()))
            cp, drain = start, next_drain
    end = max([cp, *dma_ends, *kernel_ends])
    return PmuPrediction(
        round(end), 0, counts["axi0_read"], counts["axi0_write"], counts["axi1_read"]
    )
