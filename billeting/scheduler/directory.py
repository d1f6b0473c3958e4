"""What the scheduler knows about aggregates: failure domains, availability
zones, tenant isolation and per-aggregate weigher multipliers.

Failure domains follow the "Modeling Affinity in Placement" proposal: an
operator names topology levels, narrowest first (``rack`` < ``row`` <
``room``), and every domain (rack r1, row w2, ...) is a Placement aggregate
whose members are the root providers of its hosts. A wider domain holds the
hosts of the narrower domains it is built from. Because domains are
aggregates, "different rack from X" is a ``member_of=!in:`` clause of the
candidates query itself, not a filter run afterwards over thousands of hosts.

``Directory`` is what the decision code reads; the API database provides
the stored implementation, ``MemoryDirectory`` serves tests and the simulator.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

import msgspec

DEFAULT_LEVELS = ("rack", "row", "room")
# A cell is one more, widest, level (architecture: "cell is one more level").
CELL_LEVEL = "cell"


class Domain(msgspec.Struct, frozen=True):
    level: str
    name: str
    aggregate: str  # the Placement aggregate uuid that stands for it
    parent: str | None = None  # the domain one level wider that holds it


class Directory(Protocol):
    @property
    def levels(self) -> tuple[str, ...]:
        """Topology levels, narrowest first (``cell`` not included)."""

    def domain(self, level: str, name: str) -> Domain | None: ...

    def enclosing(self, domain: Domain, level: str) -> Domain | None:
        """The domain at ``level`` (wider than ``domain``'s) that holds it."""

    def domains_of(self, aggregates: Iterable[str]) -> dict[str, Domain]:
        """Level → domain, for a host that is a member of ``aggregates``."""

    def az_aggregates(self, zone: str) -> frozenset[str]:
        """Aggregates whose hosts are in availability zone ``zone``."""

    def zone_of(self, aggregates: Iterable[str]) -> str | None:
        """The availability zone of a host in ``aggregates`` (None: default zone)."""

    def zones(self) -> frozenset[str]:
        """Every availability zone some aggregate's metadata names."""

    def tenant_aggregates(self, project_id: str) -> frozenset[str] | None:
        """Aggregates reserved for ``project_id``; None when it has none."""

    def aggregate_metadata(self, aggregate: str) -> Mapping[str, str]: ...

    def overrides(self, key: str) -> bool:
        """Does any aggregate set metadata ``key`` (e.g. a weigher multiplier)?"""

    def known_aggregates(self) -> frozenset[str]:
        """Every aggregate the directory gives a meaning to."""


class MemoryDirectory:
    """A directory held in memory: built by code (tests, the simulator) or
    loaded from the API database by its store."""

    def __init__(self, levels: Iterable[str] = DEFAULT_LEVELS) -> None:
        self._levels = tuple(levels)
        self._domains: dict[tuple[str, str], Domain] = {}
        self._by_aggregate: dict[str, Domain] = {}
        self._zones: dict[str, set[str]] = {}        # zone -> aggregates
        self._zone_of: dict[str, str] = {}           # aggregate -> zone
        self._tenants: dict[str, set[str]] = {}      # project -> aggregates
        self._metadata: dict[str, dict[str, str]] = {}
        self._metadata_keys: frozenset[str] = frozenset()

    @property
    def levels(self) -> tuple[str, ...]:
        return self._levels

    def add_domain(self, level: str, name: str, aggregate: str, parent: str | None = None) -> Domain:
        if level not in self._levels and level != CELL_LEVEL:
            raise ValueError(f"unknown topology level {level!r} (levels: {', '.join(self._levels)})")
        found = Domain(level, name, aggregate, parent)
        self._domains[(level, name)] = found
        self._by_aggregate[aggregate] = found
        return found

    def add_zone(self, zone: str, aggregate: str) -> None:
        self._zones.setdefault(zone, set()).add(aggregate)
        self._zone_of[aggregate] = zone

    def add_tenant(self, project_id: str, aggregate: str) -> None:
        self._tenants.setdefault(project_id, set()).add(aggregate)

    def set_metadata(self, aggregate: str, metadata: Mapping[str, str]) -> None:
        self._metadata[aggregate] = dict(metadata)
        self._metadata_keys = frozenset(k for meta in self._metadata.values() for k in meta)

    def domain(self, level: str, name: str) -> Domain | None:
        return self._domains.get((level, name))

    def enclosing(self, domain: Domain, level: str) -> Domain | None:
        order = (*self._levels, CELL_LEVEL)
        current: Domain | None = domain
        while current is not None and current.level != level:
            if current.parent is None:
                return None
            i = order.index(current.level)
            if i + 1 >= len(order):
                return None
            current = self._domains.get((order[i + 1], current.parent))
        return current

    def domains_of(self, aggregates: Iterable[str]) -> dict[str, Domain]:
        found = {}
        for agg in aggregates:
            dom = self._by_aggregate.get(agg)
            if dom is not None:
                found[dom.level] = dom
        return found

    def az_aggregates(self, zone: str) -> frozenset[str]:
        return frozenset(self._zones.get(zone, ()))

    def zone_of(self, aggregates: Iterable[str]) -> str | None:
        for agg in aggregates:
            zone = self._zone_of.get(agg)
            if zone is not None:
                return zone
        return None

    def zones(self) -> frozenset[str]:
        return frozenset(self._zones)

    def tenant_aggregates(self, project_id: str) -> frozenset[str] | None:
        found = self._tenants.get(project_id)
        return frozenset(found) if found else None

    def aggregate_metadata(self, aggregate: str) -> Mapping[str, str]:
        return self._metadata.get(aggregate, {})

    def overrides(self, key: str) -> bool:
        return key in self._metadata_keys

    def known_aggregates(self) -> frozenset[str]:
        return frozenset(self._by_aggregate) | frozenset(self._zone_of) | frozenset(
            a for aggs in self._tenants.values() for a in aggs) | frozenset(self._metadata)
