"""A vendor's Vela ini: from a target file or --vela-config, read by Vela and our cycle model."""

from __future__ import annotations

import json

import pytest

from toolkit.errors import UserError
from toolkit.npu import ARM_VELA_INI
from toolkit.sim import memory_system as cycle_model
from toolkit.targets import load_target

# Two sections of Alif's ensemble_vela.ini (alifsemi/alif_ml-embedded-evaluation-kit
# scripts/vela/ensemble_vela.ini), as Alif publishes them.
ALIF_INI = """\
[System_Config.RTSS_HP_SRAM_MRAM]
core_clock=400e6
axi0_port=Sram
axi1_port=OffChipFlash
Sram_clock_scale=0.762
Sram_burst_length=8
Sram_read_latency=29
Sram_write_latency=29
OffChipFlash_clock_scale=0.121
OffChipFlash_burst_length=16
OffChipFlash_read_latency=60
OffChipFlash_write_latency=60

[Memory_Mode.Shared_Sram]
const_mem_area=Axi1
arena_mem_area=Axi0
cache_mem_area=Axi0
"""


def vendor_target(tmp_path, config_line: str) -> str:
    (tmp_path / "ensemble_vela.ini").write_text(ALIF_INI)
    path = tmp_path / "vendor.toml"
    path.write_text(
        f'name = "vendor"\n[npu]\ndefault = "ethos-u55-256"\n'
        f'supported = ["ethos-u55-256"]\n[npu.vela]\n{config_line}\n'
        f'[npu.vela.ethos-u55]\nsystem_config = "RTSS_HP_SRAM_MRAM"\n'
        f'memory_mode = "Shared_Sram"\n'
    )
    return str(path)


def test_target_names_its_own_ini_relative_to_the_target_file(tmp_path):
    npu = load_target(vendor_target(tmp_path, 'config = "ensemble_vela.ini"')).npu()
    assert npu.config_ini == str(tmp_path / "ensemble_vela.ini")
    assert f"--config={tmp_path / 'ensemble_vela.ini'}" in npu.vela_flags
    assert "--system-config=RTSS_HP_SRAM_MRAM" in npu.vela_flags


def test_command_line_ini_wins_and_must_hold_the_system_config(tmp_path):
    target = load_target("corstone-300")
    assert target.npu().config_ini == ARM_VELA_INI
    (tmp_path / "ensemble_vela.ini").write_text(ALIF_INI)
    with pytest.raises(UserError) as err:
        target.npu(vela_config=tmp_path / "ensemble_vela.ini")
    assert str(err.value) == (
        f"Vela config {tmp_path / 'ensemble_vela.ini'} (--vela-config) has "
        f"no System_Config 'Ethos_U55_High_End_Embedded': pass "
        f"--system-config with one of RTSS_HP_SRAM_MRAM"
    )
    npu = target.npu(
        "ethos-u55-256", "RTSS_HP_SRAM_MRAM", vela_config=tmp_path / "ensemble_vela.ini"
    )
    assert npu.config_ini == str(tmp_path / "ensemble_vela.ini")


def test_cycle_model_reads_the_vendor_memory_system(tmp_path):
    (tmp_path / "ensemble_vela.ini").write_text(ALIF_INI)
    memory = cycle_model.memory_system(
        "ethos-u55-256", "RTSS_HP_SRAM_MRAM", "Shared_Sram", str(tmp_path / "ensemble_vela.ini")
    )
    weights, arena = memory.port(0), memory.port(1)
    assert (weights.name, weights.read_latency, weights.burst) == ("OffChipFlash", 60, 16)
    assert (arena.name, arena.read_latency, arena.burst) == ("Sram", 29, 8)
    assert arena.bytes_per_cycle == pytest.approx(0.762 * 8)  # 64-bit AXI at the clock scale
    arm = cycle_model.memory_system("ethos-u55-256", "Ethos_U55_High_End_Embedded", "Shared_Sram")
    assert arm.port(1).read_latency == 32


def test_etk_compile_passes_the_ini_to_vela(tmp_path, capsys):
    from toolkit.cli import main

    (tmp_path / "ensemble_vela.ini").write_text(ALIF_INI)
    code = main(
        [
            "compile",
            "zoo:conv2d_relu",
            "--npu",
            "ethos-u55-256",
            "--vela-config",
            str(tmp_path / "ensemble_vela.ini"),
            "--system-config",
            "RTSS_HP_SRAM_MRAM",
            "-o",
            str(tmp_path / "out"),
        ]
    )
    assert code == 0
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["vela"]["config"] == str(tmp_path / "ensemble_vela.ini")
    assert f"--config={tmp_path / 'ensemble_vela.ini'}" in report["vela"]["flags"]
    assert report["variants"]["fused"]["estimate"]["npu_cycles"] > 0


def test_reading_an_sram_only_memory_system_prints_nothing(capsys):
    """Vela's ArchitectureFeatures prints "Info: Changing const_mem_area ..." for Sram_Only; the
    cycle model's read of the ini is not a compile, so a U65 run showed a stray line."""
    cycle_model.memory_system.cache_clear()
    memory = cycle_model.memory_system("ethos-u65-256", "Ethos_U65_High_End", "Sram_Only")
    assert capsys.readouterr().out == ""
    assert memory.port(0).name == "OnChipFlash"  # Vela's own override, kept
