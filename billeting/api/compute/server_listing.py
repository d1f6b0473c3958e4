"""``GET /servers`` and ``/servers/detail`` across cells, at the cost of a
page rather than of the fleet.

Every cell is asked for its first rows in the listing's order after the
marker's sort values, with what SQL can filter on applied there
(``cells.listing``); the servers the API database still holds as build
requests are another, short, stream. The streams are merged on the sort key
(it ends in the uuid, so the order is total) and cut at ``limit``: a page
reads about ``limit`` rows per cell whatever the total. Filters SQL cannot
say (the name's regular expression, the flavor and the image, kept as
JSON) are checked here on each row, and a cell whose rows they thin is read
on in further batches from where the last one stopped. A cell's read takes
only the columns the page needs (a detail page: what its bodies show), so
the page's bodies are built from the rows merged, without another read.
When every filter is in SQL, each cell's first batch is exact and the
batches are merged by sorting them together (``_sorted``), which costs a
few C-level sorts rather than a Python comparison per row.
"""
from __future__ import annotations

import dataclasses
import datetime as dt
import heapq
import itertools
import logging
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from operator import attrgetter

from billeting.api.compute import name_filter, paging, partial, views
from billeting.api.compute.context import ComputeAPIDeps, RequestContext
from billeting.api.compute.errors import NovaError, bad_request
from billeting.api.compute.lookup import Found, find, read_cell
from billeting.apidb import build_requests, instance_mappings
from billeting.apidb.build_requests import BuildRequest
from billeting.apidb.instance_mappings import InstanceMapping
from billeting.cells import instances as inst
from billeting.cells import listing as cell_listing
from billeting.cells.health import CellUnavailable
from billeting.cells.listing import ListedRow, ListFilters, ListQuery, SortKey, StatePair

LOG = logging.getLogger(__name__)
# Rows one cell read returns at most: a listing without a limit, or one
# whose filters keep few rows, is read in batches of this many.
MAX_BATCH = 5000
_SECOND = dt.timedelta(seconds=1)


@dataclasses.dataclass(frozen=True)
class ListingFilters:
    """Everything a listing keeps, checked exactly on a row (``keeps``);
    ``sql`` is the part each cell applies itself."""
    sql: ListFilters
    since: dt.datetime | None
    before: dt.datetime | None
    statuses: frozenset[str] | None
    name: Callable[[str], bool] | None
    flavor_names: frozenset[str] | None
    image: str | None

    @property
    def needs_flavor_image(self) -> bool:
        return self.flavor_names is not None or self.image is not None

    @property
    def all_in_sql(self) -> bool:
        """Whether a cell's rows need no further check (its batches are then exact)."""
        return (self.name is None and not self.needs_flavor_image and self.since is None
                and self.before is None)

    def keeps(self, row: ListedRow) -> bool:
        f = self.sql
        if f.project_id is not None and row.project_id != f.project_id:
            return False
        if f.deleted is not None and (row.vm_state == "deleted") != f.deleted:
            return False
        if self.statuses is not None and views.status(row.vm_state, row.task_state) not in self.statuses:
            return False
        if f.host is not None and row.host != f.host:
            return False
        if f.node is not None and row.node != f.node:
            return False
        if f.availability_zone is not None and (row.availability_zone or "") != f.availability_zone:
            return False
        if (self.since is not None or self.before is not None) and \
                not paging.in_window(views.iso(row.updated_at), self.since, self.before):
            return False
        if self.flavor_names is not None and row.flavor_name not in self.flavor_names:
            return False
        if self.image is not None and not (row.image_id and row.image_id == self.image):
            return False
        return self.name is None or self.name(row.name)


def _state_pairs(wanted: frozenset[str]) -> tuple[StatePair, ...]:
    """Every (vm_state, task_state) whose status is one of ``wanted``: the
    status filter in terms a cell's SQL can say."""
    tasks = [None, *(ts.value for ts in inst.TaskState)]
    return tuple(StatePair(vm_state=vm.value, task_state=task) for vm in inst.VmState for task in tasks
                 if views.status(vm.value, task) in wanted)


def filters_of(ctx: RequestContext, params, *, project: str | None, deleted: bool | None, statuses: set[str],
               flavor_ids: dict[str, str]) -> ListingFilters:
    """The query's filters; every bad one is refused here, before anything is
    read. ``flavor_ids``: flavor name → id where bodies show flavor ids."""
    since, before = paging.time_window(params, changes_before=ctx.version.at_least(66))
    name = name_filter.matcher(params["name"]) if params.get("name") else None
    wanted_statuses = frozenset(statuses) if params.get("status") else None
    host = node = None
    if params.get("host"):
        ctx.authorize("os_compute_api:servers:allow_all_filters")
        host = params["host"]
    if params.get("node"):
        ctx.authorize("os_compute_api:servers:allow_all_filters")
        node = params["node"]
    flavor_names = None
    if params.get("flavor"):
        flavor = params["flavor"]
        # A server's flavor is its name; before 2.47 its body also shows the
        # flavor's id, which the filter may name instead.
        flavor_names = frozenset({flavor, *(n for n, fid in flavor_ids.items() if fid == flavor)})
    sql = ListFilters(
        project_id=project, deleted=deleted,
        states=_state_pairs(wanted_statuses) if wanted_statuses is not None else None, host=host, node=node,
        availability_zone=params.get("availability_zone") or None,
        # a superset of the window (bodies show whole seconds): ``keeps`` is exact
        updated_from=cell_listing.naive_utc(since).replace(microsecond=0) if since is not None else None,
        updated_until=(cell_listing.naive_utc(before).replace(microsecond=0) + _SECOND
                       if before is not None else None))
    return ListingFilters(sql=sql, since=since, before=before, statuses=wanted_statuses, name=name,
                          flavor_names=flavor_names, image=params.get("image") or None)


# --- the order ----------------------------------------------------------------------

class _Descending:
    """A sort value that orders the other way round (heapq.merge takes one key)."""
    __slots__ = ("value",)

    def __init__(self, value) -> None:
        self.value = value

    def __lt__(self, other: _Descending) -> bool:
        return other.value < self.value

    def __eq__(self, other) -> bool:
        return self.value == other.value


def position(order: tuple[SortKey, ...], values: tuple) -> tuple:
    """Sort values (``cells.listing.sort_values``) as one Python key that
    agrees with the cells' SQL: NULLs first ascending, last descending."""
    parts = []
    for k, v in zip(order, values):
        part = (v is not None, v if v is not None else 0)
        parts.append(_Descending(part) if k.descending else part)
    return tuple(parts)


def merge_key(order: tuple[SortKey, ...]) -> Callable[[ListedRow], tuple]:
    return lambda row: position(order, cell_listing.sort_values(row, order))


def _nulls_low(column: str) -> Callable[[ListedRow], tuple]:
    get = attrgetter(column)

    def key(row: ListedRow) -> tuple:
        v = get(row)
        return (v is not None, v if v is not None else 0)
    return key


def _sorted(rows: list[ListedRow], order: tuple[SortKey, ...]) -> list[ListedRow]:
    """``rows`` in ``order`` (the same as ``merge_key``'s): a stable sort per
    run of keys that go the same way, the least significant run first (the
    default order is one run: one sort, which finds each cell's rows in
    order already and only merges them); a column that may be NULL sorts on
    (not NULL, value), as ``position`` does."""
    runs: list[list[SortKey]] = []
    for key in order:
        if runs and runs[-1][0].descending == key.descending:
            runs[-1].append(key)
        else:
            runs.append([key])
    for run in reversed(runs):
        if not any(cell_listing.nullable(k.column) for k in run):
            by = attrgetter(*(k.column for k in run))
        elif len(run) == 1:
            by = _nulls_low(run[0].column)
        else:
            parts = [_nulls_low(k.column) if cell_listing.nullable(k.column) else attrgetter(k.column)
                     for k in run]
            by = lambda row, parts=parts: tuple(part(row) for part in parts)  # noqa: E731
        rows.sort(key=by, reverse=run[0].descending)
    return rows


# --- rows from the build requests, the cells and the marker ---------------------------

def row_of_build_request(br: BuildRequest) -> ListedRow:
    return ListedRow(uuid=br.instance_uuid, name=br.name, project_id=br.project_id, user_id=br.user_id,
                     vm_state="building", task_state="scheduling", host=None, node=None,
                     availability_zone=br.availability_zone, created_at=br.created_at, updated_at=br.created_at,
                     launched_at=None, deleted_at=None, flavor_json=cell_listing.as_json(br.flavor),
                     image_json=cell_listing.as_json(br.image), cell=None)


def row_of_record(record: inst.InstanceRecord, cell: str | None) -> ListedRow:
    return ListedRow(uuid=record.uuid, name=record.name, project_id=record.project_id, user_id=record.user_id,
                     vm_state=record.vm_state.value,
                     task_state=record.task_state.value if record.task_state is not None else None,
                     host=record.host, node=record.node, availability_zone=record.availability_zone,
                     created_at=record.created_at, updated_at=record.updated_at, launched_at=record.launched_at,
                     deleted_at=record.deleted_at, flavor_json=cell_listing.as_json(record.flavor),
                     image_json=cell_listing.as_json(record.image), locked_by=record.locked_by,
                     locked_reason=record.locked_reason, cell=cell)


def cell_page(deps: ComputeAPIDeps, cell: str, query: ListQuery) -> list[ListedRow]:
    """One read of one cell's share of a listing, under the cell's health
    guard (raises CellUnavailable when the cell does not answer)."""
    engine = deps.cells.engine_of(cell)
    if engine is None:
        return []
    return read_cell(deps, cell, lambda: cell_listing.page(engine, query, cell=cell))


def _cell_stream(deps: ComputeAPIDeps, cell: str, query: ListQuery, filters: ListingFilters,
                 first: list[ListedRow]) -> Iterator[ListedRow]:
    """The cell's rows that the listing keeps, in order, read batch by batch
    from where the previous batch ended; ``first`` is the first batch, read already."""
    rows = first
    exact = filters.all_in_sql
    while True:
        for row in rows:
            if exact or filters.keeps(row):
                yield row
        if len(rows) < query.limit:
            return
        # thinned by the checks here: the next batches are bigger
        grown = query.limit if filters.all_in_sql else min(query.limit * 4, MAX_BATCH)
        query = ListQuery(filters=query.filters, order=query.order,
                          after=cell_listing.sort_values(rows[-1], query.order), limit=grown,
                          columns=query.columns)
        try:
            rows = cell_page(deps, cell, query)
        except CellUnavailable:  # gone down under this listing: what it showed stays shown
            LOG.warning("listing: cell %s stopped answering after its first rows", cell)
            return


def _build_requests(deps: ComputeAPIDeps, filters: ListingFilters) -> list[ListedRow]:
    """The servers the API database holds as build requests that the
    listing keeps (some may have reached their cell since: see
    ``_first_batches``)."""
    if filters.sql.deleted is True:
        return []
    brs = build_requests.listing(deps.api_engine, project_id=filters.sql.project_id)
    return [r for r in map(row_of_build_request, brs) if filters.keeps(r)]


@dataclasses.dataclass(frozen=True)
class _FirstBatch:
    rows: list[ListedRow]
    placed: set[str]   # which of the build requests' servers the cell holds
    down: bool = False  # the cell did not answer


def _first_batches(deps: ComputeAPIDeps, cells: list[str], query: ListQuery,
                   building: list[ListedRow]) -> dict[str, _FirstBatch]:
    """Each cell's first batch, and which servers of ``building`` it holds
    (handed over since the build requests were read: listed from the cell),
    the cells read side by side so that a page waits for the slowest cell,
    not for all of them in turn."""
    uuids = [r.uuid for r in building]

    def read(cell: str) -> _FirstBatch:
        engine = deps.cells.engine_of(cell)
        try:
            placed = read_cell(deps, cell, lambda: cell_listing.present(engine, uuids)) \
                if uuids and engine is not None else set()
            return _FirstBatch(rows=cell_page(deps, cell, query), placed=placed)
        except CellUnavailable:
            return _FirstBatch(rows=[], placed=set(), down=True)

    if len(cells) == 1:
        return {cells[0]: read(cells[0])}
    return dict(zip(cells, _readers().map(read, cells)))


_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()
# Cell reads in flight at once for all listings of the process (each holds
# a pooled connection of its cell while it runs).
READERS = 16


def _readers() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=READERS, thread_name_prefix="cell-listing")
        return _pool


def marker_row(deps: ComputeAPIDeps, ctx: RequestContext, marker: str, filters: ListingFilters, *,
               shows_down: bool) -> ListedRow | Found:
    """The marker's row, or its ``Found`` when its cell is down (and the
    listing shows such servers); a 400 unless it is a server the listing keeps."""
    missing = bad_request(f"marker [{marker}] not found")
    try:
        found = find(deps, ctx, marker, include_deleted=True, partial=True)
    except NovaError as exc:
        if exc.status == 404:
            raise missing from None
        raise
    if found.cell_down:
        if not shows_down or found.mapping.instance_uuid != marker or (
                filters.sql.project_id is not None and found.mapping.project_id != filters.sql.project_id):
            raise missing
        return found
    row = (row_of_record(found.record, found.cell) if found.record is not None
           else row_of_build_request(found.build_request))
    if row.uuid != marker or not filters.keeps(row):
        raise missing
    return row


@dataclasses.dataclass(frozen=True)
class ListedPage:
    rows: list[ListedRow]        # the page's servers, in order
    more: bool                   # whether the listing goes on after them
    down: list[Found] = dataclasses.field(default_factory=list)  # then servers of cells that are down


def columns_of(filters: ListingFilters, order: tuple[SortKey, ...], *, detail: bool) -> frozenset[str]:
    """What a cell's read of the listing takes: a detail page what its
    bodies show; rows checked here every scalar (and the flavor and image
    when filtered on); otherwise the uuid, the name and the sort columns."""
    if detail:
        return cell_listing.DETAIL
    if not filters.all_in_sql:
        return cell_listing.FLAVOR_IMAGE if filters.needs_flavor_image else cell_listing.SCALARS
    return cell_listing.order_columns(order)


def list_servers(deps: ComputeAPIDeps, ctx: RequestContext, *, filters: ListingFilters,
                 order: tuple[SortKey, ...], marker: str | None, limit: int | None,
                 shows_down: bool = False, detail: bool = False) -> ListedPage:
    """The page of the listing after ``marker`` (None: from the start), of at
    most ``limit`` servers (None: all); ``detail``: rows with every column a
    detail body shows. With ``shows_down``, the servers of cells that do not
    answer follow all the others (oldest first), as the API database knows
    them."""
    after = None
    key = merge_key(order)
    down_marker: Found | None = None
    if marker is not None:
        place = marker_row(deps, ctx, marker, filters, shows_down=shows_down)
        if isinstance(place, Found):
            down_marker = place
        else:
            after = cell_listing.sort_values(place, order)
    wanted = None if limit is None else min(limit, sys.maxsize - 1) + 1  # one more tells whether a next page exists
    if wanted == 1:
        return ListedPage(rows=[], more=False)
    cells = sorted(deps.cells.all_engines())
    if down_marker is not None:  # every other server came before it
        down = _down_servers(deps, filters, set(deps.cells.health.down_cells()) & set(cells), down_marker)
        return _cut([], down, wanted)
    # The build requests first: a server handed to its cell meanwhile is then in the cell's read.
    building = _build_requests(deps, filters)
    if after is not None:
        start = position(order, after)
        building = [r for r in building if start < key(r)]
    batch = min(wanted or MAX_BATCH, MAX_BATCH)
    query = ListQuery(filters=filters.sql, order=order, after=after, limit=batch,
                      columns=columns_of(filters, order, detail=detail))
    firsts = _first_batches(deps, cells, query, building)
    # (a server handed over between a cell's two reads is in its batch too)
    placed = set().union(*(f.placed | {row.uuid for row in f.rows} for f in firsts.values()))
    building = [r for r in building if r.uuid not in placed]
    answered = [firsts[cell].rows for cell in cells if not firsts[cell].down]
    whole = filters.all_in_sql and wanted is not None and batch >= wanted
    if all(whole or len(first) < batch for first in answered):
        # Each cell's first batch holds all it can add to the page: one sort.
        exact = filters.all_in_sql
        kept = building + [row for first in answered for row in first if exact or filters.keeps(row)]
        rows = _sorted(kept, order)[:wanted]
    else:
        streams = [_cell_stream(deps, cell, query, filters, firsts[cell].rows) for cell in cells
                   if not firsts[cell].down]
        merged = heapq.merge(sorted(building, key=key), *streams, key=key)
        rows = list(itertools.islice(merged, wanted)) if wanted is not None else list(merged)
    down_cells = {cell for cell, first in firsts.items() if first.down}
    down = _down_servers(deps, filters, down_cells, None) if shows_down and down_cells and (
        wanted is None or len(rows) < wanted) else []
    return _cut(rows, down, wanted)


def _cut(rows: list[ListedRow], down: list[Found], wanted: int | None) -> ListedPage:
    """The page of ``rows`` then ``down``, cut at ``wanted`` less one."""
    if wanted is None:
        return ListedPage(rows=rows, more=False, down=down)
    down = down[:max(0, wanted - len(rows))]
    more = len(rows) + len(down) == wanted
    if more and down:
        down = down[:-1]
    elif more:
        rows = rows[:-1]
    return ListedPage(rows=rows, more=more, down=down)


def _down_servers(deps: ComputeAPIDeps, filters: ListingFilters, down_cells: set[str],
                  after: Found | None) -> list[Found]:
    """The servers of ``down_cells`` the listing's project holds, oldest
    first, after ``after``: what the API database knows of them."""
    if not down_cells:
        return []
    mappings = [m for m in instance_mappings.listing(deps.api_engine, project_id=filters.sql.project_id)
                if m.cell in down_cells]
    known = partial.known(deps.api_engine, [m.instance_uuid for m in mappings])

    def created(m: InstanceMapping) -> tuple[str, str]:
        server = known.get(m.instance_uuid)
        return (views.iso(server.created_at) if server is not None and server.created_at else "") or "", \
            m.instance_uuid

    ordered = sorted(mappings, key=created)
    if after is not None:
        uuids = [m.instance_uuid for m in ordered]
        ordered = ordered[uuids.index(after.mapping.instance_uuid) + 1:] \
            if after.mapping.instance_uuid in uuids else []
    return [Found(m, None, None, cell_down=True) for m in ordered]


def faults(deps: ComputeAPIDeps, rows: list[ListedRow]) -> dict[str, inst.Fault]:
    """The newest fault of every row whose body shows one: one read per cell."""
    by_cell: dict[str, list[str]] = {}
    for row in rows:
        if row.cell is not None and row.vm_state in views.SHOWS_FAULT:
            by_cell.setdefault(row.cell, []).append(row.uuid)
    found: dict[str, inst.Fault] = {}
    for cell, uuids in by_cell.items():
        engine = deps.cells.engine_of(cell)
        if engine is not None:
            try:
                found.update(read_cell(deps, cell, lambda: inst.latest_faults(engine, uuids)))
            except CellUnavailable:  # (gone down since its rows were read: shown without)
                pass
    return found
