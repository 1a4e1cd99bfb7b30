"""A labgrid board farm on 127.0.0.1 for tests and scripts/bench_farm.py. TESTS ONLY.

The real labgrid coordinator and one real labgrid exporter per place; behind each exporter a
stand-in board process (farm_board.py: board emulator + RFC 2217 server). Each place exports a
NetworkSerialPort (the board's RFC 2217 port) and an EtkFlasher whose commands run
board_flash.py against that board. Places are tagged board=TARGET npu=NPU. Every process is in
its own process group and is ended on exit; `remove(i)` takes place i away (its board and its
exporter end) as an unplugged board would.
"""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent
READY_S = 60.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(argv: list[str], cwd: Path, log: Path, stdin=subprocess.DEVNULL) -> subprocess.Popen:
    with open(log, "wb") as out:
        return subprocess.Popen(
            argv, cwd=cwd, stdin=stdin, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def _end(proc: subprocess.Popen | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


class StandInFarm:
    def __init__(
        self,
        root: Path,
        places: int,
        tags: dict[str, str],
        test_sets: str = "all",
        boot_s: float = 0.0,
        inference_s: float = 0.0,
    ):
        self.root = root
        self.names = [f"board-{i}" for i in range(places)]
        self.tags = tags
        self.board_args = [
            "--test-sets", test_sets, "--boot-s", str(boot_s), "--inference-s", str(inference_s)
        ]  # fmt: skip
        self.address = f"127.0.0.1:{free_port()}"
        self.coordinator: subprocess.Popen | None = None
        self.boards: list[subprocess.Popen | None] = []
        self.exporters: list[subprocess.Popen | None] = []

    def __enter__(self) -> StandInFarm:
        try:
            self._start_all()
        except BaseException:
            self.__exit__()
            raise
        return self

    def _start_all(self) -> None:
        coord = self.root / "coordinator"
        coord.mkdir(parents=True)
        (coord / "places.yaml").write_text(self._places_yaml())
        self.coordinator = _start(
            [str(BIN / "labgrid-coordinator"), "-l", self.address], coord, coord / "log.txt"
        )
        ports = [self._start_board(i) for i in range(len(self.names))]
        for i, port in enumerate(ports):
            self.exporters.append(self._start_exporter(i, port))
        self._wait_ready()

    def _places_yaml(self) -> str:
        tags = ", ".join(f"{k}: {v}" for k, v in self.tags.items())
        return "".join(
            f"{name}:\n  tags: {{{tags}}}\n  matches:\n  - {{exporter: '*', group: {name}, "
            f"cls: '*'}}\n"
            for name in self.names
        )

    def _start_board(self, i: int) -> int:
        root = self.root / self.names[i]
        root.mkdir(parents=True)
        argv = [sys.executable, str(HERE / "farm_board.py"), str(root), *self.board_args]
        with open(root / "board.log", "wb") as log:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                start_new_session=True,
            )
        self.boards.append(proc)
        assert proc.stdout is not None
        line = proc.stdout.readline().decode()
        if not line.startswith("PORT "):
            raise RuntimeError(
                f"stand-in board {i} did not start: {(root / 'board.log').read_text()}"
            )
        return int(line.split()[1])

    def _start_exporter(self, i: int, port: int) -> subprocess.Popen:
        root = self.root / self.names[i]
        flash_dir = root / "flash"
        tool = shlex.join([sys.executable, str(HERE / "board_flash.py")])
        config = root / "exporter.yaml"
        config.write_text(
            f"{self.names[i]}:\n"
            f"  NetworkSerialPort: {{host: 127.0.0.1, port: {port}, speed: 115200}}\n"
            f"  EtkFlasher:\n"
            f"    host: 127.0.0.1\n"
            f"    flash: {_yaml_str(f'{tool} flash {flash_dir} {{bpte}} {flash_dir}')}\n"
            f"    reset: {_yaml_str(f'{tool} reset {flash_dir}')}\n"
        )
        argv = [str(BIN / "labgrid-exporter"), "-c", self.address, "-n", f"exporter-{i}"]
        return _start([*argv, "--hostname", "127.0.0.1", str(config)], root, root / "exporter.log")

    def _wait_ready(self) -> None:
        """Until the coordinator has every exporter's resources."""
        from labgrid.remote.client import start_session

        deadline = time.monotonic() + READY_S
        while True:
            try:
                session = start_session(self.address)
                try:
                    if len(session.resources) == len(self.names):
                        return
                finally:
                    session.loop.run_until_complete(session.stop())
                    session.loop.run_until_complete(session.close())
                    session.loop.close()
            except Exception:  # noqa: BLE001 - the coordinator is still starting
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the stand-in farm was not ready within {READY_S:g} s")
            time.sleep(0.3)

    def remove(self, i: int) -> None:
        """Place i goes away: its board and its exporter end."""
        board, self.boards[i] = self.boards[i], None
        exporter, self.exporters[i] = self.exporters[i], None
        _end(board)
        _end(exporter)

    def __exit__(self, *exc) -> None:
        for proc in [*self.exporters, *self.boards]:
            _end(proc)
        _end(self.coordinator)


def _yaml_str(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
