"""The Ethos-U55/U65 register map: Vela's ethos_u55_regs serves both (cmd0 and cmd1 opcodes, the
elementwise modes' names), and the driver config word's product ids."""

from __future__ import annotations

from ethosu.vela.ethos_u55_regs.ethos_u55_regs import cmd0, cmd1, elementwise_mode

from ...commands import CommandSet

__all__ = ["COMMANDS", "PRODUCTS", "elementwise_mode"]

PRODUCTS = {0: "ethos-u55", 1: "ethos-u65"}  # DriverConfig.product -> family
COMMANDS = CommandSet(cmd0, cmd1)
