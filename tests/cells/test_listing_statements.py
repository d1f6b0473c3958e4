"""The cell side of a listing builds each SELECT once per shape: pages that
differ only in values (the project, the position, the limit) share one
statement, and anything that changes the statement's text is a new shape."""
from __future__ import annotations

import datetime as dt

from sqlalchemy import create_engine

from billeting.cells import listing as L
from billeting.cells import migrate
from billeting.cells import tables as t
from billeting.cells.listing import ListFilters, ListQuery, SortKey

NEWEST = (SortKey(column="created_at", descending=True), SortKey(column="uuid", descending=True))
BY_HOST = (SortKey(column="host", descending=False), SortKey(column="uuid", descending=False))


def q(filters=ListFilters(), order=NEWEST, after=None, limit=10, columns=L.SCALARS) -> ListQuery:
    return ListQuery(filters=filters, order=order, after=after, limit=limit, columns=columns)


def test_values_do_not_make_a_new_shape_and_structure_does():
    at = dt.datetime(2030, 1, 1)
    same = [q(), q(limit=500)]
    assert len({L._shape(x, "postgresql") for x in same}) == 1
    paged = [q(after=(at, "a")), q(after=(at + dt.timedelta(1), "b"), limit=3)]
    assert len({L._shape(x, "postgresql") for x in paged}) == 1
    projects = [q(filters=ListFilters(project_id="p1")), q(filters=ListFilters(project_id="p2"))]
    assert len({L._shape(x, "postgresql") for x in projects}) == 1
    different = [q(), q(after=(at, "a")), q(order=BY_HOST, after=("h", "a")), q(order=BY_HOST, after=(None, "a")),
                 q(filters=ListFilters(project_id="p1")), q(filters=ListFilters(deleted=None)),
                 q(filters=ListFilters(host="h")), q(columns=L.DETAIL), q(order=BY_HOST)]
    assert len({L._shape(x, "postgresql") for x in different}) == len(different)
    assert L._shape(q(), "postgresql") != L._shape(q(), "sqlite")


def test_pages_of_one_shape_read_their_own_values(tmp_path):
    engine = create_engine(f"sqlite:///{tmp_path / 'cell.sqlite'}")
    migrate.upgrade(engine)
    start = dt.datetime(2030, 1, 1)
    with engine.begin() as conn:
        conn.execute(t.instances.insert(), [dict(
            uuid=f"{i:08d}-0000-0000-0000-000000000000", name=f"s{i}", project_id=f"p{i % 2}", user_id="u",
            vm_state="active", host=f"h{i % 3}", flavor="{}", request="{}", alternates="[]", hosts_tried="[]",
            num_attempts=1, created_at=start + dt.timedelta(seconds=i), updated_at=start) for i in range(10)])
    names = lambda query: [r.name for r in L.page(engine, query, cell="c")]  # noqa: E731
    assert names(q(filters=ListFilters(project_id="p0"), limit=3)) == ["s8", "s6", "s4"]
    assert names(q(filters=ListFilters(project_id="p1"), limit=3)) == ["s9", "s7", "s5"]
    first = L.page(engine, q(filters=ListFilters(project_id="p1"), limit=2), cell="c")
    after = L.sort_values(first[-1], NEWEST)
    assert names(q(filters=ListFilters(project_id="p1"), after=after, limit=2)) == ["s5", "s3"]
    assert names(q(filters=ListFilters(project_id="p0"), after=(start + dt.timedelta(seconds=4), "0"), limit=5)) \
        == ["s2", "s0"]
    assert names(q(filters=ListFilters(host="h2"), limit=5)) == ["s8", "s5", "s2"]
    assert names(q(filters=ListFilters(host="h0"), limit=5)) == ["s9", "s6", "s3", "s0"]
    engine.dispose()
