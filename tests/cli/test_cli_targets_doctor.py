"""`etk targets` and `etk doctor`."""

from __future__ import annotations

import argparse
import sys
from importlib import metadata
from pathlib import Path

import pytest

from toolkit.cli import doctor, targets


def _etk(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="etk")
    subparsers = parser.add_subparsers(dest="verb")
    targets.register(subparsers)
    doctor.register(subparsers)
    args = parser.parse_args(argv)
    return args.func(args)


@pytest.fixture
def bare_machine(tmp_path, monkeypatch):
    """No FVP anywhere, no runner ELF."""
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    for name in ("ETK_FVP_PATH", "ETK_RUNNER_ELF", "ETK_TARGETS_PATH"):
        monkeypatch.delenv(name, raising=False)


def _install_fake_fvps(bin_dir: Path) -> None:
    """Executables named like the FVPs: these verbs only look for them, never run them."""
    bin_dir.mkdir()
    for name in (
        "FVP_Corstone_SSE-300_Ethos-U55",
        "FVP_Corstone_SSE-300_Ethos-U65",
        "FVP_Corstone_SSE-320",
    ):
        (bin_dir / name).write_text("#!/bin/sh\nexit 1\n")
        (bin_dir / name).chmod(0o755)


def _row(out: str, target: str, *cells: str) -> str:
    """The table row whose first cell is target and which holds cells."""
    rows = [
        line
        for line in out.splitlines()
        if line.count("│") > 2
        and line.split("│")[1].strip() == target
        and all(c in line for c in cells)
    ]
    assert len(rows) == 1, out
    return rows[0]


def _notes(out: str, cell: str) -> list[str]:
    """The numbered notes a cell like 'no (3, 4)' points to."""
    numbers = cell[cell.index("(") + 1 : -1].split(", ")
    return [next(line for line in out.splitlines() if line.startswith(f"({n}) ")) for n in numbers]


def test_targets_on_a_machine_without_fvp(bare_machine, capsys):
    assert _etk(["targets"]) == 0
    out = capsys.readouterr().out
    u55 = _row(out, "corstone-300", "ethos-u55: 32, 64, 128, 256", "Ethos_U55_High_End_Embedded")
    fvp_cell, sim_cell, ref_cell = [c.strip() for c in u55.split("│")[-4:-1]]
    assert (sim_cell, ref_cell) == ("yes", "yes") and fvp_cell.startswith("no (")
    binary_note, elf_note = _notes(out, fvp_cell)
    assert binary_note.endswith(
        ") FVP binary FVP_Corstone_SSE-300_Ethos-U55 not found on PATH or in ETK_FVP_PATH: "
        "download the Corstone-300 Ecosystem FVP from "
        "https://developer.arm.com/downloads/-/arm-ecosystem-fvps (or run ExecuTorch's "
        "examples/arm/setup.sh --i-agree-to-the-contained-eula), then put the folder holding "
        "FVP_Corstone_SSE-300_Ethos-U55 on PATH or in ETK_FVP_PATH"
    )
    assert (
        ") no executor runner ELF (--runner-elf, ETK_RUNNER_ELF or fvp.runner_elf in the "
        "target file): build it in an ExecuTorch checkout with "
        "backends/arm/scripts/build_executor_runner.sh --pte=semihosting "
        "--target=ethos-u55-128 --system_config=Ethos_U55_High_End_Embedded "
        "--memory_mode=Shared_Sram"
    ) in elf_note
    u85 = _row(out, "corstone-320", "ethos-u85: 128", "Ethos_U85_SYS_DRAM_Mid")
    assert u85.split("│")[-3].strip() == "yes"  # the simulator runs Ethos-U85 (issue 47)
    assert "Sram_Only" in out and "Dedicated_Sram_384KB" in out
    assert "FVP binary FVP_Corstone_SSE-320 not found" in out
    # every configuration a row lists runs: the simulator has the U65-512 (two cores) too
    u65 = _row(out, "corstone-300", "ethos-u65: 256, 512")
    assert u65.split("│")[-3].strip() == "yes"
    assert "not ethos-u65-512" not in out and "not ethos-u85" not in out


def test_targets_with_fvp_and_runner_elf(bare_machine, tmp_path, monkeypatch, capsys):
    _install_fake_fvps(tmp_path / "fvps")
    monkeypatch.setenv("ETK_FVP_PATH", str(tmp_path / "fvps"))
    elf = tmp_path / "arm_executor_runner"
    elf.write_bytes(b"\x7fELF")
    assert _etk(["targets", "--runner-elf", str(elf)]) == 0
    u55 = _row(capsys.readouterr().out, "corstone-300", "ethos-u55")
    assert [c.strip() for c in u55.split("│")[-4:-1]] == ["yes", "yes", "yes"]


def test_doctor_reports_versions_and_what_is_missing(bare_machine, capsys):
    assert _etk(["doctor"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].split() == ["python", sys.version.split()[0]]
    for label, dist in (
        ("torch", "torch"),
        ("executorch", "executorch"),
        ("ethos-u-vela", "ethos-u-vela"),
        ("tosa-tools", "tosa-tools"),
        ("toolkit", "ethos-u-toolkit"),
    ):
        assert f"{label:<14}{metadata.version(dist)}" in lines
    assert not [line for line in lines if "ethos-u-vela" in line and "WARNING" in line]
    assert (
        "  FVP_Corstone_SSE-300_Ethos-U65: missing; download the Corstone-300 Ecosystem FVP "
        "from https://developer.arm.com/downloads/-/arm-ecosystem-fvps (or run ExecuTorch's "
        "examples/arm/setup.sh --i-agree-to-the-contained-eula), then put the folder holding "
        "FVP_Corstone_SSE-300_Ethos-U65 on PATH or in ETK_FVP_PATH"
    ) in lines
    assert any(
        line.startswith(
            "  corstone-320: missing; build it in an ExecuTorch checkout "
            "with backends/arm/scripts/build_executor_runner.sh "
            "--pte=semihosting --target=ethos-u85-256"
        )
        for line in lines
    )


def test_doctor_warns_when_vela_is_not_the_tested_one(bare_machine, monkeypatch, capsys):
    real = metadata.version
    monkeypatch.setattr(
        doctor.metadata, "version", lambda d: "5.1.0" if d == "ethos-u-vela" else real(d)
    )
    assert _etk(["doctor"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert f"{'ethos-u-vela':<14}5.1.0" in lines
    assert (
        "WARNING ethos-u-vela 5.1.0 is installed; etk was tested with 5.2.0 (pip install "
        "ethos-u-vela==5.2.0): estimates and command streams may differ"
    ) in lines


def test_doctor_finds_fvp_and_elf(bare_machine, tmp_path, monkeypatch, capsys):
    _install_fake_fvps(tmp_path / "fvps")
    monkeypatch.setenv("PATH", str(tmp_path / "fvps"))
    elf = tmp_path / "arm_executor_runner"
    elf.write_bytes(b"\x7fELF")
    monkeypatch.setenv("ETK_RUNNER_ELF", str(elf))
    assert _etk(["doctor"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert f"  FVP_Corstone_SSE-320: found at {tmp_path / 'fvps' / 'FVP_Corstone_SSE-320'}" in lines
    assert f"  corstone-300: found at {elf} (from ETK_RUNNER_ELF)" in lines


def test_verbs_are_wired_into_etk(bare_machine, capsys):
    from toolkit.cli import main

    assert main(["doctor"]) == 0
    assert "FVP_Corstone_SSE-320: missing" in capsys.readouterr().out
