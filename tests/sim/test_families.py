"""One home per NPU family (toolkit/sim/families): what the rest of the toolkit asks, the family
object each configuration holds, and that nothing outside a family's home reads its register map
or tests its name."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from toolkit.sim.errors import SimError, UnsupportedError
from toolkit.sim.families import (
    SIMULATED,
    SIMULATED_FAMILIES,
    accelerator,
    commands,
    decodes,
    family_of,
    family_of_product,
    simulates,
)

PACKAGE = Path(__file__).resolve().parents[2] / "toolkit"
FAMILIES = PACKAGE / "sim" / "families"


def test_the_simulated_configurations_and_what_the_decoder_reads():
    assert SIMULATED == (
        "ethos-u55-32",
        "ethos-u55-64",
        "ethos-u55-128",
        "ethos-u55-256",
        "ethos-u65-256",
        "ethos-u65-512",
        "ethos-u85-128",
        "ethos-u85-256",
        "ethos-u85-512",
        "ethos-u85-1024",
        "ethos-u85-2048",
    )
    assert SIMULATED_FAMILIES == "Ethos-U55/U65 and Ethos-U85"
    assert decodes("ethos-u65-512") and simulates("ethos-u65-512")
    # Ethos-U85's streams are executed too (issue 47)
    assert decodes("ethos-u85-256") and simulates("ethos-u85-256")
    with pytest.raises(
        SimError, match=r"runs ethos-u55-32, .*ethos-u85-2048, not 'ethos-u99-256'$"
    ):
        accelerator("ethos-u99-256")


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
    # U85 has a map of its own (ethos_u85/registers.py): the operations keep their opcodes, many registers
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
        if a.family.name == "Ethos-U55/U65"
    }
    assert described == {
        "ethos-u55-32": ((1, 1, 4), (8, 4), 16384, 8, 1),
        "ethos-u55-64": ((1, 1, 8), (8, 8), 16384, 8, 1),
        "ethos-u55-128": ((1, 2, 8), (8, 8), 24576, 8, 1),
        "ethos-u55-256": ((2, 2, 8), (8, 8), 49152, 8, 1),
        "ethos-u65-256": ((2, 2, 8), (8, 8), 49152, 16, 1),
        "ethos-u65-512": ((2, 2, 8), (8, 8), 49152, 16, 2),
    }
    # Vela 5.2's s_EthosU85Configs: the first OFM u-block and the cores; the simulator's internal
    # memory of a U85 is its 2 KB LUT memory
    u85 = {
        n: (a.ublock, a.shram_bytes, a.cores)
        for n, a in ((n, accelerator(n)) for n in SIMULATED)
        if a.family.name == "Ethos-U85"
    }
    assert u85 == {
        "ethos-u85-128": ((1, 2, 8), 2048, 1),
        "ethos-u85-256": ((1, 2, 16), 2048, 1),
        "ethos-u85-512": ((2, 2, 16), 2048, 2),
        "ethos-u85-1024": ((2, 2, 32), 2048, 4),
        "ethos-u85-2048": ((2, 2, 64), 2048, 4),
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


def test_a_configuration_holds_its_family_which_decodes_or_also_executes():
    u55, u65 = accelerator("ethos-u55-128"), accelerator("ethos-u65-512")
    assert u55.family is u65.family is family_of("ethos-u55-64") is family_of("ethos-u65-256")
    assert u55.family.name == "Ethos-U55/U65" and u55.family.commands is commands("ethos-u55-32")
    assert accelerator(u55) is u55  # an Accelerator passes through
    u85 = family_of("ethos-u85-512")
    assert (u85.name, sorted(u85.configurations), u85.commands is commands("ethos-u85-128")) == (
        "Ethos-U85",
        [f"ethos-u85-{m}" for m in (1024, 128, 2048, 256, 512)],
        True,
    )
    assert accelerator("ethos-u85-512").family is u85 and not u85.cycles_checked
    # a family describes only for its own configurations' streams: the U85 NPU_OP_POOL 1
    # (AVERAGE) needs its registers
    (op,) = commands("ethos-u85-128").decode((0x0001_0005).to_bytes(4, "little"))
    with pytest.raises(UnsupportedError, match="NPU_OP_POOL at command-stream offset 0x0 needs"):
        u85.describe(accelerator("ethos-u85-128"), op, {})
    with pytest.raises(SimError, match="knows no NPU family of 'ethos-u99-256'$"):
        family_of("ethos-u99-256")


def _is_module(name: str) -> bool:
    path = PACKAGE.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def _imports(path: Path) -> set[str]:
    """Every toolkit module (and Vela register module) a file imports, relative imports resolved
    against its package (a file that names neither the families nor an ethos_u module imports
    none of them: not parsed)."""
    text = path.read_text()
    if "families" not in text and "ethos_u" not in text:
        return set()
    package = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts[:-1])
    found = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            found.add(base)
            found.update(m for m in (f"{base}.{a.name}" for a in node.names) if _is_module(m))
    return found


# what the rest of the toolkit may import of families/: the registry and the interface
PUBLIC = {f"toolkit.sim.families{m}" for m in ("", ".family", ".accelerator_config")}


def test_no_module_outside_the_family_homes_imports_a_register_map():
    """The import graph over toolkit/: a family's register map (Vela's ethos_u55_regs, or a
    home's registers module) and everything else of its home are imported inside families/
    only; the rest of the toolkit imports the registry (families/__init__.py) and the
    interface (family.py, accelerator_config.py), and asks the family object."""
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        if FAMILIES in path.parents:
            continue
        for module in _imports(path):
            private = module.startswith("toolkit.sim.families.") and module not in PUBLIC
            if "ethos_u55_regs" in module or private:
                offenders.append(f"{path.relative_to(PACKAGE)} imports {module}")
    assert offenders == []
    # the check sees what it looks for: the homes import their register maps
    assert "toolkit.sim.families.ethos_u55.registers" in _imports(
        FAMILIES / "ethos_u55/__init__.py"
    )
    assert "toolkit.sim.families.ethos_u85.registers" in _imports(
        FAMILIES / "ethos_u85/__init__.py"
    )
    assert any("ethos_u55_regs" in m for m in _imports(FAMILIES / "ethos_u55" / "registers.py"))
