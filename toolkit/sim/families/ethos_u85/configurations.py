"""The five Ethos-U85 configurations, with the figures Vela 5.2.0's U85 architecture and
performance model give them (regor: s_EthosU85Configs and s_EthosU85PerfInfo in
architecture/ethosu85/ethos_u85.cpp; the numbers only, no code): MAC cores, OFM u-blocks, the
RAMs, the AXI ports, each channel's read buffer, and the cycles per element of the output stage
and of the resize unit.

The simulator's "internal memory" of a U85 is its 2 KB LUT memory (8 slots of 256 bytes): the
LUT DMAs write there (region mode INTERNAL) and ACTIVATION reads it.
"""

from __future__ import annotations

from typing import NamedTuple

from ..accelerator_config import Accelerator
from ..family import NpuFamily

LUT_MEMORY_BYTES = 2048


class U85Figures(NamedTuple):
    """One configuration's hardware figures as Vela's U85 model reads them."""

    macs: int
    cores: int
    ublocks: tuple[tuple[int, int, int], ...]  # OFM u-blocks (h, w, c) it can use
    ifm_ram_kb: int
    acc_ram_kb: int
    ob_ram_kb: int
    cb_ram_bytes: int  # the chaining buffer
    axi_sram_ports: int
    axi_ext_ports: int
    # channel read buffers (bytes): Mem2Mem, IFMStream, Weight, FastWeight, IFM, Scale
    read_buffers: tuple[int, int, int, int, int, int]
    # output stage cycles per element: 8, 16, 32, 64-bit OFM, 32-bit into a chaining buffer,
    # int32 binary elementwise to int32
    output_cycles: tuple[float, float, float, float, float, float]
    activation_cycles: tuple[float, float]  # normal, half rate (H<->W transposes, reverse W)
    # the resize unit's cycles per OFM element, 8-bit and 16-bit IFM, at a low and a high ratio
    resize_low: tuple[float, float]
    resize_high: tuple[float, float]


FIGURES: dict[str, U85Figures] = {
    "ethos-u85-128": U85Figures(
        128, 1, ((1, 2, 8), (1, 1, 16)), 8, 8, 2, 768, 2, 1,
        (64, 64, 128, 128, 104, 16), (0.5, 0.5, 0.5, 1, 1, 1), (0.5, 1), (0.5, 1), (0.5, 1),
    ),
    "ethos-u85-256": U85Figures(
        256, 1, ((1, 2, 16), (1, 4, 8), (2, 2, 8)), 16, 16, 2, 1536, 2, 1,
        (104, 104, 128, 128, 128, 16), (0.25, 0.25, 0.25, 0.5, 0.5, 0.5), (0.25, 0.5),
        (0.25, 0.5), (0.25, 0.5),
    ),
    "ethos-u85-512": U85Figures(
        512, 2, ((2, 2, 16), (1, 4, 16)), 16, 32, 4, 3072, 2, 1,
        (128, 128, 256, 256, 128, 16), (0.125, 0.125, 0.25, 0.5, 0.25, 0.25), (0.125, 0.25),
        (0.125, 0.25), (0.125, 0.25),
    ),
    "ethos-u85-1024": U85Figures(
        1024, 4, ((2, 2, 32), (1, 4, 32), (2, 4, 16)), 16, 64, 4, 6144, 2, 2,
        (256, 256, 416, 208, 256, 16), (0.0625, 0.125, 0.25, 0.5, 0.125, 0.25), (0.0625, 0.125),
        (0.125, 0.125), (0.0625, 0.125),
    ),
    "ethos-u85-2048": U85Figures(
        2048, 4, ((2, 2, 64), (1, 4, 64), (4, 4, 16)), 32, 128, 8, 12288, 4, 2,
        (256, 256, 512, 256, 256, 16),
        (0.03125, 0.0625, 0.125, 0.25, 0.0625, 0.125), (0.03125, 0.0625),
        (0.0625, 0.0625), (0.03125, 0.0625),
    ),
}  # fmt: skip


def accelerators(family: NpuFamily) -> dict[str, Accelerator]:
    """Each configuration as the shared simulator holds it. The U55-shaped fields that only
    Ethos-U55/U65's cycle model reads carry the U85's nearest figures."""
    made = {}
    for name, f in FIGURES.items():
        out8 = f.output_cycles[0]
        made[name] = Accelerator(
            name=name,
            family=family,
            ublock=f.ublocks[0],
            shram_banks=LUT_MEMORY_BYTES // 1024,
            beat_bytes=16,
            output_cycles=(out8, f.output_cycles[3], out8),
            activation_cycles=f.activation_cycles,
            elementwise_cycles=(out8,) * 5,
            accumulate_delay=(2, 3),
            cores=f.cores,
        )
    return made
