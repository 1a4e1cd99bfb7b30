from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from toolkit.errors import UserError
from toolkit.targets import list_targets, load_target

ROOT = Path(__file__).resolve().parents[2]


def test_builtin_targets():
    names = {t.name for t in list_targets()}
    assert {"corstone-300", "corstone-320"} <= names
    c300 = load_target("corstone-300")
    assert c300.npu().accelerator == "ethos-u55-128"
    assert c300.npu("ethos-u65-256").system_config == "Ethos_U65_High_End"
    assert c300.npu("ethos-u65-256").memory_mode == "Sram_Only"  # build_executor_runner.sh
    assert c300.fvp.binary_for("ethos-u65-256") == "FVP_Corstone_SSE-300_Ethos-U65"
    c320 = load_target("corstone-320")
    assert (c320.npu().accelerator, c320.npu().memory_mode) == (
        "ethos-u85-256",
        "Dedicated_Sram_384KB",
    )
    assert c320.fvp.config_file.name == "corstone-320.txt"


def test_user_target_folder(tmp_path, monkeypatch):
    (tmp_path / "mine.toml").write_text(
        'name = "mine"\n[npu]\ndefault = "ethos-u55-64"\nsupported = ["ethos-u55-64"]\n'
    )
    monkeypatch.setenv("ETK_TARGETS_PATH", str(tmp_path))
    assert load_target("mine").npu().accelerator == "ethos-u55-64"


def test_missing_key_is_named(tmp_path):
    bad = tmp_path / "t.toml"
    bad.write_text('name = "t"\n[npu]\nsupported = ["ethos-u55-64"]\n')
    with pytest.raises(
        UserError, match=r"key 'npu.default' missing, expected an NPU configuration"
    ):
        load_target(str(bad))


def test_every_subpackage_is_listed_in_pyproject():
    listed = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    found = {
        ".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "toolkit").rglob("__init__.py")
    }
    assert found <= listed


def test_a_relative_fvp_config_file_is_found_next_to_its_target_file(tmp_path, monkeypatch):
    """Resolved against the target file's folder (not etk's working directory) and made
    absolute: the FVP runs in a run folder of its own. A file there wins over a shipped one of
    the same name."""
    from toolkit.targets import data_dir

    mine = tmp_path / "lab" / "targets"
    mine.mkdir(parents=True)
    shipped = (data_dir("targets") / "corstone-320.toml").read_text()
    (mine / "board.toml").write_text(shipped)
    (mine / "corstone-320.txt").write_text("# my lab's parameters\n")
    elsewhere = tmp_path / "work"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    target = load_target("../lab/targets/board.toml")
    assert target.fvp.config_file == mine / "corstone-320.txt"
    assert target.fvp.config_file.is_absolute()


def test_test_files_live_in_topic_folders():
    assert sorted(p.name for p in (ROOT / "tests").glob("test_*.py")) == []
