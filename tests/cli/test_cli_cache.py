"""ETK_CACHE_DIR set to a folder that cannot be used is refused before anything compiles;
`etk cache` reports, clears and prunes (least recently used first) the entries, under their locks."""

from __future__ import annotations

import errno
import os
import tempfile

import pytest

import toolkit.cli as cli
from toolkit.cli import main
from toolkit.cli.cache import parse_size
from toolkit.errors import UserError
from toolkit.lower.compile_cache import CACHE_DIR_ENV, held_entry, key_lock

FIX = "set ETK_CACHE_DIR to a writable folder or unset it"


def _refused(path, reason: str) -> str:
    return f"etk: error: ETK_CACHE_DIR={path} cannot be used as the compile cache: {reason}; {FIX}"


@pytest.fixture
def no_torch(monkeypatch):
    """The check comes first: loading torch (seconds) would already be too late."""

    def refuse(*args, **kwargs):
        raise AssertionError("etk started loading torch before checking ETK_CACHE_DIR")

    monkeypatch.setattr(cli, "quiet_torch_import", refuse)


def _etk(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    "argv",
    [
        ["compile", "zoo:linear_relu", "-o", "OUT"],
        ["compare", "zoo:linear_relu", "-o", "OUT"],
        ["deploy", "zoo:linear_relu", "-o", "OUT"],
        ["bench", "suite.toml", "--out", "OUT"],
    ],
)
def test_a_file_as_cache_folder_is_refused_before_compiling(
    tmp_path, monkeypatch, capsys, no_torch, argv
):
    cache = tmp_path / "cache"
    cache.write_text("not a folder")
    monkeypatch.setenv(CACHE_DIR_ENV, str(cache))
    out_dir = tmp_path / "out"
    code, out, err = _etk(capsys, *[str(out_dir) if a == "OUT" else a for a in argv])
    assert (code, out, err) == (2, "", _refused(cache, "it is not a folder") + "\n")
    assert not out_dir.exists()


def test_a_cache_folder_that_cannot_be_created_is_refused(tmp_path, monkeypatch, capsys, no_torch):
    (tmp_path / "file").write_text("")
    cache = tmp_path / "file" / "cache"
    monkeypatch.setenv(CACHE_DIR_ENV, str(cache))
    code, out, err = _etk(capsys, "compile", "zoo:linear_relu", "-o", str(tmp_path / "out"))
    assert (code, out, err) == (2, "", _refused(cache, "Not a directory") + "\n")


def test_a_cache_folder_that_cannot_be_written_is_refused(tmp_path, monkeypatch, capsys, no_torch):
    cache = tmp_path / "cache"
    cache.mkdir()
    cache.chmod(0o500)
    if os.access(cache, os.W_OK):  # root writes anyway: stand in for the OS's refusal

        def refuse(*args, **kwargs):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))

        monkeypatch.setattr(tempfile, "mkstemp", refuse)
    monkeypatch.setenv(CACHE_DIR_ENV, str(cache))
    code, out, err = _etk(capsys, "compile", "zoo:linear_relu", "-o", str(tmp_path / "out"))
    monkeypatch.undo()
    cache.chmod(0o700)
    assert (code, out, err) == (2, "", _refused(cache, "Permission denied") + "\n")


def test_the_library_refuses_it_too(tmp_path, monkeypatch):
    """bench workers and scripts compile without the CLI's check."""
    cache = tmp_path / "cache"
    cache.write_text("")
    monkeypatch.setenv(CACHE_DIR_ENV, str(cache))
    with pytest.raises(UserError) as refused:
        with held_entry("0123"):
            pass
    assert f"etk: error: {refused.value}" == _refused(cache, "it is not a folder")


def _fake_cache(root):
    """Entries a (1000 bytes, oldest), b (3000 in two files), c (500, newest), their lock files
    and a partial copy left by an interrupted publish."""
    for key, files, used in (
        ("a", {"program.json": 1000}, 100),
        ("b", {"program.json": 1000, "vela/out.npz": 2000}, 200),
        ("c", {"program.json": 500}, 300),
    ):
        for name, size in files.items():
            (root / key / name).parent.mkdir(parents=True, exist_ok=True)
            (root / key / name).write_bytes(b"x" * size)
        os.utime(root / key, (used, used))
        (root / f"{key}.lock").write_bytes(b"")
    (root / ".c.partial-x1y2").mkdir()
    (root / ".c.partial-x1y2" / "program.json").write_bytes(b"x" * 77)


def test_info_counts_the_entries_and_their_bytes(tmp_path, monkeypatch, capsys):
    _fake_cache(tmp_path)
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path))
    expected = f"compile cache: {tmp_path}\n3 entries, 4500 bytes (4.4 KiB)\n"
    assert _etk(capsys, "cache") == (0, expected, "")
    assert _etk(capsys, "cache", "info") == (0, expected, "")


def test_help_shows_the_action_as_optional(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["cache", "--help"])
    out = capsys.readouterr().out
    assert exit_.value.code == 0
    assert out.startswith("usage: etk cache [-h] [ACTION] ...\n")
    assert "plain `etk cache` is info" in out


def test_prune_removes_the_least_recently_used_until_the_rest_fits(tmp_path, monkeypatch, capsys):
    _fake_cache(tmp_path)
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path))
    code, out, err = _etk(capsys, "cache", "prune", "--max-size", "3.5K")  # 3584 bytes
    assert (code, err) == (0, "")
    assert out == "removed 1 entry, 1000 bytes; 2 entries left, 3500 bytes (3.4 KiB)\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".c.partial-x1y2", "a.lock", "b", "b.lock", "c", "c.lock"
    ]  # fmt: skip


def test_a_hit_makes_an_entry_the_last_to_prune(tmp_path, monkeypatch, capsys):
    _fake_cache(tmp_path)
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path))
    os.utime(tmp_path / "a", (400, 400))  # as mark_used does on a hit, later than c
    code, out, _ = _etk(capsys, "cache", "prune", "--max-size", "1000")
    assert out == "removed 2 entries, 3500 bytes (3.4 KiB); 1 entry left, 1000 bytes\n"
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == [".c.partial-x1y2", "a"]


def test_an_entry_in_use_stays(tmp_path, monkeypatch, capsys):
    _fake_cache(tmp_path)
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path))
    with key_lock(tmp_path, "b") as held:  # another process copying or filling b
        assert held
        code, out, _ = _etk(capsys, "cache", "prune", "--max-size", "0")
    assert out == (
        "removed 2 entries, 1500 bytes (1.5 KiB); 1 entry left, 3000 bytes (2.9 KiB)\n"
        "left 1 entry in use by another process: b\n"
    )
    assert (code, sorted(p.name for p in tmp_path.iterdir() if p.is_dir())) == (
        0,
        [".c.partial-x1y2", "b"],
    )


def test_clear_removes_every_entry_and_partial_copies_and_keeps_the_locks(
    tmp_path, monkeypatch, capsys
):
    _fake_cache(tmp_path)
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path))
    code, out, err = _etk(capsys, "cache", "clear")
    assert (code, out, err) == (
        0,
        f"removed 3 entries, 4500 bytes (4.4 KiB), from {tmp_path}\n",
        "",
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.lock", "b.lock", "c.lock"]
    assert _etk(capsys, "cache") == (0, f"compile cache: {tmp_path}\n0 entries, 0 bytes\n", "")


@pytest.mark.parametrize(
    "argv", [["cache"], ["cache", "clear"], ["cache", "prune", "--max-size", "1G"]]
)
def test_without_the_variable_the_cache_is_off(monkeypatch, capsys, argv):
    monkeypatch.delenv(CACHE_DIR_ENV, raising=False)
    expected = (
        "the compile cache is off: set ETK_CACHE_DIR to a folder to share compiled programs "
        "between runs and processes\n"
    )
    assert _etk(capsys, *argv) == (0, expected, "")


def test_a_bad_size_is_one_line_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path))
    code, out, err = _etk(capsys, "cache", "prune", "--max-size", "5X")
    assert (code, out) == (2, "")
    assert err == (
        "etk: error: --max-size '5X' is not a size: give bytes or a number with K, M, G or T "
        "(powers of 1024), e.g. 500M or 5G\n"
    )


@pytest.mark.parametrize(
    "text, size",
    [("123", 123), ("1.5K", 1536), ("500M", 500 << 20), ("5G", 5 << 30), ("2GiB", 2 << 30),
     ("2gb", 2 << 30), ("1T", 1 << 40)],
)  # fmt: skip
def test_sizes(text, size):
    assert parse_size(text) == size
