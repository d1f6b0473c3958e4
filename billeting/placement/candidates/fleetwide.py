"""Unbounded single-provider answers on SQLite: usage read once, not twice.

An answer with neither ``limit`` nor cap over a flat fleet lists every
provider that can take the request, and summarizes each of them. Asked the
usual way, SQLite sums each candidate's allocations once per requested class
for the capacity test (a correlated probe per provider and class), and the
summaries then sum every allocation of the fleet again for their ``used``
figures: two reads of the largest table, the second one complete anyway.

Here one read serves both: the query applies the other filters and brings
each requested class's capacity along (one index probe per provider and
class into inventories, none into allocations); the summaries' usage read
follows, for those providers only (the whole fleet's when they are most of
it, as ``summary_cache.usage_of`` decides), and the capacity test runs in
Python on that usage before it serves the summaries too. The test is the
SQL one (``used + amount <= (total - reserved) * allocation_ratio``, in the
same double-precision arithmetic), so the providers admitted are exactly
those the other forms admit.

SQLite only: PostgreSQL and MySQL answer the same request set-based (each
class's usage summed and hashed once), where moving the test into Python
would only add rows to send.
"""
from __future__ import annotations

from sqlalchemy import BigInteger, Connection, Integer, and_, select

from billeting.placement.candidates import sql, summary_cache
from billeting.placement.candidates.model import CandidateRequest, RequestGroup


def applies(conn: Connection, *, bounded: bool, sample: bool, flat_summaries: bool) -> bool:
    """Whether ``find`` answers this direct query: unbounded, not sampled,
    summaries of the providers themselves, SQLite."""
    return conn.dialect.name == "sqlite" and not bounded and not sample and flat_summaries


def _query(plan: sql.Plan, group: RequestGroup, tree_wide: bool, request: CandidateRequest):
    """Providers passing every filter but capacity, each with the capacity of
    every requested class (in ``group.resources`` order) after its columns."""
    form = sql.probe_form(plan.dialect)
    p = sql.P
    conds = sql.group_filters(plan, p, group, group.resources, tree_wide=tree_wide, own_traits=True,
                              form=form, capacity=False)
    conds += sql.root_filter(plan, p.c.root_provider_id, request.root_required, request.root_forbidden,
                             form=form)
    joins = []
    for position, (rc_id, amount) in enumerate(group.resources.items()):
        plan.mark("capacity_of", position)
        rc = plan.bind(rc_id, Integer)
        low, high, step = (plan.bind(amount, BigInteger) for _ in range(3))
        if plan.build:
            inv = sql.INV.alias(f"cap{position}")  # (built on a statement cache miss only)
            # The unit checks stay in SQL: they need nothing but the row.
            joins.append((inv, and_(inv.c.resource_provider_id == p.c.id, inv.c.resource_class_id == rc,
                                    *sql.unit_fits(inv, low, high, step))))
    if not plan.build:
        return None
    source = p
    for inv, on in joins:
        source = source.join(inv, on)
    capacities = [sql.capacity_of(inv) for inv, _ in joins]
    return (select(*summary_cache.row_columns(p, plan.dialect), *capacities)
            .select_from(source).where(*conds).order_by(p.c.id))


def find(conn: Connection, request: CandidateRequest, group: RequestGroup, tree_wide: bool,
         classes) -> tuple[list, dict]:
    """(rows laid out as ``summary_cache.row_columns`` of every provider that
    can take the group, their summaries by provider id)."""
    statement, values = sql.prepare("fleetwide", conn.dialect.name,
                                    lambda plan: _query(plan, group, tree_wide, request))
    found = conn.execute(statement, values).all()
    if not found:
        return [], {}
    width = len(summary_cache.row_columns(sql.P, conn.dialect.name))
    # The same transaction, so the same snapshot as the rows.
    usage = summary_cache.usage_of(conn, found)
    # (column of the capacity, class, amount) per requested class
    needs = [(width + i, rc, amount) for i, (rc, amount) in enumerate(group.resources.items())]
    used_of = usage.by_provider.get
    rows = []
    keep = rows.append
    for row in found:
        used = used_of(row[0])
        if used is not None:
            for column, rc, amount in needs:
                if used.get(rc, 0) + amount > row[column]:
                    break
            else:
                keep(row[:width])
        elif all(amount <= row[column] for column, _, amount in needs):
            keep(row[:width])
    if not rows:
        return rows, {}
    by_id, _ = summary_cache.summarize(conn, rows, classes, usage=usage)
    return rows, by_id
