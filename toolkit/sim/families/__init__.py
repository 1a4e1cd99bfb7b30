"""The NPU families the simulator runs, one module each, and the questions the toolkit asks them.

A family's module holds what is particular to its hardware: its register map (the command names
the decoder and planner use), and per configuration an `Accelerator`, the figures planning,
execution, timing and traffic read. Nothing outside a family module tests a family's name:

    simulates("ethos-u55-128")       -> True: the simulator runs it
    decodes("ethos-u65-512")         -> True: the command-stream decoder knows its register map
    accelerator("ethos-u65-256")     -> its Accelerator (SimError if it is not simulated)
    SIMULATED                        -> every configuration the simulator runs
    SIMULATED_FAMILIES               -> "Ethos-U55/U65", for messages

Ethos-U55 and Ethos-U65 share a register map and a home (ethos_u55.py); Ethos-U85's (ethos_u85.py)
holds no configuration yet: Vela 5.1 ships its register map only inside the C++ core.
"""

from __future__ import annotations

from ...npu import accelerator_family
from ..errors import SimError
from . import ethos_u55, ethos_u85
from .accelerator import Accelerator

_CONFIGURATIONS: dict[str, Accelerator] = {**ethos_u55.ACCELERATORS, **ethos_u85.ACCELERATORS}
SIMULATED: tuple[str, ...] = tuple(_CONFIGURATIONS)
_FAMILIES = tuple(dict.fromkeys(a.family for a in _CONFIGURATIONS.values()))
SIMULATED_FAMILIES = "Ethos-" + "/".join(f.removeprefix("ethos-").upper() for f in _FAMILIES)
_DECODED_FAMILIES = frozenset(ethos_u55.PRODUCTS.values())

__all__ = [
    "SIMULATED",
    "SIMULATED_FAMILIES",
    "Accelerator",
    "accelerator",
    "decodes",
    "simulates",
]


def simulates(name: str) -> bool:
    """Whether the simulator runs programs compiled for this NPU configuration."""
    return name in _CONFIGURATIONS


def decodes(name: str) -> bool:
    """Whether the command-stream decoder (op counts, register diffs) reads this NPU's streams."""
    return accelerator_family(name) in _DECODED_FAMILIES


def accelerator(name: str) -> Accelerator:
    try:
        return _CONFIGURATIONS[name]
    except KeyError:
        raise SimError(f"the simulator runs {', '.join(SIMULATED)}, not '{name}'") from None
