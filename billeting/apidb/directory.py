"""``SqlDirectory``: the scheduler's ``Directory`` read from the API database.

Decisions read the directory many times per request (a lookup per host),
so it is served from memory: a ``MemoryDirectory`` built from one
``Snapshot``. Freshness:

* writes made through this process call ``invalidate()``: the next read
  loads a new snapshot;
* writes made by other processes bump the directory generation; every
  ``check_every`` seconds a read asks for that one number and reloads when
  it moved. Another scheduler's topology change is therefore seen within
  ``check_every`` seconds (1 s by default).

Listeners registered with ``on_change`` (the host catalog, whose aggregate
memberships depend on which aggregates the directory knows) are told after
every reload that found a new generation.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping

from sqlalchemy import Engine

from billeting.apidb import generation
from billeting.apidb import snapshot as snapshot_mod
from billeting.apidb.snapshot import Snapshot
from billeting.common.db.tx import run_read
from billeting.scheduler.directory import CELL_LEVEL, DEFAULT_LEVELS, Domain, MemoryDirectory

LOG = logging.getLogger(__name__)

TENANT_KEY_PREFIX = "filter_tenant_id"
ZONE_KEY = "availability_zone"


def build_memory(snap: Snapshot, levels: tuple[str, ...]) -> MemoryDirectory:
    """The in-memory directory a snapshot describes, for topology ``levels``."""
    directory = MemoryDirectory(levels)
    known = set(levels) | {CELL_LEVEL}
    for dom in snap.domains.values():
        if dom.level not in known:
            LOG.warning("ignoring %s %r: %r is not a configured topology level (levels: %s)",
                        dom.level, dom.name, dom.level, ", ".join(levels))
            continue
        parent = snap.parent(dom)
        directory.add_domain(dom.level, dom.name, dom.aggregate_uuid, parent.name if parent else None)
    for agg in snap.aggregates.values():
        if agg.metadata:
            directory.set_metadata(agg.uuid, agg.metadata)
        for key, value in agg.metadata.items():
            if key == ZONE_KEY:
                directory.add_zone(value, agg.uuid)
            elif key.startswith(TENANT_KEY_PREFIX):
                directory.add_tenant(value, agg.uuid)
    return directory


class SqlDirectory:
    """Thread-safe. Implements ``billeting.scheduler.directory.Directory``."""

    def __init__(self, engine: Engine, levels: Iterable[str] = DEFAULT_LEVELS, *, check_every: float = 1.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.engine = engine
        self._levels = tuple(levels)
        self.check_every = check_every
        self.clock = clock
        self._lock = threading.Lock()
        self._listeners: list[Callable[[], None]] = []
        self._snapshot: Snapshot | None = None
        self._memory = MemoryDirectory(self._levels)
        self._checked_at = float("-inf")

    # --- freshness ---------------------------------------------------------------

    def on_change(self, listener: Callable[[], None]) -> None:
        self._listeners.append(listener)

    def invalidate(self) -> None:
        """Forget what was read: the next read loads a new snapshot."""
        with self._lock:
            self._snapshot = None
            self._checked_at = float("-inf")
        self._notify()

    def _notify(self) -> None:
        for listener in self._listeners:
            listener()

    def snapshot(self) -> Snapshot:
        """The current snapshot (read again when stale)."""
        self._current()
        assert self._snapshot is not None
        return self._snapshot

    def _current(self) -> MemoryDirectory:
        if self.clock() - self._checked_at <= self.check_every and self._snapshot is not None:
            return self._memory
        changed = False
        with self._lock:
            if self.clock() - self._checked_at > self.check_every or self._snapshot is None:
                if self._snapshot is None or run_read(self.engine, generation.read) != self._snapshot.generation:
                    had = self._snapshot
                    snap = run_read(self.engine, snapshot_mod.load)
                    self._memory = build_memory(snap, self._levels)
                    self._snapshot = snap
                    changed = had is not None and had.generation != snap.generation
                self._checked_at = self.clock()
            memory = self._memory
        if changed:
            self._notify()
        return memory

    # --- Directory ---------------------------------------------------------------

    @property
    def levels(self) -> tuple[str, ...]:
        return self._levels

    def domain(self, level: str, name: str) -> Domain | None:
        return self._current().domain(level, name)

    def enclosing(self, domain: Domain, level: str) -> Domain | None:
        return self._current().enclosing(domain, level)

    def domains_of(self, aggregates: Iterable[str]) -> dict[str, Domain]:
        return self._current().domains_of(aggregates)

    def az_aggregates(self, zone: str) -> frozenset[str]:
        return self._current().az_aggregates(zone)

    def zone_of(self, aggregates: Iterable[str]) -> str | None:
        return self._current().zone_of(aggregates)

    def zones(self) -> frozenset[str]:
        return self._current().zones()

    def tenant_aggregates(self, project_id: str) -> frozenset[str] | None:
        return self._current().tenant_aggregates(project_id)

    def aggregate_metadata(self, aggregate: str) -> Mapping[str, str]:
        return self._current().aggregate_metadata(aggregate)

    def overrides(self, key: str) -> bool:
        return self._current().overrides(key)

    def known_aggregates(self) -> frozenset[str]:
        return self._current().known_aggregates()
