"""The folder ExecuTorch dumps its TOSA and Vela files into (under the system's temporary
folder, as its Vela command line needs) is removed however the lowering ends, an interrupt
included, and a later lowering removes those of processes that were killed."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from toolkit.lower import executorch_lower


def test_an_interrupted_lowering_leaves_no_dump_folder(monkeypatch):
    seen = []

    def interrupted(quantized, npu, work_dir, rewrites, extra_vela, dump_dir):
        (dump_dir / "output_tag_0.tosa").write_bytes(b"partial")
        seen.append(dump_dir)
        raise KeyboardInterrupt

    monkeypatch.setattr(executorch_lower, "_lower", interrupted)
    with pytest.raises(KeyboardInterrupt):
        executorch_lower.lower(None, None, Path("."))  # type: ignore[arg-type]
    (dump_dir,) = seen
    assert dump_dir.name.startswith(f"etk-lower-{os.getpid()}-") and not dump_dir.exists()


def test_the_dump_folders_of_killed_processes_are_removed():
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    dead = Path(tempfile.mkdtemp(prefix=f"etk-lower-{gone.stdout.strip()}-"))
    (dead / "vela").mkdir()
    mine = Path(tempfile.mkdtemp(prefix=f"etk-lower-{os.getpid()}-"))
    try:
        executorch_lower.remove_orphaned_dump_folders()
        assert not dead.exists() and mine.is_dir()
    finally:
        mine.rmdir()
