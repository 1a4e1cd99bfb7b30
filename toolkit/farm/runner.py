"""Runner "farm": the serial-board runner on the labgrid place this worker holds.

The same BundleIO program, capture and checks as `--runner serial` (runners/serial.py), with
the port and the flashing taken from the place: its console through labgrid's SerialDriver
(rfc2217 or raw TCP to the exporter), its flashing through EtkFlashDriver when the place has an
EtkFlasher, else the target file's [board] commands with {port} the place's serial URL.
"""

from __future__ import annotations

import time
from pathlib import Path

from ..errors import UserError
from ..runners.base import Availability
from ..runners.serial import SerialRunner
from ..runners.serial_port import READ_TIMEOUT_S
from ..targets import BoardSpec, Target
from .labgrid_parts import PlaceTarget
from .lease import PlaceLease, current_lease


def serial_url(lease: PlaceLease) -> str:
    port = lease.resource("NetworkSerialPort")
    if port is None:
        raise UserError(
            f"labgrid place {lease.place} has no NetworkSerialPort: export the board's console "
            "(RawSerialPort or USBSerialPort through ser2net, or a NetworkSerialPort)"
        )
    scheme = "socket" if port.params.get("protocol") == "raw" else "rfc2217"
    return f"{scheme}://{port.params['host']}:{port.params['port']}"


class FarmRunner(SerialRunner):
    name = "farm"

    def __init__(self, lease: PlaceLease, **options):
        super().__init__(port=serial_url(lease), **options)
        self.lease = lease
        self._place: PlaceTarget | None = None

    @property
    def place(self) -> PlaceTarget:
        if self._place is None:
            self._place = PlaceTarget(self.lease)
        return self._place

    def availability(self, target: Target, program_npu: str) -> Availability:
        if target.board_spec is None:
            return Availability(
                False, f"target '{target.name}' has no [board] table: a farm runs board targets"
            )
        return Availability(True, f"labgrid place {self.lease.place} ({self.port})")

    def _open_link(self, port: str, baud: int):
        return self.place.console(READ_TIMEOUT_S)

    def _reopen_link(self, port: str, baud: int, time_limit_s: float):
        deadline = time.monotonic() + time_limit_s
        while True:
            try:
                return self.place.console(READ_TIMEOUT_S)
            except OSError:  # pyserial's SerialException is one: the port is not back yet
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def _start(self, board: BoardSpec, attempt: int, values: dict, run_dir: Path) -> None:
        flasher = self.place.flasher
        if flasher is None:
            super()._start(board, attempt, values, run_dir)
            return
        values = {**values, "place": self.lease.place}
        flasher.run("flash", values, board.flash_time_limit_s, run_dir / f"flash-{attempt}.log")
        flasher.run("reset", values, board.flash_time_limit_s, run_dir / f"reset-{attempt}.log")


def farm_runner(runner_elf: Path | None = None) -> FarmRunner:
    """The runner for the place this worker holds (ETK_FARM_PLACE)."""
    return FarmRunner(current_lease(), runner_elf=runner_elf)
