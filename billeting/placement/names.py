"""Name ↔ id lookups for resource classes and traits, one query per batch.

Standard names come from the per-engine cache of ``candidates.names`` (their
ids never change); only custom names cost a query.
"""
from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import Connection, select

from billeting.placement.candidates import names as cached
from billeting.placement.store import tables as t


def storable(value: str, max_length: int) -> bool:
    """Could ``value`` be in a column of ``max_length``? A value that could not
    be stored names nothing, so lookups skip it instead of sending the
    database text it rejects (PostgreSQL refuses NUL characters outright)."""
    return len(value) <= max_length and "\x00" not in value


def rc_ids(conn: Connection, names: Iterable[str]) -> dict[str, int]:
    """Ids of the named resource classes that exist (unknown names are absent)."""
    names = {name for name in names if storable(name, 255)}
    if not names:
        return {}
    return cached.rc_ids(conn, names)


def rc_names(conn: Connection, ids: Iterable[int] | None = None) -> dict[int, str]:
    if ids is not None:
        ids = set(ids)
        return cached.rc_names(conn, ids) if ids else {}
    query = select(t.resource_classes.c.id, t.resource_classes.c.name)
    return {row.id: row.name for row in conn.execute(query)}


def trait_ids(conn: Connection, names: Iterable[str]) -> dict[str, int]:
    names = {name for name in names if storable(name, 255)}
    if not names:
        return {}
    return cached.trait_ids(conn, names)


def missing(names: Iterable[str], found: dict[str, int]) -> list[str]:
    return sorted(set(names) - found.keys())
