"""A place this process holds: what a farm worker needs to flash and listen to its board.

The parent (pool.py) reserves and acquires the place on the labgrid coordinator and hands the
worker a PlaceLease (as JSON in ETK_FARM_PLACE); the worker builds a labgrid Target from its
resources (labgrid_parts.py).
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import asdict, dataclass

from ..errors import UserError

LEASE_ENV = "ETK_FARM_PLACE"
PROBE_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class Resource:
    name: str
    cls: str  # labgrid resource class: NetworkSerialPort, EtkFlasher, ...
    params: dict


@dataclass(frozen=True)
class PlaceLease:
    place: str
    tags: dict[str, str]
    resources: tuple[Resource, ...]

    def resource(self, cls: str) -> Resource | None:
        return next((r for r in self.resources if r.cls == cls), None)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> PlaceLease:
        data = json.loads(text)
        resources = tuple(Resource(**r) for r in data["resources"])
        return cls(data["place"], data["tags"], resources)


def current_lease() -> PlaceLease:
    text = os.environ.get(LEASE_ENV)
    if not text:
        raise UserError(
            "runner 'farm' runs on a labgrid place that `etk bench` reserved: put it in a suite "
            "and pass --coordinator HOST:PORT (or set LG_COORDINATOR)"
        )
    return PlaceLease.from_json(text)


def reachable(lease: PlaceLease) -> bool:
    """Whether the place's serial port still answers: a place whose exporter or board went away
    does not, and its run goes to another place."""
    port = lease.resource("NetworkSerialPort")
    if port is None:
        return False
    try:
        with socket.create_connection(
            (port.params["host"], int(port.params["port"])), timeout=PROBE_TIMEOUT_S
        ):
            return True
    except OSError:
        return False
