"""What the FVP's PMU would count for a command stream: AXI beats, and NPU cycles from a timeline.

The NPU's two AXI masters are the only way to memory. The Vela memory mode says which region sits
behind which port (const_mem_area: region 0 and the command stream; arena_mem_area: region 1;
cache_mem_area: region 2). How fast a port is on the Corstone-300 FVP is set by its timing
adapters, not by the Vela ini (Vela uses the ini only to plan): each adapter caps the bandwidth
(BWCAP 64-bit words per PULSE_ON + PULSE_OFF cycles), the outstanding transactions (MAXR/MAXW)
and the latency (RLATENCY/WLATENCY). A port then moves a transfer no faster than its bus width,
its bandwidth cap, and its outstanding transactions allow (Little's law: MAXR transactions of
`burst` beats per latency + burst cycles).

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

from functools import lru_cache
from typing import NamedTuple

from . import cycles as cycle_model
from .families import commands
from .memory import INTERNAL
from .records import OpRecord
from .traffic import Transfer, beat_bytes, op_transfers


class TimingAdapter(NamedTuple):
    """One AXI port's timing adapter (the Corstone-300 FVP's `TA` component)."""

    max_reads: int  # 0: unlimited
    max_writes: int
    read_latency: int
    write_latency: int
    pulse_on: int
    pulse_off: int
    bwcap: int  # 64-bit words per pulse period; 0: unlimited

    def words_per_cycle(self) -> float:
        if not self.bwcap:
            return float("inf")
        return self.bwcap / (self.pulse_on + self.pulse_off)


# The ML Embedded Evaluation Kit's default timing-adapter settings for Ethos-U55 on Corstone-300
# (scripts/cmake/timing_adapter/ta_config_u55_high_end.cmake; the FVP figures it publishes, and
# the Himax WE2 FVP figures, ran with them). SRAM behind AXI0, external memory behind AXI1.
# Ethos-U65 programs are timed with the same adapters (the kit's U65 settings are not checked).
MLEK_U55_HIGH_END = {
    "axi0": TimingAdapter(8, 8, 32, 32, 3999, 1, 4000),
    "axi1": TimingAdapter(2, 0, 64, 0, 320, 80, 50),
}


class AxiPort(NamedTuple):
    beat: int  # bytes
    burst_beats: int  # longest transaction
    adapter: TimingAdapter

    def cycles(self, t: Transfer) -> float:
        if t.beats == 0:
            return 0.0
        words = t.beats * self.beat / 8
        per_run = t.beats / t.runs
        transactions = t.runs * -(-per_run // self.burst_beats)
        per_txn = t.beats / transactions
        ta = self.adapter
        limit, latency = (
            (ta.max_writes, ta.write_latency) if t.write else (ta.max_reads, ta.read_latency)
        )
        outstanding = transactions * (latency + per_txn) / limit if limit else 0.0
        return max(t.beats, words / ta.words_per_cycle(), outstanding)


class FvpMemory(NamedTuple):
    ports: dict  # "axi0"/"axi1" -> AxiPort
    region_port: dict  # region -> "axi0"/"axi1"; key "command_stream" too
    compute_memory: cycle_model.MemorySystem  # the ini's, which the compute figures assume

    def port_of(self, region: int) -> str:
        return self.region_port.get(region, self.region_port[1])


@lru_cache(maxsize=16)
def fvp_memory(
    accelerator: str,
    system_config: str,
    memory_mode: str,
    ini_path: str,
    adapters: tuple = tuple(sorted(MLEK_U55_HIGH_END.items())),
) -> FvpMemory:
    """Ports from the ini's system config (which memory each AXI port has, its burst length)
    and memory mode (which port each region uses, as the ini declares it: the hardware does not
    know Vela's SRAM-only override), timed by the FVP's timing adapters. Read by Vela's reader
    (cycles.vela_architecture), inherited sections included."""
    arch = cycle_model.vela_architecture(accelerator, system_config, memory_mode, ini_path)
    system, mode = f"System_Config.{system_config}", f"Memory_Mode.{memory_mode}"
    beat = beat_bytes(accelerator)
    ports = {}
    for port in ("axi0", "axi1"):
        memory = arch._read_config(system, f"{port}_port", "Sram")
        burst = int(float(arch._read_config(system, f"{memory}_burst_length", "32")))
        ports[port] = AxiPort(beat, max(1, burst // beat), dict(adapters)[port])

    def area(key: str, default: str) -> str:
        return arch._read_config(mode, key, default).strip().lower()

    const = area("const_mem_area", "Axi1")
    return FvpMemory(
        ports,
        {
            0: const,
            1: area("arena_mem_area", "Axi0"),
            2: area("cache_mem_area", "Axi0"),
            "command_stream": const,
        },
        cycle_model.memory_system(accelerator, system_config, memory_mode, ini_path),
    )


class PmuPrediction(NamedTuple):
    active: int
    idle: int
    axi0_read: int
    axi0_write: int
    axi1_read: int

    @property
    def total(self) -> int:
        return self.active + self.idle

    @property
    def beats(self) -> dict:
        return {
            "axi0_read": self.axi0_read,
            "axi0_write": self.axi0_write,
            "axi1_read": self.axi1_read,
        }


def _port_times(transfers: tuple[Transfer, ...], memory: FvpMemory) -> dict[str, float]:
    times: dict[str, float] = {}
    for t in transfers:
        if t.region == INTERNAL:
            continue
        port = memory.port_of(t.region)
        times[port] = times.get(port, 0.0) + memory.ports[port].cycles(t)
    return times


def predict_pmu(
    command_stream: bytes, records: tuple[OpRecord, ...], memory: FvpMemory, accelerator: str
) -> PmuPrediction:
    """Beats and NPU cycles for one run of the command stream; `records` carry each kernel's
    compute cycles (our cycle model's)."""
    beat = beat_bytes(accelerator)
    by_offset = {r.offset: r for r in records}
    counts = {"axi0_read": 0, "axi0_write": 0, "axi1_read": 0, "axi1_write": 0}
    counts[f"{memory.region_port['command_stream']}_read"] += -(-len(command_stream) // beat)
    cp = 0.0  # command processor
    dma_ends: list[float] = []
    kernel_ends: list[float] = []
    drain = 0.0  # the previous kernel's
    for cmd in commands(accelerator).decode(command_stream):
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
