"""The NPU families the simulator runs, one module each, and the questions the toolkit asks them.

A family's module holds what is particular to its hardware: its register map (the command names
the decoder and planner use), and per configuration an `Accelerator`, the figures planning,
execution, timing and traffic read. Nothing outside a family module tests a family's name:

    simulates("ethos-u55-128")       -> True: the simulator runs it
    decodes("ethos-u85-256")         -> True: the command-stream decoder knows its register map
    commands("ethos-u65-512")        -> its CommandSet: decode a stream, its operations' registers
    accelerator("ethos-u65-256")     -> its Accelerator (SimError if it is not simulated)
    family_of_product(2)             -> "ethos-u85": the family a driver config word names
    SIMULATED                        -> every configuration the simulator runs
    SIMULATED_FAMILIES               -> "Ethos-U55/U65", for messages

A family module provides ACCELERATORS (name -> Accelerator), COMMANDS (its CommandSet, or None
while its register map is not filled) and PRODUCTS (driver product id -> family).

Ethos-U55 and Ethos-U65 share a register map and a home (ethos_u55.py). Ethos-U85's home
(ethos_u85.py) holds its own register map (transcribed from Vela 5.1's C++ core, which has no
Python one) and no configuration: U85 streams are decoded, not simulated.
"""

from __future__ import annotations

from ...npu import accelerator_family
from ..commands import CommandSet
from ..errors import SimError
from . import ethos_u55, ethos_u85
from .accelerator import Accelerator

_HOMES = (ethos_u55, ethos_u85)
_CONFIGURATIONS: dict[str, Accelerator] = {
    name: a for home in _HOMES for name, a in home.ACCELERATORS.items()
}
SIMULATED: tuple[str, ...] = tuple(_CONFIGURATIONS)
_FAMILIES = tuple(dict.fromkeys(a.family for a in _CONFIGURATIONS.values()))
SIMULATED_FAMILIES = "Ethos-" + "/".join(f.removeprefix("ethos-").upper() for f in _FAMILIES)
_PRODUCTS = {product: family for home in _HOMES for product, family in home.PRODUCTS.items()}
_COMMANDS = {
    family: home.COMMANDS
    for home in _HOMES
    if home.COMMANDS is not None
    for family in home.PRODUCTS.values()
}

__all__ = [
    "SIMULATED",
    "SIMULATED_FAMILIES",
    "Accelerator",
    "accelerator",
    "commands",
    "decodes",
    "family_of_product",
    "simulates",
]


def simulates(name: str) -> bool:
    """Whether the simulator runs programs compiled for this NPU configuration."""
    return name in _CONFIGURATIONS


def decodes(name: str) -> bool:
    """Whether the command-stream decoder (op counts, register diffs) reads this NPU's streams."""
    return accelerator_family(name) in _COMMANDS


def commands(name: str) -> CommandSet:
    """The register map of an NPU configuration's family."""
    try:
        return _COMMANDS[accelerator_family(name)]
    except KeyError:
        raise SimError(
            f"the command-stream decoder does not know the registers of '{name}'"
        ) from None


def family_of_product(product: int) -> str | None:
    """The family whose product id a driver config word (COP1) carries; None if unknown."""
    return _PRODUCTS.get(product)


def accelerator(name: str) -> Accelerator:
    try:
        return _CONFIGURATIONS[name]
    except KeyError:
        raise SimError(f"the simulator runs {', '.join(SIMULATED)}, not '{name}'") from None
