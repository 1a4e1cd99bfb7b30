"""Places on a real labgrid coordinator: chosen by tags, reserved and locked, released; bad
input named in one line; a run's samples on a place through labgrid's drivers."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from toolkit.bench.suite import RunSpec, Settings, VelaOptions
from toolkit.cli import main
from toolkit.errors import UserError
from toolkit.farm.pool import choose_places
from toolkit.farm.runner import FarmRunner
from toolkit.farm.session import FarmSession
from toolkit.runners.bundle_io import read_bundle
from toolkit.targets import load_target

from .helpers import BOARD, NPU, write_board_target, write_farm_suite


def _spec(target, npu=NPU) -> RunSpec:
    return RunSpec("zoo:conv2d_relu", str(target), npu, "fused", VelaOptions(), "farm", Settings())


def _until(check, seconds: float = 20.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.2)
    return False


def _client(farm, *args: str, user: str = "other-suite") -> subprocess.CompletedProcess:
    """labgrid's own command-line client, as another suite's user."""
    env = {**os.environ, "LG_USERNAME": user}
    argv = [str(Path(sys.executable).parent / "labgrid-client"), "-x", farm.address, *args]
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60)


def test_a_place_is_reserved_locked_and_released_one_suite_at_a_time(tmp_path, make_farm):
    farm = make_farm(2)
    target = write_board_target(tmp_path)
    session = FarmSession(farm.address)
    try:
        assert choose_places(session, [_spec(target)], ()) == {
            "board-0": {"board": BOARD, "npu": NPU},
            "board-1": {"board": BOARD, "npu": NPU},
        }
        token = session.reserve("board-0")
        assert _until(lambda: session.allocated(token, "board-0"))
        lease = session.acquire("board-0")
        assert lease is not None and lease.tags == {"board": BOARD, "npu": NPU}
        serial_port = lease.resource("NetworkSerialPort")
        assert serial_port.params["host"] == "127.0.0.1" and serial_port.params["port"] > 0
        assert "board_flash.py flash " in lease.resource("EtkFlasher").params["flash"]

        # another suite cannot take it, and its reservation waits
        taken = _client(farm, "-p", "board-0", "acquire")
        assert taken.returncode != 0
        assert f"already acquired by {session.owner}" in taken.stdout + taken.stderr
        reserved = _client(farm, "reserve", "name=board-0")
        other = re.search(r"Reservation '(\w+)'", reserved.stdout)[1]
        assert "state: waiting" in reserved.stdout

        session.release("board-0", token)  # then it is the other suite's
        assert _client(farm, "wait", other).returncode == 0
        assert _client(farm, "-p", "board-0", "acquire").returncode == 0
        session.pump()
        assert session.acquire("board-0") is None
        assert _client(farm, "-p", "board-0", "release").returncode == 0
        assert _client(farm, "cancel-reservation", other).returncode == 0
    finally:
        session.close()


def test_bad_farm_input_is_one_line_naming_the_fix(tmp_path, make_farm, capsys):
    farm = make_farm(1)
    target = write_board_target(tmp_path)
    session = FarmSession(farm.address)
    try:
        with pytest.raises(UserError) as info:
            choose_places(session, [_spec(target)], ("board-9",))
        assert str(info.value).startswith(
            f"labgrid place 'board-9' does not exist on {farm.address} (places: board-0 "
            f"[board={BOARD} npu={NPU}]): create it with labgrid-client -p board-9 create"
        )
        other = _spec(target, npu="ethos-u55-256")
        with pytest.raises(UserError) as info:
            choose_places(session, [other], ())
        assert str(info.value).startswith(
            f"no labgrid place on {farm.address} has the tags board={BOARD} npu=ethos-u55-256"
        )
        assert str(info.value).endswith(f"set-tags board={BOARD} npu=ethos-u55-256")
    finally:
        session.close()

    suite = write_farm_suite(tmp_path / "suite.toml", target, ["zoo:conv2d_relu"])
    assert main(["bench", str(suite), "--out", str(tmp_path / "a")]) == 2
    assert "pass --coordinator HOST:PORT of the labgrid coordinator" in capsys.readouterr().err
    from labgrid_farm import free_port

    nobody = f"127.0.0.1:{free_port()}"
    code = main(["bench", str(suite), "--out", str(tmp_path / "b"), "--coordinator", nobody])
    err = capsys.readouterr().err
    assert code == 2 and f"cannot reach the labgrid coordinator at {nobody}" in err
    assert "Traceback" not in err


def test_a_runs_samples_go_to_the_place_through_its_drivers(tmp_path, make_farm, compiled):
    farm = make_farm(1)
    target = load_target(str(write_board_target(tmp_path)))
    variant = compiled("zoo:conv2d_relu").variants["fused"]
    session = FarmSession(farm.address)
    try:
        token = session.reserve("board-0")
        assert _until(lambda: session.allocated(token, "board-0"))
        lease = session.acquire("board-0")
        runner = FarmRunner(lease, run_root=tmp_path / "run")
        batch = runner.run_samples(variant.program, list(variant.reference.inputs), target)
        session.release("board-0", token)
    finally:
        session.close()
    assert (batch.starts, batch.mode, batch.failures) == (1, "bundle", ())
    for k, run in enumerate(batch.runs):
        assert run.runner == "farm"
        assert run.outputs[0].tobytes() == variant.reference.outputs[k][0].tobytes()
        assert run.details["test_set"] == k
    # flashed through the place's EtkFlasher: the board holds the bundle, byte for byte
    flashed = (farm.root / "board-0" / "flash" / "image.bpte").read_bytes()
    assert flashed == (tmp_path / "run" / "serial-fused" / "program-1.bpte").read_bytes()
    assert read_bundle(tmp_path / "run" / "serial-fused" / "program-1.bpte").program == (
        variant.program.pte_path.read_bytes()
    )
