"""The Corstone FVP's memory system as its PMU sees it: AXI ports, their timing adapters, and
what the PMU counts (PmuPrediction).

The NPU's two AXI masters are the only way to memory. The Vela memory mode says which region sits
behind which port (const_mem_area: region 0 and the command stream; arena_mem_area: region 1;
cache_mem_area: region 2). How fast a port is on the Corstone-300 FVP is set by its timing
adapters, not by the Vela ini (Vela uses the ini only to plan): each adapter caps the bandwidth
(BWCAP 64-bit words per PULSE_ON + PULSE_OFF cycles), the outstanding transactions (MAXR/MAXW)
and the latency (RLATENCY/WLATENCY). A port then moves a transfer no faster than its bus width,
its bandwidth cap, and its outstanding transactions allow (Little's law: MAXR transactions of
`burst` beats per latency + burst cycles).

How a family's stream runs on these ports (its timeline: which operations overlap, what each
moves) is its own (families/ethos_u55/timeline.py)."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, NamedTuple

from . import memory_system

if TYPE_CHECKING:
    from .families.accelerator_config import Accelerator


class Transfer(NamedTuple):
    """Bytes moved on one region in one direction, and the AXI beats that takes."""

    region: int
    write: bool
    nbytes: int
    beats: int
    runs: int = 1  # contiguous runs, each of beats / runs beats


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
    compute_memory: memory_system.MemorySystem  # the ini's, which the compute figures assume

    def port_of(self, region: int) -> str:
        return self.region_port.get(region, self.region_port[1])


@lru_cache(maxsize=16)
def fvp_memory(
    accelerator: Accelerator,
    system_config: str,
    memory_mode: str,
    ini_path: str,
    adapters: tuple = tuple(sorted(MLEK_U55_HIGH_END.items())),
) -> FvpMemory:
    """Ports from the ini's system config (which memory each AXI port has, its burst length)
    and memory mode (which port each region uses, as the ini declares it: the hardware does not
    know Vela's SRAM-only override), timed by the FVP's timing adapters. Read by Vela's reader
    (memory_system.vela_architecture), inherited sections included."""
    arch = memory_system.vela_architecture(accelerator.name, system_config, memory_mode, ini_path)
    system, mode = f"System_Config.{system_config}", f"Memory_Mode.{memory_mode}"
    beat = accelerator.beat_bytes
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
        memory_system.memory_system(accelerator.name, system_config, memory_mode, ini_path),
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
