"""Requests that would ask Placement the same question, decided together.

A scheduler process serving many callers (HTTP threads, RPC threads) sees
the same shape of request again and again: one flavor, no server group,
one instance. Each would send Placement the same ``GET
/allocation_candidates`` and rank the same thousand hosts. While one such
request is being decided, the next ones with the same query wait; when it
is done, every request that waited is decided as one batch (one candidates
query, each request ranked in turn on the batch's in-memory view, one
``POST /allocations`` for all the claims). A request that finds nothing
in progress for its query is decided at once, so a lone request is never
delayed: batches only form when requests are already queueing.

Under steady load a batch's callers come back together (each sends its
next request as soon as it has its answer), and the first of them back
would find nothing in progress and go alone, the rest queueing behind it:
batches of one and of n − 1 in turn, the first paying a whole Placement
query for one request. So a leader whose key had a batch of several end a
moment ago gathers before it decides: it waits for as many callers as that
batch released (a quarter of that batch's time at most, never more than
``GATHER_MAX_S``) — the group commit of databases. A request with no batch
just ended for its query is still decided at once.

The batch's decisions are made by the caller's ``decide`` function; this
module only forms the batches and hands each waiter its own outcome (a
value or an exception). Leadership passes from batch to batch: the thread
that finishes a batch returns its own answer and wakes the first waiter,
which decides the next batch, so no caller works for others forever.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

Item = TypeVar("Item")

# Requests decided in one batch at most; more wait for the next batch.
MAX_BATCH = 32
# How long a leader may wait for a batch's callers to come back: this share
# of that batch's time, and never longer than GATHER_MAX_S.
GATHER_SHARE = 0.25
GATHER_MAX_S = 0.010


@dataclass(slots=True, eq=False)
class _Ticket(Generic[Item]):
    item: Item
    woken: threading.Event = field(default_factory=threading.Event)
    # Set when this ticket's thread is to lead the next batch.
    leads: bool = False
    outcome: Any = None
    failed: bool = False


@dataclass(slots=True)
class _Expected:
    """Callers a key's last batch released, expected back by ``until``."""

    callers: int
    until: float


class Coalescer(Generic[Item]):
    """``run(key, item)`` returns ``decide([item, ...])``'s entry for ``item``
    (or raises it, when it is an exception)."""

    def __init__(self, decide: Callable[[Sequence[Item]], Sequence[object]], *,
                 max_batch: int = MAX_BATCH, gather_share: float = GATHER_SHARE,
                 gather_max_s: float = GATHER_MAX_S) -> None:
        if max_batch < 1:
            raise ValueError("max_batch must be at least 1")
        self._decide = decide
        self._max_batch = max_batch
        self._gather_share, self._gather_max_s = gather_share, gather_max_s
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        # Key → tickets waiting for the next batch; a key is present while
        # a batch of it is being gathered or decided (with an empty list
        # when none wait).
        self._waiting: dict[Hashable, list[_Ticket[Item]]] = {}
        self._expected: dict[Hashable, _Expected] = {}

    def run(self, key: Hashable, item: Item) -> object:
        ticket = _Ticket(item)
        with self._lock:
            queue = self._waiting.get(key)
            if queue is None:
                self._waiting[key] = []
                ticket.leads = True
            else:
                queue.append(ticket)
                self._arrived.notify_all()
        if not ticket.leads:
            ticket.woken.wait()
        if ticket.leads:
            self._lead(key, self._gather(key, ticket))
        if ticket.failed:
            raise ticket.outcome
        return ticket.outcome

    def _gather(self, key: Hashable, leader: _Ticket[Item]) -> list[_Ticket[Item]]:
        """The leader and the tickets queued behind it, once as many have
        come as the key's last batch released (or that wait is over)."""
        with self._lock:
            queue = self._waiting[key]
            expected = self._expected.pop(key, None)
            if expected is not None:
                wanted = min(self._max_batch, expected.callers) - 1
                remaining = expected.until - time.monotonic()
                if remaining > 0 and len(queue) < wanted:
                    self._arrived.wait_for(lambda: len(queue) >= wanted, remaining)
            batch = [leader] + queue[:self._max_batch - 1]
            del queue[:self._max_batch - 1]
        return batch

    def _lead(self, key: Hashable, batch: list[_Ticket[Item]]) -> None:
        started = time.monotonic()
        try:
            outcomes = self._decide([t.item for t in batch])
            if len(outcomes) != len(batch):
                raise RuntimeError(f"a batch of {len(batch)} got {len(outcomes)} outcomes")
            for t, outcome in zip(batch, outcomes):
                t.outcome, t.failed = outcome, isinstance(outcome, BaseException)
        except BaseException as exc:  # noqa: BLE001 - every waiter must hear of it
            for t in batch:
                t.outcome, t.failed = exc, True
        finally:
            ended = time.monotonic()
            with self._lock:
                queue = self._waiting[key]
                if len(batch) > 1:
                    # Its callers will be back: the next leader (queued now,
                    # or the first of them) waits for them.
                    wait = min(self._gather_max_s, self._gather_share * (ended - started))
                    self._expected[key] = _Expected(len(batch) + len(queue), ended + wait)
                    if len(self._expected) > 4 * self._max_batch:
                        self._forget_expired(ended)
                if queue:
                    following = queue.pop(0)
                    following.leads = True
                else:
                    del self._waiting[key]
                    following = None
            for t in batch[1:]:
                t.woken.set()
            if following is not None:
                following.woken.set()

    def _forget_expired(self, now: float) -> None:
        for key in [k for k, e in self._expected.items() if e.until < now]:
            del self._expected[key]

    def waiting(self) -> int:
        """Requests queued behind a batch now (for tests and metrics)."""
        with self._lock:
            return sum(len(q) for q in self._waiting.values())
