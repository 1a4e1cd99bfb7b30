"""The six Ethos-U55/U65 configurations. Ethos-U65 differs in its AXI width (128-bit: 16-byte
beats) and its product id in the driver's config word; its 256-MAC configuration computes as the
U55-256 does, and its 512-MAC one is two such cores, each computing every other OFM channel from
a weight and scale stream of its own (WEIGHT1_*, SCALE1_* for the second).
The cycle figures are Vela's estimator tables (architecture_features.py), SHRAM sizes its
accelerator_configs."""

from __future__ import annotations

from ..accelerator_config import Accelerator
from ..family import NpuFamily

_FIGURES: dict[str, dict] = {
    "ethos-u55-32": dict(
        ublock=(1, 1, 4),
        shram_banks=16,
        beat_bytes=8,
        output_cycles=(2.0, 3.0, 1.0),
        activation_cycles=(1.0, 1.0),
        elementwise_cycles=(4.0, 6.0, 3.0, 2.0, 2.0),
        accumulate_delay=(3, 7),
        pool_rate_by_width=False,
        narrow_block_40bit_stall=True,
    ),
    "ethos-u55-64": dict(
        ublock=(1, 1, 8),
        shram_banks=16,
        beat_bytes=8,
        output_cycles=(1.0, 1.5, 0.5),
        activation_cycles=(1.0, 1.0),
        elementwise_cycles=(2.0, 3.0, 1.5, 1.0, 1.0),
        accumulate_delay=(2, 3),
    ),
    "ethos-u55-128": dict(
        ublock=(1, 2, 8),
        shram_banks=24,
        beat_bytes=8,
        output_cycles=(0.5, 0.75, 0.25),
        activation_cycles=(1.0, 0.5),
        elementwise_cycles=(1.0, 1.5, 0.75, 0.75, 0.5),
        accumulate_delay=(2, 3),
    ),
    "ethos-u55-256": dict(
        ublock=(2, 2, 8),
        shram_banks=48,
        beat_bytes=8,
        output_cycles=(0.25, 0.375, 0.125),
        activation_cycles=(1.0, 0.25),
        elementwise_cycles=(0.5, 0.75, 0.375, 0.625, 0.25),
        accumulate_delay=(2, 2),
    ),
    "ethos-u65-256": dict(
        ublock=(2, 2, 8),
        shram_banks=48,
        beat_bytes=16,
        output_cycles=(0.25, 0.375, 0.125),
        activation_cycles=(1.0, 0.25),
        elementwise_cycles=(0.5, 0.75, 0.375, 0.625, 0.25),
        accumulate_delay=(2, 2),
    ),
    # Vela's output and activation tables for the U65-512 are the U65-256's halved, entry
    # for entry: the two cores' output stages work in parallel
    "ethos-u65-512": dict(
        ublock=(2, 2, 8),
        shram_banks=48,
        beat_bytes=16,
        output_cycles=(0.125, 0.1875, 0.0625),
        activation_cycles=(0.5, 0.125),
        elementwise_cycles=(0.25, 0.375, 0.1875, 0.3125, 0.125),
        accumulate_delay=(2, 2),
        cores=2,
    ),
}


def accelerators(family: NpuFamily) -> dict[str, Accelerator]:
    """The family's configurations, by name."""
    return {name: Accelerator(name, family, **figures) for name, figures in _FIGURES.items()}
