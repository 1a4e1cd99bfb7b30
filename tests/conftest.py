"""Shared fixtures: each shared model is compiled once per test session.

The session sets ETK_CACHE_DIR (unless it is set already) to a fresh folder, so a program is
compiled once for the whole run: by whichever xdist worker or etk subprocess needs it first.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from toolkit.console_capture import COMPILER_SIDE, quiet_torch_import

quiet_torch_import(COMPILER_SIDE)  # torchao's import-time chatter would end every run's output

from toolkit.job import Job  # noqa: E402
from toolkit.lower.compile_cache import CACHE_DIR_ENV  # noqa: E402
from toolkit.pipeline import run_job  # noqa: E402

_SESSION_CACHE = pytest.StashKey[str]()


def pytest_configure(config):
    if hasattr(config, "workerinput") or os.environ.get(CACHE_DIR_ENV):
        return  # an xdist worker inherits the controller's folder
    folder = tempfile.mkdtemp(prefix="etk-test-compile-cache-")
    os.environ[CACHE_DIR_ENV] = folder
    config.stash[_SESSION_CACHE] = folder


def pytest_unconfigure(config):
    # API runs without output= keep their folder until exit (atexit), which an xdist worker
    # skips (os._exit): this process's go now, and the controller's pass takes gone workers'
    from toolkit.api import _TEMPORARY, _remove_orphaned_folders

    for leftover in Path(tempfile.gettempdir()).glob(_TEMPORARY.format(pid=os.getpid()) + "*"):
        shutil.rmtree(leftover, ignore_errors=True)
    _remove_orphaned_folders()
    folder = config.stash.get(_SESSION_CACHE, None)
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)
        os.environ.pop(CACHE_DIR_ENV, None)


@pytest.fixture
def no_shared_compile_cache(monkeypatch):
    """For tests of compiling itself: nothing comes from the session's shared cache."""
    monkeypatch.delenv(CACHE_DIR_ENV, raising=False)


@pytest.fixture(scope="session")
def compiled(tmp_path_factory):
    """compiled(model) -> JobResult with fused and unfused variants on corstone-300."""

    @functools.cache
    def build(model: str, eval_samples: int = 4):
        out = tmp_path_factory.mktemp(model.replace(":", "_"))
        return run_job(Job(model=model, out_dir=out, eval_samples=eval_samples))

    return build


@pytest.fixture
def small_disk(tmp_path):
    """A 96 KiB tmpfs (root only: mount(8)): fills up in the middle of a compile."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=96k", "tmpfs", str(disk)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.decode().strip()}")
    yield disk
    subprocess.run(["umount", str(disk)], check=True)
