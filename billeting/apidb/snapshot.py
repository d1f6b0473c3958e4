"""One consistent read of everything the scheduler knows about aggregates:
their metadata, the hosts it put in them, and the topology domains.

Small by nature (thousands of rows for a large region), so it is read
whole: in one read transaction, together with the directory generation
that dates it. The directory, the topology operations and the HTTP views
all work from a snapshot.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from sqlalchemy import Connection, select

from billeting.apidb import generation
from billeting.apidb import tables as t


@dataclass(frozen=True, slots=True)
class AggregateInfo:
    id: int
    uuid: str
    name: str | None
    kind: str
    metadata: dict[str, str]
    hosts: dict[str, str]  # provider uuid -> host name, for hosts the scheduler put there
    created_at: dt.datetime | None
    updated_at: dt.datetime | None = None


@dataclass(frozen=True, slots=True)
class DomainInfo:
    id: int
    level: str
    name: str
    aggregate_id: int
    aggregate_uuid: str
    parent_id: int | None


@dataclass(frozen=True, slots=True)
class Snapshot:
    generation: int
    aggregates: dict[int, AggregateInfo]
    domains: dict[int, DomainInfo]
    _by_name: dict[tuple[str, str], DomainInfo] = field(default_factory=dict)
    _children: dict[int, list[DomainInfo]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for dom in self.domains.values():
            self._by_name[(dom.level, dom.name)] = dom
            if dom.parent_id is not None:
                self._children.setdefault(dom.parent_id, []).append(dom)

    def domain(self, level: str, name: str) -> DomainInfo | None:
        return self._by_name.get((level, name))

    def children(self, domain: DomainInfo) -> list[DomainInfo]:
        return sorted(self._children.get(domain.id, []), key=lambda d: d.name)

    def parent(self, domain: DomainInfo) -> DomainInfo | None:
        return self.domains.get(domain.parent_id) if domain.parent_id is not None else None

    def ancestors(self, domain: DomainInfo) -> list[DomainInfo]:
        found, current = [], self.parent(domain)
        while current is not None and current not in found:
            found.append(current)
            current = self.parent(current)
        return found

    def hosts(self, domain: DomainInfo) -> dict[str, str]:
        """Provider uuid -> name of every host in the domain, its members' included."""
        found = dict(self.aggregates[domain.aggregate_id].hosts)
        seen = {domain.id}
        stack = list(self._children.get(domain.id, []))
        while stack:
            child = stack.pop()
            if child.id in seen:
                continue
            seen.add(child.id)
            found.update(self.aggregates[child.aggregate_id].hosts)
            stack.extend(self._children.get(child.id, []))
        return found

    def aggregate_by_uuid(self, uuid: str) -> AggregateInfo | None:
        for agg in self.aggregates.values():
            if agg.uuid == uuid:
                return agg
        return None

    def aggregate_by_name(self, name: str) -> AggregateInfo | None:
        for agg in self.aggregates.values():
            if agg.name == name:
                return agg
        return None

    def zones(self) -> list[AggregateInfo]:
        return sorted((a for a in self.aggregates.values() if a.kind == t.KIND_ZONE), key=lambda a: a.name or "")

    def domain_of_aggregate(self, aggregate_id: int) -> DomainInfo | None:
        for dom in self.domains.values():
            if dom.aggregate_id == aggregate_id:
                return dom
        return None


def load(conn: Connection) -> Snapshot:
    gen = generation.read(conn)
    metadata: dict[int, dict[str, str]] = {}
    for agg_id, key, value in conn.execute(select(t.aggregate_metadata.c.aggregate_id, t.aggregate_metadata.c.key,
                                                  t.aggregate_metadata.c.value)):
        metadata.setdefault(agg_id, {})[key] = value
    hosts: dict[int, dict[str, str]] = {}
    for agg_id, provider, name in conn.execute(select(t.aggregate_hosts.c.aggregate_id,
                                                      t.aggregate_hosts.c.provider_uuid, t.aggregate_hosts.c.host)):
        hosts.setdefault(agg_id, {})[provider] = name
    a = t.aggregates.c
    aggregates = {
        row.id: AggregateInfo(row.id, row.uuid, row.name, row.kind, metadata.get(row.id, {}),
                              hosts.get(row.id, {}), row.created_at, row.updated_at)
        for row in conn.execute(select(a.id, a.uuid, a.name, a.kind, a.created_at, a.updated_at))
    }
    d = t.topology_domains.c
    domains = {
        row.id: DomainInfo(row.id, row.level, row.name, row.aggregate_id, aggregates[row.aggregate_id].uuid,
                           row.parent_id)
        for row in conn.execute(select(d.id, d.level, d.name, d.aggregate_id, d.parent_id))
    }
    return Snapshot(gen, aggregates, domains)
