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

The batch's decisions are made by the caller's ``decide`` function; this
module only forms the batches and hands each waiter its own outcome (a
value or an exception). Leadership passes from batch to batch: the thread
that finishes a batch returns its own answer and wakes the first waiter,
which decides the next batch, so no caller works for others forever.
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

Item = TypeVar("Item")

# Requests decided in one batch at most; more wait for the next batch.
MAX_BATCH = 32


@dataclass(slots=True, eq=False)
class _Ticket(Generic[Item]):
    item: Item
    woken: threading.Event = field(default_factory=threading.Event)
    # Set when this ticket's thread is to decide a batch (itself first).
    batch: list["_Ticket[Item]"] | None = None
    outcome: Any = None
    failed: bool = False


class Coalescer(Generic[Item]):
    """``run(key, item)`` returns ``decide([item, ...])``'s entry for ``item``
    (or raises it, when it is an exception)."""

    def __init__(self, decide: Callable[[Sequence[Item]], Sequence[object]], *,
                 max_batch: int = MAX_BATCH) -> None:
        if max_batch < 1:
            raise ValueError("max_batch must be at least 1")
        self._decide = decide
        self._max_batch = max_batch
        self._lock = threading.Lock()
        # Key → tickets waiting for the next batch; a key is present while
        # a batch of it is being decided (with an empty list when none wait).
        self._waiting: dict[Hashable, list[_Ticket[Item]]] = {}

    def run(self, key: Hashable, item: Item) -> object:
        ticket = _Ticket(item)
        with self._lock:
            queue = self._waiting.get(key)
            if queue is None:
                self._waiting[key] = []
                ticket.batch = [ticket]
            else:
                queue.append(ticket)
        if ticket.batch is None:
            ticket.woken.wait()
        if ticket.batch is not None:
            self._lead(key, ticket.batch)
        if ticket.failed:
            raise ticket.outcome
        return ticket.outcome

    def _lead(self, key: Hashable, batch: list[_Ticket[Item]]) -> None:
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
            with self._lock:
                queue = self._waiting[key]
                if queue:
                    following = queue[:self._max_batch]
                    del queue[:self._max_batch]
                    following[0].batch = following
                else:
                    del self._waiting[key]
                    following = []
            for t in batch[1:]:
                t.woken.set()
            if following:
                following[0].woken.set()

    def waiting(self) -> int:
        """Requests queued behind a batch now (for tests and metrics)."""
        with self._lock:
            return sum(len(q) for q in self._waiting.values())
