"""Fixtures for runner tests: the FVP stand-in under the real binary names, a dummy runner ELF."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

FAKE_FVP_PATH = Path(__file__).resolve().parents[1] / "stand_ins" / "fake_fvp.py"


def load_fake_fvp():
    name = "etk_tests_fake_fvp"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, FAKE_FVP_PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def fake_fvp():
    return load_fake_fvp()


@pytest.fixture
def fvp_env(tmp_path, monkeypatch, fake_fvp):
    """The stand-in on ETK_FVP_PATH and a dummy runner ELF in ETK_RUNNER_ELF; returns the ELF."""
    for name in (
        "ETK_RUNNER_ELF",
        "ETK_FAKE_FVP_MODE",
        "ETK_FAKE_FVP_REFERENCE",
        "ETK_FAKE_FVP_NUM_MACS",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ETK_FVP_PATH", str(fake_fvp.install(tmp_path / "fvp-bin")))
    elf = tmp_path / "arm_executor_runner"
    elf.write_bytes(b"\x7fELF stand-in runner")
    monkeypatch.setenv("ETK_RUNNER_ELF", str(elf))
    return elf
