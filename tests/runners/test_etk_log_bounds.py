"""`etk log` reads a saved capture within bounds: a device, a FIFO or a pty is refused without
blocking, a capture past the size limit is refused, and a large capture is parsed in bounded
memory (streamed, no per-line objects kept).

On main `etk log /dev/zero` read without bound (7.9 GB in 12 s), `etk log FIFO` blocked on open
and a 200 MB capture took 1.3 GB. The children here run under a memory limit and a timeout, so
such a failure ends in a failed assertion, not in a stuck suite.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from toolkit.cli import main
from toolkit.runners import capture_file

MEMORY_LIMIT = 3 << 30  # address space of an `etk log` child
CHILD_TIMEOUT_S = 60


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def _etk_log(*argv: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "toolkit.cli", "log", *map(str, argv)],
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
        preexec_fn=_limited,
    )


@pytest.mark.parametrize(
    "device, kind", [("/dev/zero", "a character device"), ("/dev/urandom", "a character device")]
)
def test_a_device_is_refused_in_one_line(device, kind):
    done = _etk_log(device)
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr == (
        f"etk: error: {device} is {kind}, not a saved capture: etk log reads a file; save the "
        "console output first (e.g. `cat PORT > capture.log`, stopped when the run ends)\n"
    )


def test_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "console.fifo"
    os.mkfifo(fifo)
    done = _etk_log(fifo)  # on main: blocked in open() until the timeout
    assert done.returncode == 2
    assert done.stderr.startswith(f"etk: error: {fifo} is a FIFO, not a saved capture")


def test_a_serial_device_that_never_ends_is_refused(tmp_path):
    """A pty stands for a board's serial port that keeps printing."""
    controller, device = os.openpty()
    try:
        os.write(controller, b"I [executorch:main.cpp] tick\n" * 100)
        done = _etk_log(os.ttyname(device))
    finally:
        os.close(device)
        os.close(controller)
    assert done.returncode == 2
    assert "is a character device, not a saved capture" in done.stderr


def test_a_capture_past_the_size_limit_is_refused_before_reading(tmp_path):
    capture = tmp_path / "huge.log"
    with open(capture, "wb") as handle:  # sparse: no disk used
        handle.truncate(capture_file.SIZE_LIMIT + 1)
    done = _etk_log(capture)
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr == (
        f"etk: error: {capture} holds {capture_file.SIZE_LIMIT + 1:,} bytes, more than etk log "
        f"reads ({capture_file.SIZE_LIMIT:,}): cut it to the run (e.g. `tail -c 100M`)\n"
    )


def test_a_file_that_grows_past_the_limit_while_read_is_cut(monkeypatch, capsys):
    """/proc/self/maps: a regular file whose size says 0 and whose reading says more."""
    monkeypatch.setattr(capture_file, "SIZE_LIMIT", 512)
    assert main(["log", "/proc/self/maps"]) == 2
    assert capsys.readouterr().err == (
        "etk: error: /proc/self/maps holds more than etk log reads (512 bytes, read so far): "
        "cut it to the run (e.g. `tail -c 100M`)\n"
    )


def _peak_rss_kib(capture: Path) -> int:
    script = (
        "import resource, sys\n"
        "from toolkit.cli import main\n"
        f"code = main(['log', {str(capture)!r}])\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\n"
        "sys.exit(code)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=600,
        preexec_fn=_limited,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith(f"{capture}: ran and passed")
    return int(done.stderr.split()[-1])


def _capture(path: Path, megabytes: float) -> Path:
    record = (
        b"I [executorch:arm_executor_runner.cpp:287 main()] Model buffer loaded, has 1 methods\n"
    )
    with open(path, "wb") as handle:
        handle.write(record * int(megabytes * 1e6 / len(record)))
        handle.write(b"Output[0][0]: (float) 0.5\nProgram complete, exiting.\n")
    return path


def test_a_large_capture_is_read_in_bounded_memory(tmp_path):
    """8 MB of log records (94,000 lines): on main the whole file, its text, every line and
    every record stayed in memory (about 60 MB more than a small capture)."""
    small = _peak_rss_kib(_capture(tmp_path / "small.log", 0.01))
    large = _peak_rss_kib(_capture(tmp_path / "large.log", 8))
    assert large - small < 12 * 1024, (small, large)
