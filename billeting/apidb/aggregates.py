"""Writes on the aggregate tables (aggregates, their metadata and hosts,
topology domains). Each function takes an open write transaction; the
callers (``billeting.scheduler.service``) validate and bump the directory
generation in the same transaction."""
from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping

from sqlalchemy import Connection, and_, delete, insert, or_, select, update

from billeting.apidb import tables as t


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(tzinfo=None, microsecond=0)


def create(conn: Connection, *, uuid: str, name: str | None, kind: str) -> int:
    now = utcnow()
    return conn.execute(insert(t.aggregates).values(uuid=uuid, name=name, kind=kind, created_at=now,
                                                    updated_at=now)).inserted_primary_key[0]


def touch(conn: Connection, aggregate_id: int, **values) -> None:
    conn.execute(update(t.aggregates).where(t.aggregates.c.id == aggregate_id).values(updated_at=utcnow(), **values))


def delete_aggregate(conn: Connection, aggregate_id: int) -> None:
    """Its metadata, hosts and domain go with it (the domain's members lose their parent)."""
    conn.execute(update(t.topology_domains).where(
        t.topology_domains.c.parent_id.in_(select(t.topology_domains.c.id).where(
            t.topology_domains.c.aggregate_id == aggregate_id).scalar_subquery())).values(parent_id=None))
    for table in (t.aggregate_metadata, t.aggregate_hosts, t.topology_domains):
        conn.execute(delete(table).where(table.c.aggregate_id == aggregate_id))
    conn.execute(delete(t.aggregates).where(t.aggregates.c.id == aggregate_id))


def set_metadata(conn: Connection, aggregate_id: int, metadata: Mapping[str, str]) -> None:
    conn.execute(delete(t.aggregate_metadata).where(t.aggregate_metadata.c.aggregate_id == aggregate_id))
    if metadata:
        conn.execute(insert(t.aggregate_metadata), [
            {"aggregate_id": aggregate_id, "key": k, "value": v} for k, v in sorted(metadata.items())])


def set_hosts(conn: Connection, aggregate_id: int, scope: str, hosts: Mapping[str, str]) -> None:
    """Replace the hosts (provider uuid -> name). A host already in another
    aggregate of the same scope raises IntegrityError (unique scope+host)."""
    conn.execute(delete(t.aggregate_hosts).where(t.aggregate_hosts.c.aggregate_id == aggregate_id))
    if hosts:
        conn.execute(insert(t.aggregate_hosts), [
            {"aggregate_id": aggregate_id, "provider_uuid": uuid, "host": name, "scope": scope}
            for uuid, name in sorted(hosts.items())])


def hosts_in_scope(conn: Connection, scope: str, providers: Iterable[str]) -> dict[str, int]:
    """Provider uuid -> aggregate id, for those of ``providers`` already placed in ``scope``."""
    wanted = list(providers)
    if not wanted:
        return {}
    h = t.aggregate_hosts.c
    return dict(conn.execute(select(h.provider_uuid, h.aggregate_id).where(h.scope == scope,
                                                                          h.provider_uuid.in_(wanted))).all())


def create_domain(conn: Connection, *, aggregate_id: int, level: str, name: str) -> int:
    now = utcnow()
    return conn.execute(insert(t.topology_domains).values(aggregate_id=aggregate_id, level=level, name=name,
                                                          created_at=now, updated_at=now)).inserted_primary_key[0]


def set_children(conn: Connection, domain_id: int, children: Iterable[int]) -> bool:
    """Make ``children`` exactly the domains this one holds. False when one
    of them was taken by another domain meanwhile (a concurrent writer)."""
    d = t.topology_domains.c
    wanted = sorted(set(children))
    conn.execute(update(t.topology_domains).where(d.parent_id == domain_id, d.id.not_in(wanted) if wanted
                                                  else d.id.is_not(None)).values(parent_id=None))
    if not wanted:
        return True
    taken = conn.execute(update(t.topology_domains).where(
        d.id.in_(wanted), or_(d.parent_id.is_(None), d.parent_id == domain_id)).values(parent_id=domain_id))
    return taken.rowcount == len(wanted)


def clear_children(conn: Connection, domain_id: int) -> None:
    conn.execute(update(t.topology_domains).where(t.topology_domains.c.parent_id == domain_id).values(parent_id=None))


def domain_row(conn: Connection, level: str, name: str, *, lock: bool = False):
    d = t.topology_domains.c
    query = select(t.topology_domains).where(and_(d.level == level, d.name == name))
    if lock:
        query = query.with_for_update()
    return conn.execute(query).first()
