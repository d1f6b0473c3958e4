"""Claims in flight: no claim outlives its request unless the caller got the answer.

A front door (``POST /selections``, the RPC ``select_destinations``)
records the request's instances in the API database (``claims_in_flight``)
before the scheduler claims anything, and removes the record when it hands
the answer over. While the request runs, its process renews the record
every quarter of the grace period. A record not renewed for the grace
period belongs to a scheduler that stopped mid-request (SIGKILL, OOM, a
lost host): every live scheduler process sweeps such records every half
grace period, deleting the instances' allocations in Placement, then the
record; a log line and ``billeting_scheduler_orphaned_claims_swept_total``
count them.

What "answered" means: the record is removed just *before* the answer is
handed to the server to write (HTTP) or to the bus to publish (RPC), not
after. A process killed between the two leaves claims whose caller may
have got nothing: they are kept (a leak, for an audit). The other order
would let a kill between the write and the removal release the claims of a
caller already holding its 201, which builds on a host Placement no longer
counts it on. When the HTTP server finds it cannot deliver the answer (the
client went away meanwhile), it says so and the claims are released at
once. A reply the bus fails to publish is not noticed.

An error answer removes the record too: the scheduler has rolled back the
claims of a request it refuses. A process that finds at the end that its
record was swept (it could not renew for a grace period) answers 503
instead of Selections whose claims are gone.
"""
from __future__ import annotations

import logging
import os
import socket
import threading
import uuid as uuidlib
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from sqlalchemy import Engine

from billeting.apidb import claims_in_flight as records
from billeting.placement_client import claims
from billeting.placement_client.client import PlacementClient, PlacementError
from billeting.scheduler import metrics
from billeting.scheduler.errors import CLAIMS_RELEASED, ConsumerConflict, SchedulerError

LOG = logging.getLogger(__name__)

DEFAULT_GRACE_S = 60.0


T = TypeVar("T")


class ClaimsReleased(SchedulerError):
    status = 503
    code = CLAIMS_RELEASED


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)  # naive UTC, as the API database's other timestamps


class NotRecorded:
    """No record (an all-in-one process, most tests): nothing to sweep."""

    def run(self, instances: Sequence[str], work: Callable[[], T]) -> T:
        return work()

    def release(self, instances: Sequence[str]) -> None:
        pass


class InFlight:
    """One per scheduler process; thread-safe. ``start()`` the renewing
    and sweeping thread (``stop()`` ends it)."""

    def __init__(self, engine: Engine, client: PlacementClient, *, grace_s: float = DEFAULT_GRACE_S,
                 owner: str | None = None) -> None:
        if grace_s <= 0:
            raise ValueError("grace_s must be positive")
        self.engine = engine
        self.client = client
        self.grace_s = grace_s
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}"
        self._active: set[str] = set()  # request ids this process renews
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    # --- a request -------------------------------------------------------------------

    def run(self, instances: Sequence[str], work: Callable[[], T]) -> T:
        """``work()`` (which claims for ``instances`` and builds the answer)
        under a record; the record is removed when it returns or raises."""
        request_id = self.begin(instances)
        try:
            answer = work()
        except BaseException:
            self._end(request_id)
            raise
        if not self._end(request_id):
            # Not renewed for a grace period (the database was out of reach,
            # the process starved): a sweeper took the record, perhaps
            # before the claims were made. None may stay.
            self._release(tuple(instances))
            raise ClaimsReleased("the claims of this request were released while it was decided (the scheduler "
                                 "could not renew its record of them); try again")
        return answer

    def begin(self, instances: Sequence[str]) -> str:
        request_id = str(uuidlib.uuid4())
        with self._lock:
            self._active.add(request_id)
        try:
            records.record(self.engine, request_id, instances, self.owner, _now())
        except records.Busy as busy:
            self._drop(request_id)
            raise ConsumerConflict(
                f"instance {busy.instance} is in another request being scheduled, or in one whose scheduler "
                f"stopped (its claims are released within {self.grace_s:g} s); a build must use a new "
                "consumer") from None
        except BaseException:
            self._drop(request_id)
            raise
        return request_id

    def _end(self, request_id: str) -> bool:
        """Remove the record; False when it was not there any more."""
        try:
            return records.forget(self.engine, [request_id]) > 0
        finally:
            self._drop(request_id)

    def _drop(self, request_id: str) -> None:
        with self._lock:
            self._active.discard(request_id)

    def release(self, instances: Sequence[str]) -> None:
        """The answer for ``instances`` was never delivered: release their
        claims (on a thread of its own: the caller may be an event loop)."""
        threading.Thread(target=self._release, args=(tuple(instances),), name="claims-release",
                         daemon=True).start()

    def _release(self, instances: tuple[str, ...]) -> None:
        # Safe without a record: while these claims exist, no other request
        # can claim the instances (a new-consumer claim conflicts).
        for instance in instances:
            try:
                claims.unclaim(self.client, instance)
            except PlacementError as exc:
                LOG.error("could not release the claim of %s, whose caller got no Selections: %s", instance, exc)
        LOG.warning("released the claims of %s: its caller got no Selections", ", ".join(instances))

    # --- the background thread -------------------------------------------------------

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="claims-in-flight", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _loop(self) -> None:
        renew_every = self.grace_s / 4
        sweeps = 0
        while not self._stopping.wait(renew_every):
            try:
                self.renew()
                sweeps += 1
                if sweeps % 2 == 0:  # every half grace period
                    self.sweep()
            except Exception as exc:  # noqa: BLE001 - the database or Placement may be back next time
                LOG.warning("claims in flight: %s", exc)

    def renew(self) -> None:
        with self._lock:
            active = list(self._active)
        records.renew(self.engine, active, _now())

    def sweep(self, now: datetime | None = None) -> int:
        """Release the claims of requests whose record was not renewed for
        the grace period; how many instances held some."""
        now = now or _now()
        before = now - timedelta(seconds=self.grace_s)
        released = 0
        for old in records.stale(self.engine, before):
            mine = str(uuidlib.uuid4())
            with self._lock:
                if old.request_id in self._active:
                    continue  # this process's own, still being decided: it renews it next
                self._active.add(mine)  # renewed while this process releases them
            try:
                instances = records.take_over(self.engine, old, mine, self.owner, before, now)
                if not instances:
                    continue  # another sweeper's
                held = [i for i in instances if claims.unclaim(self.client, i)]
                records.forget(self.engine, [mine])
            except PlacementError as exc:
                # Left as it is, not renewed: swept again after a grace period.
                LOG.warning("could not release the claims of %s left by %s: %s", ", ".join(old.instances),
                            old.owner, exc)
                continue
            finally:
                self._drop(mine)
            if held:
                metrics.observe_orphans_swept(len(held))
                released += len(held)
                LOG.warning("released the orphaned claims of %s: a request of %s (in flight since %s UTC) was "
                            "never answered, and its scheduler stopped", ", ".join(held), old.owner,
                            old.created_at.isoformat(sep=" ", timespec="seconds"))
        return released
