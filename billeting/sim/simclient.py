"""The real Placement client, seen through the virtual clock.

Every call takes half the configured latency to reach Placement and half to
come back, in virtual time, and yields to the other in-flight requests while
it "travels". The call itself runs against the real Placement, between the
two halves, so whatever other tasks did meanwhile is what Placement sees:
claims really race and really lose (409). The scheduler's own work between
its candidates query and its first claim is modelled as ``think_s`` after
the candidates answer arrives.

It also counts requests and refused claims for the run's metrics.
"""
from __future__ import annotations

from collections.abc import Mapping

from billeting.placement_client.model import AllocationWrite, CandidateQuery, Candidates, WriteOutcome, WriteResult
from billeting.sim.clock import Clock

CONFLICTS = (WriteResult.NO_CAPACITY, WriteResult.PROVIDER_CONFLICT)


class SimPlacement:
    def __init__(self, inner, clock: Clock, *, latency_s: float, think_s: float = 0.0) -> None:
        self.inner = inner
        self.clock = clock
        self.half = latency_s / 2
        self.think_s = think_s
        self.requests = 0
        self.conflicts = 0
        self.counting = True

    @property
    def version(self):
        return self.inner.version

    def _travel(self) -> None:
        if self.half > 0 and self.clock._loop is not None:
            self.clock.sleep(self.half)

    def _call(self, fn, *args, **kwargs):
        if self.counting:
            self.requests += 1
        self._travel()
        result = fn(*args, **kwargs)
        self._travel()
        return result

    def allocation_candidates(self, query: CandidateQuery) -> Candidates:
        found = self._call(self.inner.allocation_candidates, query)
        if self.think_s > 0 and self.clock._loop is not None:
            self.clock.sleep(self.think_s)
        return found

    def _count(self, outcome: WriteOutcome) -> WriteOutcome:
        if self.counting and outcome.result in CONFLICTS:
            self.conflicts += 1
        return outcome

    def put_allocations(self, consumer_uuid: str, write: AllocationWrite, *, version: str | None = None) -> WriteOutcome:
        return self._count(self._call(self.inner.put_allocations, consumer_uuid, write, version=version))

    def post_allocations(self, writes: Mapping[str, AllocationWrite]) -> WriteOutcome:
        return self._count(self._call(self.inner.post_allocations, writes))

    def delete_allocations(self, consumer_uuid: str) -> bool:
        return self._call(self.inner.delete_allocations, consumer_uuid)

    def __getattr__(self, name: str):
        attr = getattr(self.inner, name)
        if not callable(attr):
            return attr

        def call(*args, **kwargs):
            return self._call(attr, *args, **kwargs)
        return call
