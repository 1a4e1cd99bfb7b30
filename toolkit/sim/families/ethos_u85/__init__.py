"""Ethos-U85's home: decoded, not simulated. It holds the U85 register map (registers.py) and the
driver's product id; it has no configuration, so `simulates("ethos-u85-256")` is False and the
toolkit runs U85 programs on the TOSA reference model.

To execute U85 streams, this home gets what ethos_u55/ has: a decoder from its registers to the
descriptions of sim/operations.py (new kinds and fields where U85 adds operations: chaining,
RESIZE, the OFM write's transpose and reverse, 48-bit accumulators, four weight streams), its
weight decoding, timing and traffic, and its configurations (an Accelerator each).
"""

from __future__ import annotations

from ...kernel import Kernel
from ...registers import Registers
from ..ethos_u55.fields import kernel_from
from ..family import NpuFamily
from .registers import COMMANDS, PRODUCTS, cmd0, cmd1

__all__ = ["ACCELERATORS", "COMMANDS", "FAMILY", "PRODUCTS", "cmd0", "cmd1"]


class EthosU85(NpuFamily):
    def kernel(self, registers: Registers) -> Kernel:
        # KERNEL_*, IFM_PAD_* and IFM_UPSCALE are laid out as on U55 (ethos_u85_interface.hpp;
        # tests/sim/test_u85_decode.py)
        return kernel_from(registers)


FAMILY = EthosU85("Ethos-U85", PRODUCTS, COMMANDS)
ACCELERATORS = FAMILY.configurations  # none: decoding is not simulating
