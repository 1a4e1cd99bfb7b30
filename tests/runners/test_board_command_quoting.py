"""Board targets' build and flash templates with hostile paths: nothing runs that the template
did not say, and the tools see the exact paths (stand-in tools from tests/stand_ins/)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from toolkit.runners.board_commands import render, run_steps
from toolkit.targets import load_target

STAND_IN = Path(__file__).parents[1] / "stand_ins" / "build_tool.py"
HOSTILE = [
    "out;id>INJECTED.txt;",
    "with space",
    'it\'s "quoted"',
    "$(touch INJECTED.txt)",
    "`touch INJECTED.txt`",
]


def _tool(folder: Path, name: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{STAND_IN}" {name} "$@"\n')
    path.chmod(0o755)


@pytest.fixture
def tools(tmp_path, monkeypatch):
    """PATH, $EXECUTORCH_ROOT, $ALIF_SE_TOOLS and $MPS3_MOUNT holding stand-in tools."""
    bin_dir, root = tmp_path / "bin", tmp_path / "executorch"
    se_tools, mount = tmp_path / "se-tools", tmp_path / "mps3"
    for name in ("west", "arm-none-eabi-objcopy"):
        _tool(bin_dir, name)
    _tool(root / "backends/arm/scripts", "build_executor_runner.sh")
    for name in ("app-gen-toc", "app-write-mram"):
        _tool(se_tools, name)
    (se_tools / "build/images").mkdir(parents=True)
    (mount / "SOFTWARE").mkdir(parents=True)
    (mount / "MB/HBI0309C/AN552").mkdir(parents=True)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setenv("EXECUTORCH_ROOT", str(root))
    monkeypatch.setenv("ALIF_SE_TOOLS", str(se_tools))
    monkeypatch.setenv("MPS3_MOUNT", str(mount))
    monkeypatch.setenv("ETK_STANDIN_LOG", str(tmp_path / "calls.jsonl"))
    return tmp_path


@pytest.mark.parametrize("target", ["alif-e7-hp", "alif-e7-he", "mps3-corstone-300"])
@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_output_folder_names(tools, target, name):
    board = load_target(target).board_spec
    run_dir = tools / name / "serial-fused"
    run_dir.mkdir(parents=True)
    bpte, elf = run_dir / "program.bpte", run_dir / "runner.elf"
    bpte.write_bytes(b"BPTE")
    values = {
        "pte": str(tools / name / "model.pte"),
        "bpte": str(bpte),
        "elf": str(elf),
        "port": "/dev/null",
    }
    run_steps("build", board.build_command, values, 60, run_dir / "build.log", run_dir)
    run_steps("flash", board.flash_command, values, 60, run_dir / "flash.log", run_dir)

    assert not list(tools.rglob("INJECTED.txt"))
    assert elf.read_bytes() == b"ELF"  # the build's cp reached the exact path
    calls = [json.loads(line) for line in (tools / "calls.jsonl").read_text().splitlines()]
    build = calls[0]
    if target.startswith("alif"):  # Zephyr's hello-executorch embeds the .pte; west flashes it
        assert build["tool"] == "west"
        assert f"-DET_PTE_FILE_PATH={values['pte']}" in build["argv"]
        assert build["argv"][build["argv"].index("-d") + 1] == f"{run_dir}/west"
        assert calls[1] == {"tool": "west", "argv": ["flash", "-d", f"{run_dir}/west"]}
    else:
        assert build["tool"] == "build_executor_runner.sh"
        assert f"--pte={bpte}" in build["argv"]
        assert f"--output={run_dir}/runner" in build["argv"]
        objcopies = [c["argv"] for c in calls if c["tool"] == "arm-none-eabi-objcopy"]
        assert objcopies and all(argv[-2] == str(elf) for argv in objcopies)


def test_values_are_quoted_only_inside_shell_scripts():
    values = {"elf": "/o;id/r.elf"}
    assert render("objcopy {elf} x", values) == ["objcopy", "/o;id/r.elf", "x"]
    assert render("sh -c 'cp a {elf}'", values) == ["sh", "-c", "cp a '/o;id/r.elf'"]
    assert render("bash -ec 'cp a {elf}' {elf}", values) == [
        "bash",
        "-ec",
        "cp a '/o;id/r.elf'",
        "/o;id/r.elf",
    ]
