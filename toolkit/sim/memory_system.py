"""The memory system a Vela ini describes, as the cycle models read it: per region (0 weights,
1 arena, 2 fast scratch) the memory's bandwidth, latencies and burst length, read by Vela's own
reader of its ini files (ArchitectureFeatures: inherited sections, Vela's defaults)."""

from __future__ import annotations

import contextlib
import io
from functools import lru_cache
from typing import NamedTuple

from ..npu import ARM_VELA_INI, vela_ini_path


class MemoryPort(NamedTuple):
    name: str  # "Sram", "OffChipFlash", "Dram"
    bytes_per_cycle: float
    read_latency: int
    write_latency: int
    burst: int  # longest burst, bytes


class MemorySystem(NamedTuple):
    regions: dict  # region -> MemoryPort

    def port(self, region: int) -> MemoryPort:
        return self.regions.get(region, self.regions[1])


@lru_cache(maxsize=16)
def vela_architecture(
    accelerator: str, system_config: str, memory_mode: str, config_ini: str = ARM_VELA_INI
):
    """Vela's ArchitectureFeatures for the ini's system config and memory mode: the one reader of
    a Vela ini here (sections that inherit, Vela's defaults), for the cycle model's memory system
    and the FVP timing's ports alike."""
    from ethosu.vela.architecture_features import ArchitectureFeatures

    # Vela prints an "Info: Changing const_mem_area ..." line for SRAM-only memory modes: ours is a
    # read of the ini, not a compile, so the line is not for the user
    with contextlib.redirect_stdout(io.StringIO()):
        arch = ArchitectureFeatures(
            vela_config_files=[str(vela_ini_path(config_ini))],
            accelerator_config=accelerator,
            system_config=system_config,
            memory_mode=memory_mode,
            max_blockdep=3,
            verbose_config=False,
            arena_cache_size=None,
        )
    return arch


@lru_cache(maxsize=16)
def memory_system(
    accelerator: str, system_config: str, memory_mode: str, config_ini: str = ARM_VELA_INI
) -> MemorySystem:
    """Bandwidths, latencies and bursts of the Vela system config, per region (0 weights,
    1 arena, 2 fast scratch), as Vela plans with them (its SRAM-only override included)."""
    from ethosu.vela.architecture_features import MemPort

    arch = vela_architecture(accelerator, system_config, memory_mode, config_ini)

    def port(mem_port: MemPort) -> MemoryPort:
        area = arch._mem_port_mapping(mem_port)
        return MemoryPort(
            area.name,
            float(arch.memory_bandwidths_per_cycle[area]),
            int(arch.memory_latency[area][0]),
            int(arch.memory_latency[area][1]),
            int(arch.memory_burst_length[area]),
        )

    return MemorySystem(
        {0: port(arch.const_mem_area), 1: port(arch.arena_mem_area), 2: port(arch.cache_mem_area)}
    )
