"""Issue 45 item 8: a full disk names the full folder, a refused MODEL leaves no folder, `etk cache
clear` counts only what it removed, an unknown NPU is answered with its family's configurations.

On main: a copy into a full folder named the copy's source; a bad MODEL left an empty output
folder holding a stale .etk.lock; a symbolic link in the cache counted as a removed entry (and
was left); `--npu ethos-u55-999` on corstone-300 listed U85 configurations.
"""

from __future__ import annotations

import errno
import os
import re
import subprocess
import sys

import pytest

from toolkit.cli import _folder_error, main
from toolkit.lower.compile_cache import CACHE_DIR_ENV

ETK = [sys.executable, "-m", "toolkit.cli"]


def test_a_full_disk_in_a_copy_names_the_folder_written():
    full = OSError(errno.ENOSPC, "No space left on device", "/src/suite.toml", None, "/full/o/s")
    assert _folder_error(full, "/full/o") == (
        "cannot write /full/o/s: No space left on device; free space in /full/o or choose "
        "another folder (-o/--out)"
    )


def test_a_bench_folder_on_a_full_disk_names_it(small_disk, tmp_path):
    suite = tmp_path / "s.toml"
    suite.write_text('models = ["zoo:conv2d_relu"]\n' + "# padding\n" * 4000)
    (small_disk / "filler").write_bytes(b"\0" * (small_disk_free(small_disk) - 4096))
    out = small_disk / "out"
    done = subprocess.run(
        [*ETK, "bench", str(suite), "--out", str(out)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 2, done.stderr[-3000:]
    assert done.stderr == (
        f"etk: error: cannot write {out / 'suite.toml'}: No space left on device; free space in "
        f"{out} or choose another folder (-o/--out)\n"
    )


def small_disk_free(disk) -> int:
    stats = os.statvfs(disk)
    return stats.f_bavail * stats.f_frsize


@pytest.mark.parametrize(
    "make_model, expected",
    [
        (lambda d: f"{d / 'm.py'}:Nope", "has no 'Nope'"),
        (lambda d: "zoo:conv2d_relu", "--eval-samples must be at least 1"),
    ],
)
def test_a_refused_run_leaves_no_folder_it_made(tmp_path, capsys, make_model, expected):
    (tmp_path / "m.py").write_text("import torch\n")
    out = tmp_path / "new" / "out"
    extra = ["--eval-samples", "0"] if "zoo:" in make_model(tmp_path) else []
    assert main(["compile", make_model(tmp_path), "-o", str(out), *extra]) == 2
    assert expected in capsys.readouterr().err
    assert not (tmp_path / "new").exists()


def test_a_refused_run_leaves_a_folder_it_did_not_make(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_text("keep")
    assert main(["compile", "zoo:conv2d_relu", "-o", str(out), "--eval-samples", "0"]) == 2
    assert sorted(p.name for p in out.iterdir()) == ["mine.txt"]  # refused before the lock


def test_cache_clear_counts_only_what_it_removed(tmp_path, monkeypatch, capsys):
    cache, elsewhere = tmp_path / "cache", tmp_path / "elsewhere"
    (cache / ("a" * 16)).mkdir(parents=True)
    (cache / ("a" * 16) / "program.json").write_text("{}")
    elsewhere.mkdir()
    (elsewhere / "keep.bin").write_bytes(b"x" * 100)
    (cache / ("b" * 16)).symlink_to(elsewhere, target_is_directory=True)
    monkeypatch.setenv(CACHE_DIR_ENV, str(cache))
    assert main(["cache", "clear"]) == 0
    assert capsys.readouterr().out == f"removed 1 entry, 2 bytes, from {cache}\n"
    assert (elsewhere / "keep.bin").read_bytes() == b"x" * 100
    assert main(["cache", "info"]) == 0
    assert "0 entries" in capsys.readouterr().out


@pytest.mark.parametrize(
    "npu, offered",
    [
        ("ethos-u55-999", "ethos-u55-32, ethos-u55-64, ethos-u55-128, ethos-u55-256"),
        ("ethos-u65-1", "ethos-u65-256, ethos-u65-512"),
        (
            "ethos-u99-1",
            "ethos-u55-32, ethos-u55-64, ethos-u55-128, ethos-u55-256, "
            "ethos-u65-256, ethos-u65-512",
        ),
    ],
)
def test_an_unknown_npu_gets_its_familys_configurations(tmp_path, capsys, npu, offered):
    assert main(["compile", "zoo:conv2d_relu", "--npu", npu, "-o", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"etk: error: unknown NPU configuration '{npu}': target 'corstone-300' offers {offered}\n"
    )
    assert not re.search("ethos-u85", err)
