"""Ethos-U85: not simulated yet. Its home holds, once it is filled, the U85 register map (Vela
5.1 has it only inside its C++ core, `architecture/ethosu85`; no Python module), the operation
table and the cycle-model figures per configuration, as ethos_u55.py does for U55/U65. Until
then no configuration is listed, so `simulates("ethos-u85-256")` is False and the toolkit runs
U85 programs on the TOSA reference model."""

from __future__ import annotations

from ..commands import CommandSet
from .accelerator import Accelerator

PRODUCTS: dict[int, str] = {}  # DriverConfig.product -> family
COMMANDS: CommandSet | None = None  # the register map, once filled
ACCELERATORS: dict[str, Accelerator] = {}
