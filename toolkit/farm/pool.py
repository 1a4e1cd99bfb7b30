"""`etk bench` on a labgrid farm: one worker per matching place, runs retried elsewhere when a
place goes away.

Each place whose tags match a run's (board = the target's name, npu = the run's NPU) gets a
reservation naming it; as the coordinator allocates one, it is acquired and a worker process
started for it. A worker takes the next queued run its place matches. A run that fails while its
place stops answering goes back to the queue, for another place (at most ATTEMPTS times); the
place is released and not used again. Every place is released and every reservation cancelled
at the end, also on Ctrl-C or an error.
"""

from __future__ import annotations

import functools
import multiprocessing
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait

from ..bench.record import BenchRecord
from ..bench.results import lost_run_record
from ..bench.suite import RunSpec
from ..bench.worker_server import start_worker_server, worker_context
from ..errors import UserError
from .lease import PlaceLease
from .session import FarmSession

OnRecord = Callable[[BenchRecord], None]
ATTEMPTS = 3  # places a run is tried on when places go away under it
WAIT_S = 600.0  # how long a suite waits for a first place when others hold them all


@dataclass(frozen=True)
class FarmOptions:
    coordinator: str  # HOST:PORT of the labgrid coordinator
    places: tuple[str, ...] = ()  # only these places (default: every place whose tags match)
    wait_s: float = WAIT_S


@functools.cache
def run_tags(spec: RunSpec) -> dict[str, str]:
    """The tags a place needs to run this spec."""
    from ..targets import load_target

    return {"board": load_target(spec.target).name, "npu": spec.npu}


def _matches(place_tags: dict[str, str], wanted: dict[str, str]) -> bool:
    return all(place_tags.get(k) == v for k, v in wanted.items())


@dataclass
class _Worker:
    process: multiprocessing.process.BaseProcess
    conn: Connection
    spec: RunSpec | None = None  # the run it has


@dataclass
class _Place:
    name: str
    tags: dict[str, str]
    token: str
    lease: PlaceLease | None = None
    worker: _Worker | None = None
    lost: bool = False
    runs: list[str] = field(default_factory=list)

    @property
    def busy(self) -> bool:
        return self.worker is not None and self.worker.spec is not None


def choose_places(
    session: FarmSession, specs: Sequence[RunSpec], names: Sequence[str]
) -> dict[str, dict[str, str]]:
    """The places to reserve: every place matching some run (of `names` when given)."""
    places = session.places()
    listing = _listing(places)
    for name in names:
        if name not in places:
            raise UserError(
                f"labgrid place '{name}' does not exist on {session.address} (places: "
                f"{listing or 'none'}): create it with labgrid-client -p {name} create"
            )
    pool = {n: t for n, t in places.items() if not names or n in names}
    _check_every_run_has_a_place(session, specs, pool, listing)
    return {n: t for n, t in pool.items() if any(_matches(t, run_tags(s)) for s in specs)}


def _listing(places: dict[str, dict[str, str]]) -> str:
    return ", ".join(
        f"{n} [{' '.join(f'{k}={v}' for k, v in sorted(t.items()))}]"
        for n, t in sorted(places.items())
    )


def _check_every_run_has_a_place(
    session: FarmSession,
    specs: Sequence[RunSpec],
    pool: dict[str, dict[str, str]],
    listing: str,
) -> None:
    for wanted in {tuple(sorted(run_tags(s).items())) for s in specs}:
        if not any(_matches(tags, dict(wanted)) for tags in pool.values()):
            text = " ".join(f"{k}={v}" for k, v in wanted)
            raise UserError(
                f"no labgrid place on {session.address} has the tags {text} (places: "
                f"{listing or 'none'}): tag one with labgrid-client -p PLACE set-tags {text}"
            )


class FarmPool:
    def __init__(self, session: FarmSession, out_root: str, on_record: OnRecord):
        self.session = session
        self.out_root = out_root
        self.on_record = on_record
        self.ctx = worker_context()
        self.places: list[_Place] = []
        self.queue: list[RunSpec] = []
        self.attempts: dict[RunSpec, int] = {}

    def run(self, specs: Sequence[RunSpec], places: dict[str, dict[str, str]], wait_s: float):
        start_worker_server()  # running already when etk bench started it
        self.queue = list(specs)
        for name, tags in places.items():
            self.places.append(_Place(name, tags, self.session.reserve(name)))
        started = time.monotonic()
        while self.queue or any(p.busy for p in self.places):
            self.session.pump()
            self._take_places()
            self._hand_out()
            if self._stuck(started, wait_s):
                return
            self._collect()

    def _take_places(self) -> None:
        for place in self.places:
            if place.lease is not None or place.lost:
                continue
            if not self.session.allocated(place.token, place.name):
                continue
            place.lease = self.session.acquire(place.name)
            if place.lease is None:  # a resource of it is not there: not usable
                self._drop(place)
                continue
            from .worker import farm_worker_main

            parent, child = self.ctx.Pipe()
            process = self.ctx.Process(
                target=farm_worker_main,
                args=(child, self.out_root, place.lease.to_json()),
                daemon=True,
            )
            process.start()
            child.close()
            place.worker = _Worker(process, parent)

    def _hand_out(self) -> None:
        for place in self.places:
            worker = place.worker
            if worker is None or place.lost or worker.spec is not None:
                continue
            spec = next((s for s in self.queue if _matches(place.tags, run_tags(s))), None)
            if spec is None:
                continue
            self.queue.remove(spec)
            self.attempts[spec] = self.attempts.get(spec, 0) + 1
            worker.spec = spec
            place.runs.append(spec.label)
            worker.conn.send(spec)

    def _stuck(self, started: float, wait_s: float) -> bool:
        """Runs left that no place will take: recorded as failed, with the reason."""
        usable = [p for p in self.places if not p.lost]
        busy = any(p.busy for p in self.places)
        waiting = not any(p.lease for p in usable) and time.monotonic() - started > wait_s
        unserved = [s for s in self.queue if not any(_matches(p.tags, run_tags(s)) for p in usable)]
        if not usable or waiting:
            unserved = list(self.queue)
        for spec in unserved:
            why = "went away" if not usable else f"became free within {wait_s:g} s"
            self.queue.remove(spec)
            self.on_record(lost_run_record(spec, f"no labgrid place for this run {why}"))
        return not self.queue and not busy

    def _collect(self) -> None:
        busy = [(p, p.worker) for p in self.places if p.worker is not None and p.busy]
        if not busy:
            time.sleep(0.2)
            return
        wait([w.conn for _, w in busy] + [w.process.sentinel for _, w in busy], timeout=0.5)
        for place, worker in busy:
            spec = worker.spec
            assert spec is not None
            if worker.conn.poll():
                record, lost = worker.conn.recv()
            elif not worker.process.is_alive():
                record, lost = lost_run_record(spec, "the farm worker process died"), True
            else:
                continue
            worker.spec = None
            if lost:
                self._drop(place)
            if lost and self.attempts[spec] < ATTEMPTS:
                self.queue.insert(0, spec)  # to another place
            else:
                self.on_record(record)

    def _drop(self, place: _Place) -> None:
        """A place that went away: its worker stopped, the place released."""
        place.lost = True
        self._stop(place)
        self.session.release(place.name if place.lease else None, place.token)

    def _stop(self, place: _Place) -> None:
        worker, place.worker = place.worker, None
        if worker is None:
            return
        if worker.process.is_alive() and worker.spec is None:
            try:
                worker.conn.send(None)
            except OSError:
                pass
        worker.process.join(timeout=2 if worker.spec is None else 0)
        if worker.process.is_alive():
            worker.process.kill()
            worker.process.join()
        worker.conn.close()

    def close(self) -> None:
        for place in self.places:
            if not place.lost:
                self._stop(place)
                self.session.release(place.name if place.lease else None, place.token)


def run_farm(
    specs: Sequence[RunSpec], out_root: str, farm: FarmOptions, on_record: OnRecord
) -> dict[str, list[str]]:
    """Run specs on the farm; which runs each place ran."""
    session = FarmSession(farm.coordinator)
    pool = FarmPool(session, out_root, on_record)
    try:
        pool.run(specs, choose_places(session, specs, farm.places), farm.wait_s)
    finally:
        try:
            pool.close()
        finally:
            session.close()
    return {p.name: p.runs for p in pool.places}
