"""One description per NPU family (toolkit/sim/families): what the rest of the toolkit asks, and
that nothing outside a family's home reads its register map or tests its name."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from toolkit.sim.errors import SimError
from toolkit.sim.families import (
    SIMULATED,
    SIMULATED_FAMILIES,
    accelerator,
    commands,
    decodes,
    family_of_product,
    simulates,
)

PACKAGE = Path(__file__).resolve().parents[2] / "toolkit"


def test_the_simulated_configurations_and_what_the_decoder_reads():
    assert SIMULATED == (
        "ethos-u55-32",
        "ethos-u55-64",
        "ethos-u55-128",
        "ethos-u55-256",
        "ethos-u65-256",
        "ethos-u65-512",
    )
    assert SIMULATED_FAMILIES == "Ethos-U55/U65"
    assert decodes("ethos-u65-512") and simulates("ethos-u65-512")
    # Ethos-U85's register map is known (families/ethos_u85.py); its streams are not executed
    assert decodes("ethos-u85-256") and not simulates("ethos-u85-256")
    with pytest.raises(SimError, match=r"runs ethos-u55-32, .*ethos-u65-512, not 'ethos-u85-256'$"):
        accelerator("ethos-u85-256")


def test_a_family_s_register_map_is_asked_for_by_configuration():
    assert commands("ethos-u65-512") is commands("ethos-u55-32")  # one map, Vela's ethos_u55_regs
    # word 0x0001_0005: cmd0 opcode 5 (NPU_OP_POOL), parameter 1 (average)
    (op,) = commands("ethos-u55-128").decode((0x0001_0005).to_bytes(4, "little"))
    assert (op.name, op.param, op.is_operation) == ("NPU_OP_POOL", 1, True)
    assert [family_of_product(p) for p in (0, 1, 2, 7)] == [
        "ethos-u55",
        "ethos-u65",
        "ethos-u85",
        None,
    ]
    # U85 has a map of its own (ethos_u85.py): the operations keep their opcodes, many registers
    # do not
    assert commands("ethos-u85-2048") is commands("ethos-u85-128")
    assert commands("ethos-u85-128") is not commands("ethos-u55-128")
    (op,) = commands("ethos-u85-128").decode((0x0001_0005).to_bytes(4, "little"))
    assert (op.name, op.param) == ("NPU_OP_POOL", 1)
    (op,) = commands("ethos-u85-256").decode((0x0000_012E).to_bytes(4, "little"))
    assert op.name == "NPU_SET_WEIGHT_FORMAT"  # cmd0 302: no Ethos-U55 command
    with pytest.raises(SimError, match="does not know the registers of 'ethos-u99-256'$"):
        commands("ethos-u99-256")


def test_each_configuration_as_vela_describes_it():
    """Vela 5.1's accelerator_configs: OFM u-blocks, SHRAM banks, cores; AXI width by family."""
    described = {
        name: (a.ublock, a.ublock_depths, a.shram_bytes, a.beat_bytes, a.cores)
        for name, a in ((n, accelerator(n)) for n in SIMULATED)
    }
    assert described == {
        "ethos-u55-32": ((1, 1, 4), (8, 4), 16384, 8, 1),
        "ethos-u55-64": ((1, 1, 8), (8, 8), 16384, 8, 1),
        "ethos-u55-128": ((1, 2, 8), (8, 8), 24576, 8, 1),
        "ethos-u55-256": ((2, 2, 8), (8, 8), 49152, 8, 1),
        "ethos-u65-256": ((2, 2, 8), (8, 8), 49152, 16, 1),
        "ethos-u65-512": ((2, 2, 8), (8, 8), 49152, 16, 2),
    }


def test_no_module_outside_a_family_home_reads_a_register_map_or_tests_a_family_name():
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        if "families" in path.parts:
            continue
        text = path.read_text()
        if "ethos_u55_regs" in text or re.search(
            r"== \"ethos-u\d\d\"|\"ethos-u\d\d-\d+\" ==", text
        ):
            offenders.append(str(path.relative_to(PACKAGE)))
    assert offenders == []
