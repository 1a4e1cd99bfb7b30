"""The labgrid side of a place: its console through labgrid's SerialDriver on the place's
NetworkSerialPort, and its flashing through EtkFlashDriver on the place's EtkFlasher.

EtkFlasher is a resource an exporter exports as it is (labgrid passes unknown classes through):
the command that flashes this board and, optionally, the one that resets it, as templates with
the [board] placeholders ({bpte}, {pte}, {elf}, {port}) of the target file. It belongs to the
place because it names one physical board (a probe's serial number, a mass-storage path):

    board-0:
      NetworkSerialPort: {host: farm1, port: 5001, speed: 115200}
      EtkFlasher:
        host: farm1
        flash: "pyocd flash --uid 0240000034 {elf}"
        reset: "pyocd reset --uid 0240000034"

The flash command runs on this machine, which must then be the exporter's host (the usual
single-host farm: boards on the CI machine's USB). A place without an EtkFlasher is flashed by
the target file's own [board] commands.
"""

from __future__ import annotations

import socket
from pathlib import Path

import attr

from ..errors import UserError
from ..runners.board_commands import run_steps
from .lease import PlaceLease

_LOCAL = {"localhost", "127.0.0.1", "::1"}


def _register():
    """EtkFlasher and EtkFlashDriver in labgrid's factory (once per process)."""
    from labgrid.driver.common import Driver
    from labgrid.factory import target_factory
    from labgrid.resource.common import NetworkResource

    if "EtkFlasher" in target_factory.resources:
        return target_factory.drivers["EtkFlashDriver"]

    @target_factory.reg_resource
    @attr.s(eq=False)
    class EtkFlasher(NetworkResource):
        flash = attr.ib(validator=attr.validators.instance_of(str))
        reset = attr.ib(default="", validator=attr.validators.instance_of(str))

    @target_factory.reg_driver
    @attr.s(eq=False)
    class EtkFlashDriver(Driver):
        bindings = {"flasher": "EtkFlasher"}

        @Driver.check_active
        def run(self, what: str, values: dict, time_limit_s: float, log: Path) -> None:
            template = self.flasher.flash if what == "flash" else self.flasher.reset
            if not template:
                return
            host = self.flasher.host
            if host not in _LOCAL | {socket.gethostname(), socket.getfqdn()}:
                raise UserError(
                    f"place {self.target.name}: its EtkFlasher is on {host}, and etk runs flash "
                    "commands on this machine: run etk bench on the exporter's host"
                )
            run_steps(what, (template,), values, time_limit_s, log, log.parent)

    return EtkFlashDriver


class PlaceTarget:
    """A labgrid Target made of a leased place's resources, with its drivers."""

    def __init__(self, lease: PlaceLease):
        from labgrid import Target
        from labgrid.factory import target_factory

        driver_cls = _register()
        self.target = Target(lease.place)
        for resource in lease.resources:
            params = {k: v for k, v in resource.params.items() if k != "extra"}
            target_factory.make_resource(self.target, resource.cls, resource.name, params)
        self.flasher = None
        if lease.resource("EtkFlasher") is not None:
            self.flasher = driver_cls(self.target, "flasher")
            self.target.activate(self.flasher)
        self._console = None

    def console(self, read_timeout_s: float):
        """The place's serial port opened (again) by labgrid's SerialDriver: its pyserial
        object, which the serial runner reads."""
        from labgrid.driver import SerialDriver

        driver = self._console
        if driver is None:
            driver = self._console = SerialDriver(self.target, "console")
        else:
            self.target.deactivate(driver)
        self.target.activate(driver)
        driver.serial.timeout = read_timeout_s
        return driver.serial
