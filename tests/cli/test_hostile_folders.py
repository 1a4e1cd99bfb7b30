"""Folders etk reads from and writes into hold only what they claim: a cache entry's list of
files cannot name a path outside it or through a link, an output folder with a symbolic link or
a special file inside is refused before anything is written, and a full disk is one line."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys

import pytest

from toolkit.cli import main
from toolkit.lower.program_store import (
    PROGRAM_FILE,
    STORE_VERSION,
    StoreDamaged,
    copy_stored_program,
    load_stored_program,
)
from toolkit.safe_paths import UnsafeName, member

ETK = [sys.executable, "-m", "toolkit.cli"]
ZOO = ["compile", "zoo:conv2d_relu", "--eval-samples", "1"]


def _store(folder, files: dict[str, str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    data = {"store_version": STORE_VERSION, "cache_key": "k", "files": files}
    (folder / PROGRAM_FILE).write_text(json.dumps(data))


def test_a_name_through_a_link_and_up_is_not_copied_out_of_the_staging_folder(tmp_path):
    """The issue's poisoned entry: `lnk/../../x.txt` with lnk a link deep inside the cache
    resolves inside the cache on the source side and above the staging folder on the other."""
    cache = tmp_path / "cache" / "entry"
    deep = cache / "a" / "b"
    deep.mkdir(parents=True)
    (cache / "lnk").symlink_to(deep)
    (cache / "x.txt").write_text("planted")
    name = "lnk/../../x.txt"
    _store(cache, {name: hashlib.sha256(b"planted").hexdigest()})
    staging = tmp_path / "out" / "stage"
    staging.mkdir(parents=True)
    assert copy_stored_program(cache, staging) is False
    assert not (tmp_path / "x.txt").exists() and not (tmp_path / "out" / "x.txt").exists()
    with pytest.raises(StoreDamaged, match=r"'lnk/../../x.txt' is not a plain path"):
        load_stored_program(cache, "k")


@pytest.mark.parametrize(
    "name, message",
    [
        ("/etc/passwd", "is not a plain path inside the folder"),
        ("a/../b", "is not a plain path inside the folder"),
        ("", "is not a file name"),
        (7, "is not a file name"),
        ("link.bin", "link.bin is not a regular file inside the folder"),
        ("missing.bin", "missing.bin is missing"),
    ],
)
def test_member_takes_only_plain_names_of_regular_files(tmp_path, name, message):
    (tmp_path / "real.bin").write_bytes(b"x")
    (tmp_path / "link.bin").symlink_to(tmp_path / "real.bin")
    assert member(tmp_path, "real.bin") == tmp_path / "real.bin"
    with pytest.raises(UnsafeName, match=message):
        member(tmp_path, name)


def test_a_fifo_listed_in_a_store_is_damage_not_a_hang(tmp_path):
    os.mkfifo(tmp_path / "delegate0.bin")
    _store(tmp_path, {"delegate0.bin": "0" * 64})
    with pytest.raises(StoreDamaged, match="delegate0.bin is not a regular file"):
        load_stored_program(tmp_path, "k")


@pytest.mark.parametrize("link", [".etk.lock", "tflite/m.tflite", "tflite/reference"])
def test_a_link_in_the_output_folder_is_refused_and_its_target_untouched(tmp_path, capsys, link):
    out = tmp_path / "out"
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("mine")
    (out / link).parent.mkdir(parents=True, exist_ok=True)
    target = victim if link.endswith("reference") else victim / "keep.txt"
    (out / link).symlink_to(target)
    assert main([*ZOO, "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        f"etk: error: output folder {out} holds a symbolic link ({out / link}): etk writes only "
        "real files in its folders; remove the link or choose another folder"
    )
    assert sorted(p.name for p in victim.iterdir()) == ["keep.txt"]
    assert (victim / "keep.txt").read_text() == "mine"


def test_a_fifo_as_the_lock_file_is_refused_in_one_line(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    os.mkfifo(out / ".etk.lock")
    assert main([*ZOO, "-o", str(out)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"etk: error: output folder {out} holds {out / '.etk.lock'}, which is not a regular "
        "file (a FIFO, socket or device): remove it or choose another folder"
    )


def test_a_full_disk_is_one_line_and_leaves_no_partial_file(small_disk):
    out = small_disk / "out"
    done = subprocess.run([*ETK, *ZOO, "-o", str(out)], capture_output=True, text=True, timeout=600)
    err = done.stderr.strip()
    assert done.returncode == 2, err[-3000:]
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    where = re.escape(str(out)) + r"\S*"
    assert re.fullmatch(
        rf"etk: error: cannot write (into )?{where}: No space left on device; "
        rf"free space in {where} or choose another folder \(-o/--out\)",
        err,
    ), err
    assert not list(out.rglob("*.tmp")) and not list(out.rglob(".*.tmp"))
    for written in out.rglob("*.json"):  # what was written is whole
        json.loads(written.read_text())
