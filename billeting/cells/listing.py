"""One cell's share of a server listing: its first rows in the listing's
order after a position, with the listing's filters applied in SQL.

The compute API lists across cells by asking every cell for at most
``limit`` rows in the requested order after the marker's sort values and
merging what they return, so a page costs ``limit`` rows per cell however
many servers there are. This module is the cell side of that: it knows the
instances table, nothing of the API's bodies.

The order is the one the API promises on every backend: text by code
point (PostgreSQL is told ``COLLATE "C"``; the MySQL tables are
``utf8mb4_bin``, SQLite compares bytes), NULLs first when ascending and last
when descending, and a complete order ends in ``uuid`` so that "after a
position" is exact. A query names the columns it needs (``ListQuery.columns``):
an index page whose filters are all in SQL reads the uuid, the name and
its sort columns; rows checked further by the API read every scalar; a
detail page also reads what its bodies show (flavor, image, lock), so that
one read per cell serves the page: no record is read whole. Each shape of
SELECT is built once (``_prepared``); on PostgreSQL it runs through the
driver (``billeting.common.db.rawread``).
"""
from __future__ import annotations

import datetime as dt
import functools

import msgspec
from sqlalchemy import Engine, and_, bindparam, case, false, null, or_, select, true, tuple_
from sqlalchemy.sql.elements import ColumnElement

from billeting import typeinfo
from billeting.cells import tables as t
from billeting.common.db.rawread import fetch_all
from billeting.common.db.tx import run_read
from billeting.scheduler.nova import Flavor, Image

_c = t.instances.c
# Backends whose planner uses an index for a row-value comparison (MySQL's and
# MariaDB's do not reliably: they get the branches).
_ROW_VALUES = frozenset({"postgresql", "sqlite"})

# Sortable columns by the name a SortKey uses; power_state is derived from vm_state.
_POWERED = ("active", "resized")
SORT_COLUMNS = frozenset({"name", "created_at", "updated_at", "launched_at", "deleted_at", "uuid", "project_id",
                          "user_id", "vm_state", "task_state", "power_state", "availability_zone", "host", "node"})
# Text whose order is the same under every collation (lowercase hex uuids,
# dashes at fixed places): compared as stored, so the indexes serve it.
_PLAIN_TEXT = frozenset({"uuid"})
_TEXT = frozenset({"name", "uuid", "project_id", "user_id", "vm_state", "task_state", "availability_zone", "host",
                   "node"})


class SortKey(msgspec.Struct, frozen=True, kw_only=True):
    column: str        # one of SORT_COLUMNS
    descending: bool


class StatePair(msgspec.Struct, frozen=True, kw_only=True):
    """A (vm_state, task_state) a status filter keeps."""
    vm_state: str
    task_state: str | None


class ListFilters(msgspec.Struct, frozen=True, kw_only=True):
    """What a listing keeps, as SQL can say it exactly or as a superset
    (the API checks the rest on what comes back)."""
    project_id: str | None = None
    deleted: bool | None = False            # True: deleted only, False: live only, None: both
    states: tuple[StatePair, ...] | None = None
    host: str | None = None
    node: str | None = None
    availability_zone: str | None = None
    updated_from: dt.datetime | None = None    # naive UTC, inclusive
    updated_until: dt.datetime | None = None   # naive UTC, exclusive


# What ``ListedRow`` holds, in its order: the scalar columns, then those a
# detail body needs besides (``flavor`` and ``image`` as the JSON stored).
_SCALARS = ("uuid", "name", "project_id", "user_id", "vm_state", "task_state", "host", "node", "availability_zone",
            "created_at", "updated_at", "launched_at", "deleted_at")
_DETAIL = ("flavor", "image", "locked_by", "locked_reason")
SCALARS = frozenset(_SCALARS)
DETAIL = SCALARS | frozenset(_DETAIL)  # everything a detail body shows
FLAVOR_IMAGE = SCALARS | {"flavor", "image"}  # what the API's row checks need, the flavor and image filters too


def order_columns(order: tuple[SortKey, ...]) -> frozenset[str]:
    """The least a page needs: its id and name (the index body) and its sort columns."""
    return frozenset({"uuid", "name", *("vm_state" if k.column == "power_state" else k.column for k in order)})


class ListQuery(msgspec.Struct, frozen=True, kw_only=True):
    filters: ListFilters
    order: tuple[SortKey, ...]               # complete: ends in uuid
    after: tuple | None = None               # the sort values of the position to start after
    limit: int
    columns: frozenset[str] = SCALARS        # what to read (the rows' other fields are None)


class ListedRow(msgspec.Struct, frozen=True):
    """What a listing sorts, filters and shows a server by (a cell's row, or
    a server the API database still holds as a build request). Fields in
    ``_SCALARS`` then ``_DETAIL`` order: a row of ``page``'s SELECT builds
    one positionally. A field whose column the query did not read is None,
    whatever its type says."""
    uuid: str
    name: str
    project_id: str
    user_id: str
    vm_state: str
    task_state: str | None
    host: str | None
    node: str | None
    availability_zone: str | None
    created_at: dt.datetime
    updated_at: dt.datetime
    launched_at: dt.datetime | None
    deleted_at: dt.datetime | None
    flavor_json: str | None = None   # read only with "flavor" in ListQuery.columns
    image_json: str | None = None    # (None too: no image)
    locked_by: str | None = None
    locked_reason: str | None = None
    cell: str | None = None          # None: a build request

    @property
    def power_state(self) -> int:
        return 1 if self.vm_state in _POWERED else 0

    @property
    def flavor(self) -> Flavor | None:
        return flavor_of(self.flavor_json) if self.flavor_json is not None else None

    @property
    def flavor_name(self) -> str | None:
        return self.flavor.name if self.flavor_json is not None else None

    @property
    def image_id(self) -> str | None:
        return image_id_of(self.image_json) if self.image_json else None


def sort_values(row: ListedRow, order: tuple[SortKey, ...]) -> tuple:
    """``row``'s values for ``order``: what ``ListQuery.after`` holds."""
    return tuple(getattr(row, key.column) for key in order)


_flavor = typeinfo.decoder(Flavor).decode
_image = typeinfo.decoder(Image).decode
_enc = msgspec.json.Encoder().encode


# A fleet has few flavors and images, and rows hold them as the same few
# texts: each is decoded once (Flavor and Image are frozen; nothing changes them).
@functools.lru_cache(maxsize=512)
def flavor_of(text: str) -> Flavor:
    return _flavor(text)


@functools.lru_cache(maxsize=512)
def image_id_of(text: str) -> str:
    return _image(text).id


def as_json(value: Flavor | Image | None) -> str | None:
    """A flavor or image as a row holds it (a build request's, a record's)."""
    return _enc(value).decode() if value is not None else None


def _expression(column: str, postgres: bool) -> ColumnElement:
    if column == "power_state":
        return case((_c.vm_state.in_(_POWERED), 1), else_=0)
    col = getattr(_c, column)
    if postgres and column in _TEXT and column not in _PLAIN_TEXT:
        return col.collate("C")
    return col


def nullable(column: str) -> bool:
    return column != "power_state" and getattr(_c, column).nullable


def _after(order: tuple[SortKey, ...], nulls: tuple[bool, ...], postgres: bool, row_values: bool) -> ColumnElement:
    """Rows strictly after the position whose sort values are the bound
    parameters ``after_0``, ``after_1``… (``nulls``: which of them are NULL,
    which changes the condition's shape). For each key: equal on the keys
    before it and after on it. The first key also bounds the scan on its
    own, so that an index on it starts at the position instead of reading
    everything before it. Where the keys all go one way and none is NULL,
    and the backend takes it (``row_values``), one row-value comparison says
    the same: PostgreSQL then walks an index on the keys from the position
    (the OR of the branches makes it misjudge how many rows match, and sort
    them all instead: 10 ms a page deep in a cell of 25,000, against 0.6)."""
    exprs0 = [_expression(k.column, postgres) for k in order]
    values = [bindparam(f"after_{i}", None, type_=e.type) for i, e in enumerate(exprs0)]
    if row_values and not any(nulls) and len({k.descending for k in order}) == 1 \
            and not any(nullable(k.column) for k in order):
        mine, theirs = tuple_(*exprs0), tuple_(*values)
        return mine < theirs if order[0].descending else mine > theirs

    def equal(expr, v, is_null):
        return expr.is_(None) if is_null else expr == v

    def beyond(expr, may_be_null, descending, v, is_null):
        if is_null:  # NULLs come first ascending: everything not NULL is after
            return expr.is_not(None) if not descending else false()
        if descending:
            return or_(expr < v, expr.is_(None)) if may_be_null else expr < v
        return expr > v

    exprs = [(e, nullable(k.column), k.descending) for e, k in zip(exprs0, order)]
    branches = []
    for i, (expr, may_be_null, descending) in enumerate(exprs):
        same = [equal(e, v, n) for (e, _, _), v, n in zip(exprs[:i], values[:i], nulls[:i])]
        branches.append(and_(*same, beyond(expr, may_be_null, descending, values[i], nulls[i])))
    condition = or_(*branches)
    expr, may_be_null, descending = exprs[0]
    if not nulls[0] and not may_be_null:
        condition = and_(expr <= values[0] if descending else expr >= values[0], condition)
    elif not nulls[0] and not descending:
        condition = and_(expr >= values[0], condition)
    return condition


# The filters whose value is a bound parameter of the same name (their
# presence, not their value, shapes the statement).
_BOUND_FILTERS = ("project_id", "host", "node", "availability_zone", "updated_from", "updated_until")


def _where(f: ListFilters) -> list[ColumnElement]:
    conds: list[ColumnElement] = []
    if f.project_id is not None:
        conds.append(_c.project_id == bindparam("project_id", None, type_=_c.project_id.type))
    if f.deleted is True:
        conds.append(_c.vm_state == "deleted")
    elif f.deleted is False:
        conds.append(_c.vm_state != "deleted")
    if f.states is not None:
        conds.append(or_(false(), *(and_(_c.vm_state == s.vm_state,
                                         _c.task_state.is_(None) if s.task_state is None
                                         else _c.task_state == s.task_state) for s in f.states)))
    for column in ("host", "node", "availability_zone"):
        if getattr(f, column) is not None:
            col = getattr(_c, column)
            conds.append(col == bindparam(column, None, type_=col.type))
    if f.updated_from is not None:
        conds.append(_c.updated_at >= bindparam("updated_from", None, type_=_c.updated_at.type))
    if f.updated_until is not None:
        conds.append(_c.updated_at < bindparam("updated_until", None, type_=_c.updated_at.type))
    return conds


class _Shape(msgspec.Struct, frozen=True):
    """What a listing's SELECT looks like apart from its parameters' values:
    the key of the statements built once (``_prepared``)."""
    dialect: str
    order: tuple[SortKey, ...]
    columns: frozenset[str]
    after_nulls: tuple[bool, ...] | None   # None: from the start
    filters: ListFilters                   # with the bound filters' values replaced by a placeholder


_PLACEHOLDER = {"project_id": "", "host": "", "node": "", "availability_zone": "",
                "updated_from": dt.datetime(1970, 1, 1), "updated_until": dt.datetime(1970, 1, 1)}


def _shape(query: ListQuery, dialect: str) -> _Shape:
    f = query.filters
    shaped = msgspec.structs.replace(f, **{name: _PLACEHOLDER[name] for name in _BOUND_FILTERS
                                           if getattr(f, name) is not None})
    nulls = tuple(v is None for v in query.after) if query.after is not None else None
    return _Shape(dialect, query.order, query.columns, nulls, shaped)


def _parameters(query: ListQuery) -> dict:
    params = {name: value for name in _BOUND_FILTERS if (value := getattr(query.filters, name)) is not None}
    if query.after is not None:
        params.update((f"after_{i}", v) for i, v in enumerate(query.after) if v is not None)
    params["page_limit"] = query.limit
    return params


def _build(shape: _Shape):
    postgres = shape.dialect == "postgresql"
    wanted = shape.columns | order_columns(shape.order)
    # (a column not wanted is a NULL in its place: the rows stay positional)
    names = _SCALARS + _DETAIL if wanted - SCALARS else _SCALARS
    columns = [getattr(_c, name) if name in wanted else null().label(name) for name in names]
    stmt = select(*columns).where(true(), *_where(shape.filters))
    if shape.after_nulls is not None:
        stmt = stmt.where(_after(shape.order, shape.after_nulls, postgres, row_values=shape.dialect in _ROW_VALUES))
    ordering = []
    for key in shape.order:
        expr = _expression(key.column, postgres)
        by = expr.desc() if key.descending else expr.asc()
        if postgres and nullable(key.column):  # PostgreSQL's NULLs sort high; the others' low, as promised
            by = by.nulls_last() if key.descending else by.nulls_first()
        ordering.append(by)
    return stmt.order_by(*ordering).limit(bindparam("page_limit", None))


class _Prepared(msgspec.Struct, frozen=True):
    statement: object            # the SQLAlchemy SELECT, its values bound parameters
    sql: str | None              # PostgreSQL: its text in the driver's paramstyle, for ``fetch_all``
    defaults: dict               # the values bound in the text itself (the IN lists, the states)


@functools.lru_cache(maxsize=256)
def _prepared(shape: _Shape, dialect) -> _Prepared:
    """Built and compiled once per shape: building the SELECT (and, for the
    driver, compiling it) cost more than a cell's read of a page."""
    stmt = _build(shape)
    if shape.dialect != "postgresql":
        return _Prepared(stmt, None, {})
    compiled = stmt.compile(dialect=dialect, compile_kwargs={"render_postcompile": True})
    return _Prepared(stmt, compiled.string, {k: v for k, v in compiled.params.items() if v is not None})


def page(engine: Engine, query: ListQuery, *, cell: str) -> list[ListedRow]:
    """At most ``query.limit`` of the cell's instances that pass its filters,
    in its order, after ``query.after``; one read (on PostgreSQL one
    statement through the driver: ``billeting.common.db.rawread``)."""
    prepared = _prepared(_shape(query, engine.dialect.name), engine.dialect)
    params = _parameters(query)
    if prepared.sql is not None:
        rows = fetch_all(engine, prepared.sql, {**prepared.defaults, **params})
    else:
        rows = run_read(engine, lambda conn: conn.execute(prepared.statement, params).all())
    return [ListedRow(*row, cell=cell) for row in rows]


def present(engine: Engine, uuids: list[str]) -> set[str]:
    """Which of ``uuids`` the cell holds (a server handed to a cell while
    its build request was being read shows once, from the cell)."""
    found: set[str] = set()
    for start in range(0, len(uuids), 500):
        chunk = uuids[start:start + 500]
        found.update(run_read(engine, lambda conn: conn.execute(
            select(_c.uuid).where(_c.uuid.in_(chunk))).scalars().all()))
    return found


def naive_utc(value: dt.datetime) -> dt.datetime:
    """``value`` as the cells store times: naive UTC."""
    return value.astimezone(dt.timezone.utc).replace(tzinfo=None) if value.tzinfo else value

