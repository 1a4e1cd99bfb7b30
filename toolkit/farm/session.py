"""A client session with a labgrid coordinator: places and their tags, a reservation per place,
acquire (the lock) and release.

labgrid's own client (labgrid.remote.client.ClientSession) talks gRPC to the coordinator; this
drives its stub directly: CreateReservation with a filter naming the place, PollReservation
until the coordinator allocates it, AcquirePlace, then ReleasePlace and CancelReservation. A
place is acquired only once its reservation names it, so two suites never hold the same place:
the coordinator gives a place to one reservation at a time and refuses a second acquire.
"""

from __future__ import annotations

import asyncio
import getpass
import os
from contextlib import contextmanager

from ..errors import UserError
from .lease import PlaceLease, Resource

FARM_EXTRA = "pip install 'ethos-u-toolkit[farm]'"


@contextmanager
def _client_name(name: str):
    """The name the coordinator knows this client by (`labgrid-client who`), and checks a
    reservation's owner against: one per suite, so suites cannot take each other's places."""
    before = os.environ.get("LG_USERNAME")
    os.environ["LG_USERNAME"] = name
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("LG_USERNAME", None)
        else:
            os.environ["LG_USERNAME"] = before


class FarmSession:
    def __init__(self, address: str):
        try:
            from labgrid.remote.client import Error, start_session
            from labgrid.remote.generated import labgrid_coordinator_pb2
        except ImportError:
            raise UserError(f"a labgrid board farm needs labgrid: {FARM_EXTRA}") from None
        self.pb = labgrid_coordinator_pb2
        self.address = address
        self.name = name = f"{getpass.getuser()}-etk-{os.getpid()}"
        try:
            with _client_name(name):
                self.session = start_session(address)
        except (Error, OSError, ValueError) as exc:
            raise UserError(
                f"cannot reach the labgrid coordinator at {address} ({exc}): start "
                "labgrid-coordinator there, or pass --coordinator HOST:PORT"
            ) from None
        self.owner = f"{self.session.gethostname()}/{name}"

    def _call(self, coroutine):
        return self.session.loop.run_until_complete(coroutine)

    def pump(self) -> None:
        """Let the session take in the coordinator's updates."""
        self._call(asyncio.sleep(0.01))

    def places(self) -> dict[str, dict[str, str]]:
        return {name: dict(place.tags) for name, place in self.session.places.items()}

    def reserve(self, place: str) -> str:
        request = self.pb.CreateReservationRequest(
            filters={"main": self.pb.Reservation.Filter(filter={"name": place})}, prio=0
        )
        return self._call(self.session.stub.CreateReservation(request)).reservation.token

    def allocated(self, token: str, place: str) -> bool:
        """Whether the coordinator gave the place to this reservation (polling refreshes it)."""
        from labgrid.remote.common import Reservation

        request = self.pb.PollReservationRequest(token=token)
        reservation = Reservation.from_pb2(
            self._call(self.session.stub.PollReservation(request)).reservation
        )
        return any(place in names for names in reservation.allocations.values())

    def acquire(self, place: str) -> PlaceLease | None:
        """Lock the place; its lease, or None when it cannot be had or a resource is not there."""
        from grpc.aio import AioRpcError

        try:
            request = self.pb.AcquirePlaceRequest(placename=place)
            self._call(self.session.stub.AcquirePlace(request))
        except AioRpcError:
            return None
        self._call(self.session.sync_with_coordinator())
        entry = self.session.places[place]
        with _client_name(self.name):  # labgrid checks that this user holds the place
            found = self.session.get_target_resources(entry)
        if not found or not all(resource.avail for resource in found.values()):
            return None
        resources = tuple(
            Resource(name, cls, dict(resource.args)) for (name, cls), resource in found.items()
        )
        return PlaceLease(place, dict(entry.tags), resources)

    def release(self, place: str | None, token: str) -> None:
        """Unlock the place (when this session holds it) and end its reservation."""
        from grpc.aio import AioRpcError
        from labgrid.remote.client import Error

        try:
            if place is not None:
                request = self.pb.ReleasePlaceRequest(placename=place)
                self._call(self.session.stub.ReleasePlace(request))
            self._call(
                self.session.stub.CancelReservation(self.pb.CancelReservationRequest(token=token))
            )
        except (AioRpcError, Error):
            pass  # the coordinator forgot it already (expired, or gone)

    def close(self) -> None:
        try:
            self._call(self.session.stop())
            self._call(self.session.close())
        finally:
            self.session.loop.close()
