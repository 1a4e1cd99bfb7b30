"""One NPU configuration as the simulator's stages read it, holding the family that runs it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .family import NpuFamily

IFM_UBLOCK_DEPTH = 8  # every Ethos-U55/U65 configuration


# eq=False: a configuration is one object (its family's), compared and hashed by identity; the
# plan cache (plan.plan_for) looks one up at every run
@dataclass(frozen=True, eq=False)
class Accelerator:
    name: str  # "ethos-u55-128": Vela's accelerator_config
    family: NpuFamily  # its home: decoder, weight decoding, timing and traffic
    ublock: tuple[int, int, int]  # OFM u-block (h, w, c)
    shram_banks: int  # of 1 KB; the last 2 KB hold the LUTs
    beat_bytes: int  # one AXI data transfer: the NPU's AXI data width
    # output stage, cycles per element: (32-bit accumulator, 40-bit accumulator, max pool)
    output_cycles: tuple[float, float, float]
    # activation unit, cycles per element: (table lookup: tanh, sigmoid, LUT; the ReLU family as
    # Vela books it); clipping (ACTIVATION function 0) is part of the output stage and is free
    activation_cycles: tuple[float, float]
    # elementwise output stage, cycles per element: (ADD/SUB with 16-bit operand scales, ADD/SUB
    # with a 32-bit operand scale, MUL, 32-bit operands, any other operation of 8/16-bit operands:
    # MIN, MAX, ABS, LRELU), as Vela's estimator tabulates them (the last: its
    # output_cycles_per_elem[7], the same in Vela 5.1's C++ core)
    elementwise_cycles: tuple[float, float, float, float, float]
    # MAC pipeline: cycles of accumulate latency a single x/y u-block cannot hide, with (32-bit,
    # 40-bit) accumulators
    accumulate_delay: tuple[int, int]
    # pools work at a rate per IFM bit pair (Vela 5.1's C++ estimator; all but the smallest)
    pool_rate_by_width: bool = True
    # 40-bit accumulators stall once more per u-block depth on a one-u-block-wide OFM block
    narrow_block_40bit_stall: bool = False
    # MAC arrays that share an operation's OFM channels (Vela's ncores; PARALLEL_MODE = cores - 1)
    cores: int = 1

    @property
    def ublock_depths(self) -> tuple[int, int]:
        """(IFM, OFM) u-block depths."""
        return IFM_UBLOCK_DEPTH, self.ublock[2]

    @property
    def shram_bytes(self) -> int:
        return self.shram_banks * 1024

    def __repr__(self) -> str:
        return f"Accelerator({self.name!r})"

    def __reduce__(self):
        """Pickled by name: unpickled, it is the registry's configuration again."""
        from . import accelerator

        return accelerator, (self.name,)
