"""Usages (docs/design/placement-model.md#usages): sums of allocations per provider, per project/user,
and per project grouped by consumer type.

Every figure comes from a SQL aggregate; no allocation row is ever
brought into Python.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import Connection, and_, func, literal_column, select, true

from billeting.placement.store import tables as t

# Group names of GET /usages at mv >= 1.38. Consumer type names match
# ^[A-Z0-9_]+$, so these lower-case names can never collide with a real type.
ALL_TYPES = "all"
UNKNOWN_TYPE = "unknown"

_a = t.allocations
_c = t.consumers
_rc = t.resource_classes


@dataclass(slots=True)
class UsageGroup:
    """The usage of one consumer-type group: distinct consumers and per-class sums."""

    consumer_count: int = 0
    resources: dict[str, int] = field(default_factory=dict)


def provider_usages(conn: Connection, provider_id: int) -> dict[str, int]:
    """Per class with inventory on the provider, the sum of its allocations (0 when none)."""
    inv = t.inventories
    query = (
        select(_rc.c.name, func.coalesce(func.sum(_a.c.used), 0).label("used"))
        .select_from(inv)
        .join(_rc, _rc.c.id == inv.c.resource_class_id)
        .outerjoin(_a, and_(_a.c.resource_provider_id == inv.c.resource_provider_id,
                            _a.c.resource_class_id == inv.c.resource_class_id))
        .where(inv.c.resource_provider_id == provider_id)
        .group_by(_rc.c.name)
    )
    return {row.name: int(row.used) for row in conn.execute(query)}


def _owner_filter(query, project_id: str, user_id: str | None):
    """Restrict a query over allocations ⋈ consumers to one project (and user)."""
    query = query.join(t.projects, t.projects.c.id == _c.c.project_id).where(
        t.projects.c.external_id == project_id)
    if user_id is not None:
        query = query.join(t.users, t.users.c.id == _c.c.user_id).where(
            t.users.c.external_id == user_id)
    return query


def project_usages(conn: Connection, project_id: str, user_id: str | None = None) -> dict[str, int]:
    """Per class, the sum over the project's (and user's) consumers; only used classes."""
    query = (
        select(_rc.c.name, func.sum(_a.c.used).label("used"))
        .select_from(_a)
        .join(_c, _c.c.id == _a.c.consumer_id)
        .join(_rc, _rc.c.id == _a.c.resource_class_id)
    )
    query = _owner_filter(query, project_id, user_id).group_by(_rc.c.name)
    return {row.name: int(row.used) for row in conn.execute(query)}


def project_usages_by_type(conn: Connection, project_id: str, user_id: str | None = None,
                           consumer_type: str | None = None) -> dict[str, UsageGroup]:
    """Usage grouped by consumer type (mv >= 1.38).

    ``consumer_type`` None: one group per type present, untyped consumers
    under ``unknown``. ``all``: a single ``all`` group over every consumer.
    ``unknown``: only untyped consumers. Any other value: only that type.
    """
    ct = t.consumer_types
    # Untyped consumers get the key '' (no real type name is empty); it is
    # inlined, not bound, so PostgreSQL sees the same expression in SELECT
    # and GROUP BY. The "all" group spans every type: no type key at all.
    type_key = None if consumer_type == ALL_TYPES else func.coalesce(ct.c.name, literal_column("''"))

    def scoped(*columns, per_class: bool):
        keys = [type_key.label("type_key")] if type_key is not None else []
        query = (select(*keys, *columns)
                 .select_from(_a)
                 .join(_c, _c.c.id == _a.c.consumer_id)
                 .outerjoin(ct, ct.c.id == _c.c.consumer_type_id))
        if per_class:
            query = query.join(_rc, _rc.c.id == _a.c.resource_class_id)
        query = _owner_filter(query, project_id, user_id)
        if consumer_type == UNKNOWN_TYPE:
            query = query.where(_c.c.consumer_type_id.is_(None))
        elif consumer_type is not None and consumer_type != ALL_TYPES:
            query = query.where(ct.c.name == consumer_type)
        group_by = ([type_key] if type_key is not None else []) + ([_rc.c.name] if per_class else [])
        return query.group_by(*group_by) if group_by else query

    # One statement, so sums and counts come from the same snapshot even
    # while allocations are being written.
    counts = scoped(func.count(func.distinct(_c.c.id)).label("consumers"),
                    per_class=False).subquery("counts")
    sums = scoped(_rc.c.name.label("rc"), func.sum(_a.c.used).label("used"),
                  per_class=True).subquery("sums")
    on = sums.c.type_key == counts.c.type_key if type_key is not None else true()
    query = select(sums, counts.c.consumers).join_from(sums, counts, on)

    groups: dict[str, UsageGroup] = {}
    for row in conn.execute(query):
        name = ALL_TYPES if type_key is None else (row.type_key or UNKNOWN_TYPE)
        group = groups.setdefault(name, UsageGroup(consumer_count=int(row.consumers)))
        group.resources[row.rc] = int(row.used)
    return groups
