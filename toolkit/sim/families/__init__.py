"""The NPU families the simulator knows, one home (folder) each, and the questions the toolkit
asks them.

A family is an object (family.NpuFamily): its home turns its command stream into operation
descriptions for the shared engines and owns its register map, weight decoding, timing and
traffic. Each configuration it executes is an `Accelerator` holding the family; the rest of the
toolkit passes that object, never a family's name, and imports no home:

    simulates("ethos-u55-128")       -> True: the simulator runs it
    decodes("ethos-u85-256")         -> True: the command-stream decoder knows its register map
    commands("ethos-u65-512")        -> its CommandSet: decode a stream, its operations' registers
    family_of("ethos-u85-256")       -> its NpuFamily (decoding; executing where it simulates)
    accelerator("ethos-u65-256")     -> its Accelerator (SimError if it is not simulated)
    family_of_product(2)             -> "ethos-u85": the family a driver config word names
    SIMULATED                        -> every configuration the simulator runs
    SIMULATED_FAMILIES               -> "Ethos-U55/U65 and Ethos-U85", for messages

Ethos-U55 and Ethos-U65 share a register map and a home (ethos_u55/). Ethos-U85's home
(ethos_u85/) holds its own register map (transcribed from Vela's C++ core, which has no Python
one), its five configurations, its decoder and its cycle model.
"""

from __future__ import annotations

from ...npu import accelerator_family
from ..commands import CommandSet
from ..errors import SimError
from . import ethos_u55, ethos_u85
from .accelerator_config import Accelerator
from .family import NpuFamily

_FAMILIES: tuple[NpuFamily, ...] = (ethos_u55.FAMILY, ethos_u85.FAMILY)
_CONFIGURATIONS: dict[str, Accelerator] = {
    name: a for home in _FAMILIES for name, a in home.configurations.items()
}
SIMULATED: tuple[str, ...] = tuple(_CONFIGURATIONS)
SIMULATED_FAMILIES = " and ".join(f.name for f in _FAMILIES if f.configurations)
# product family ("ethos-u55") -> its home
_BY_PRODUCT = {product: home for home in _FAMILIES for product in home.products.values()}
_PRODUCTS = {number: product for home in _FAMILIES for number, product in home.products.items()}

__all__ = [
    "SIMULATED",
    "SIMULATED_FAMILIES",
    "Accelerator",
    "NpuFamily",
    "accelerator",
    "commands",
    "decodes",
    "families",
    "family_of",
    "family_of_product",
    "simulates",
]


def simulates(name: str) -> bool:
    """Whether the simulator runs programs compiled for this NPU configuration."""
    return name in _CONFIGURATIONS


def decodes(name: str) -> bool:
    """Whether the command-stream decoder (op counts, register diffs) reads this NPU's streams."""
    home = _BY_PRODUCT.get(accelerator_family(name))
    return home is not None and home.commands is not None


def families() -> tuple[NpuFamily, ...]:
    """Every family's home."""
    return _FAMILIES


def family_of(name: str) -> NpuFamily:
    """The family an NPU configuration belongs to (whether or not the simulator runs it)."""
    try:
        return _BY_PRODUCT[accelerator_family(name)]
    except KeyError:
        raise SimError(f"the simulator knows no NPU family of '{name}'") from None


def commands(name: str) -> CommandSet:
    """The register map of an NPU configuration's family."""
    home = _BY_PRODUCT.get(accelerator_family(name))
    if home is None or home.commands is None:
        raise SimError(f"the command-stream decoder does not know the registers of '{name}'")
    return home.commands


def family_of_product(product: int) -> str | None:
    """The family whose product id a driver config word (COP1) carries; None if unknown."""
    return _PRODUCTS.get(product)


def accelerator(name: str | Accelerator) -> Accelerator:
    """The configuration the simulator runs under this name (an Accelerator is itself)."""
    if isinstance(name, Accelerator):
        return name
    try:
        return _CONFIGURATIONS[name]
    except KeyError:
        raise SimError(f"the simulator runs {', '.join(SIMULATED)}, not '{name}'") from None
