"""The two variants compiled at once (lower/parallel.py): same programs, errors carried back."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from toolkit.errors import UserError
from toolkit.forked import can_fork_a_worker
from toolkit.lower import parallel
from toolkit.lower.build_variant import compile_variant
from toolkit.models.loader import load_model
from toolkit.quantize.calibration import random_calibration
from toolkit.rewrites import DEFAULT_REWRITES
from toolkit.targets import load_target

pytestmark = pytest.mark.skipif(not can_fork_a_worker(), reason="needs fork, 2 CPUs")


def test_child_error_is_raised_in_the_parent(monkeypatch):
    def fake_compile(model, calibration, variant, *rest):
        if variant == "unfused":
            raise UserError(f"cannot compile {variant}")
        return variant

    monkeypatch.setattr(parallel, "compile_variant", fake_compile)
    with pytest.raises(UserError, match="^cannot compile unfused$"):
        parallel.compile_variants(None, None, ("fused", "unfused"), None, None, (), (), True)


def test_parallel_programs_equal_serial_ones(tmp_path, no_shared_compile_cache):
    model = load_model("zoo:conv2d_bn_relu")
    calibration = random_calibration(model.example_inputs, 4, 0)
    npu = load_target("corstone-300").npu(None, None, None)
    programs = parallel.compile_variants(
        model,
        calibration,
        ("fused", "unfused"),
        npu,
        tmp_path / "parallel",
        (),
        DEFAULT_REWRITES,
        True,
    )
    assert (tmp_path / "parallel" / "unfused" / "program.json").is_file()
    serial = compile_variant(
        model, calibration, "unfused", npu, tmp_path / "serial", (), DEFAULT_REWRITES
    )
    child = programs["unfused"]
    assert [d.payload for d in child.delegates] == [d.payload for d in serial.delegates]
    assert child.npu_ops == serial.npu_ops and child.output_quant == serial.output_quant
    assert programs["fused"].variant == "fused" and programs["fused"].delegates
    # the child's stage times come back with it (the parent loads its program from the store)
    assert set(child.timings) == {"quantize", "lower", "reports"} == set(programs["fused"].timings)
    assert all(seconds > 0 for seconds in child.timings.values())


_PARENT = """
import os, sys, time
from pathlib import Path
from toolkit.lower import parallel

def sleeping_compile(model, calibration, variant, *rest):
    if variant == "unfused":  # the child
        Path(sys.argv[1]).write_text(str(os.getpid()))
    time.sleep(120)

parallel.compile_variant = sleeping_compile
parallel.compile_variants(None, None, ("fused", "unfused"), None, None, (), (), True)
"""


def _running(pid: int) -> bool:
    """pid exists and is not a zombie (an orphan's zombie waits for a reaper that may not come)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="reads /proc")
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signal_to_the_parent_ends_the_child_compile(tmp_path, signum):
    pid_file = tmp_path / "child.pid"
    # a suite started as a background job has SIGINT ignored, and a child inherits that: give
    # the parent Python's own Ctrl-C handling, as in a terminal
    parent = subprocess.Popen(
        [sys.executable, "-c", _PARENT, str(pid_file)],
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + 180  # importing torch and ExecuTorch on a loaded machine
        while not pid_file.is_file() or not pid_file.read_text():
            assert parent.poll() is None and time.monotonic() < deadline, "no child started"
            time.sleep(0.1)
        child = int(pid_file.read_text())
        assert _running(child)
        parent.send_signal(signum)
        parent.wait(timeout=10)
        deadline = time.monotonic() + 5
        while _running(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _running(child), (
            f"child compile {child} still runs after the parent's {signum!r}"
        )
    finally:
        parent.kill()
        parent.wait()
        if pid_file.is_file() and _running(child := int(pid_file.read_text())):
            os.kill(child, signal.SIGKILL)
