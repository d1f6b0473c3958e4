"""Replace the set of rows linking one provider to traits or aggregates."""
from __future__ import annotations

import functools

from sqlalchemy import Column, Connection, Table, bindparam
from sqlalchemy.exc import IntegrityError

from billeting.placement.providers import utcnow
from billeting.placement.store.tx import Retry


@functools.cache
def _statements(table: Table, other: Column):
    """(delete, insert) of ``replace_links`` for one link table, built once."""
    delete = table.delete().where(table.c.resource_provider_id == bindparam("provider_id"),
                                  other.in_(bindparam("removed", expanding=True)))
    return delete, table.insert()


def replace_links(conn: Connection, table: Table, other: Column, provider_id: int,
                  current: set[int], wanted: set[int], *, what: str) -> bool:
    """Make ``provider_id`` linked to exactly ``wanted`` in ``table``, where
    ``other`` is the column naming the far side. Returns whether anything
    changed. Rows are only deleted and inserted, never rewritten."""
    delete, insert = _statements(table, other)
    removed = current - wanted
    if removed:
        conn.execute(delete, {"provider_id": provider_id, "removed": sorted(removed)})
    added = wanted - current
    if added:
        now = utcnow()
        try:
            conn.execute(insert, [
                {"resource_provider_id": provider_id, other.name: other_id, "created_at": now}
                for other_id in sorted(added)])
        except IntegrityError:
            # A concurrent request wrote the same link, or deleted the provider
            # or the linked object; re-running the unit of work sees its result.
            raise Retry(f"provider {what} changed concurrently") from None
    return bool(removed or added)
