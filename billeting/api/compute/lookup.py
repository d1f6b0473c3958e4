"""Finding servers across the cells: mapping → cell → record, or the build request.

Every read of a cell goes through ``read_cell`` (the cell's health guard):
a cell that does not answer makes ``find`` answer 503 in a second or two,
or — where the caller can show what the API database knows (``partial``,
microversion 2.69) — a ``Found`` with ``cell_down`` set."""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import TypeVar

from billeting.api.compute.context import ComputeAPIDeps, RequestContext
from billeting.api.compute.errors import NovaError, not_found
from billeting.apidb import build_requests, instance_mappings
from billeting.apidb.build_requests import BuildRequest
from billeting.apidb.instance_mappings import InstanceMapping
from billeting.cells import instances as inst
from billeting.cells.health import CellUnavailable
from billeting.cells.instances import InstanceRecord

T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class Found:
    mapping: InstanceMapping
    record: InstanceRecord | None       # None while only the build request exists
    build_request: BuildRequest | None
    # Its cell did not answer: only what the API database knows can be shown.
    cell_down: bool = False

    @property
    def cell(self) -> str | None:
        return self.mapping.cell


def read_cell(deps: ComputeAPIDeps, cell: str, work: Callable[[], T]) -> T:
    """``work()``, a read of ``cell``'s database, under its health guard
    (raises CellUnavailable fast when the cell does not answer)."""
    return deps.cells.read(cell, work)


def cell_unavailable(exc: CellUnavailable) -> NovaError:
    """The 503 of a request that needs a cell that does not answer."""
    return NovaError(503, f"The server's cell ({exc.cell}) is unavailable: its database does not answer. "
                          "Please retry later.")


def find(deps: ComputeAPIDeps, ctx: RequestContext, uuid: str, *, include_deleted: bool = False,
         partial: bool = False) -> Found:
    """The server, or 404 (also for another project's server, unless admin).
    When its cell does not answer: 503, or with ``partial`` a ``Found``
    with ``cell_down`` (no record, no build request)."""
    missing = not_found(f"Instance {uuid} could not be found.")
    mapping = instance_mappings.get(deps.api_engine, uuid.lower())
    if mapping is None or (not ctx.is_admin and mapping.project_id != ctx.project_id):
        raise missing
    if mapping.cell is None:
        br = build_requests.get(deps.api_engine, mapping.instance_uuid)
        if br is not None:
            return Found(mapping, None, br)
        # Handed to a cell between the two reads (the super conductor writes
        # the record, then the mapping's cell, then drops the build request):
        # the mapping read again has its cell.
        mapping = instance_mappings.get(deps.api_engine, mapping.instance_uuid)
        if mapping is None or mapping.cell is None:
            raise missing
    engine = deps.cells.engine_of(mapping.cell)
    try:
        record = read_cell(deps, mapping.cell, lambda: inst.get(engine, mapping.instance_uuid)) \
            if engine is not None else None
    except CellUnavailable as exc:
        if partial:
            return Found(mapping, None, None, cell_down=True)
        raise cell_unavailable(exc) from None
    if record is None:
        # The conductor is between setting the cell and writing the record.
        br = build_requests.get(deps.api_engine, mapping.instance_uuid)
        if br is None:
            raise missing
        return Found(mapping, None, br)
    if record.vm_state.value == "deleted" and not include_deleted:
        raise missing
    return Found(mapping, record, None)


def find_many(deps: ComputeAPIDeps, mappings: Iterable[InstanceMapping], *,
              include_down: bool = False) -> list[Found]:
    """Every mapped server's record or build request (one read per cell).
    The servers of a cell that does not answer are left out, or with
    ``include_down`` given as ``Found``s with ``cell_down`` set."""
    by_cell: dict[str | None, list[InstanceMapping]] = {}
    for m in mappings:
        by_cell.setdefault(m.cell, []).append(m)
    found: list[Found] = []
    unplaced = list(by_cell.pop(None, []))
    for cell, ms in by_cell.items():
        try:
            records = cell_records(deps, cell, [m.instance_uuid for m in ms])
        except CellUnavailable:
            if include_down:
                found.extend(Found(m, None, None, cell_down=True) for m in ms)
            continue
        for m in ms:
            if m.instance_uuid in records:
                found.append(Found(m, records[m.instance_uuid], None))
            else:
                unplaced.append(m)
    brs = build_requests.get_many(deps.api_engine, [m.instance_uuid for m in unplaced])
    found.extend(Found(m, None, brs[m.instance_uuid]) for m in unplaced if m.instance_uuid in brs)
    # Handed to a cell after the mappings were read (record written, build
    # request deleted): read the mapping again rather than lose the server.
    for m in unplaced:
        if m.instance_uuid not in brs:
            moved = _placed_since(deps, m.instance_uuid)
            if moved is not None:
                found.append(moved)
    return found


def cell_records(deps: ComputeAPIDeps, cell: str, uuids: list[str]) -> dict[str, InstanceRecord]:
    """The records of ``uuids`` that ``cell`` holds: the one per-cell read of
    a listing (raises CellUnavailable when the cell does not answer)."""
    engine = deps.cells.engine_of(cell)
    if engine is None:
        return {}
    return read_cell(deps, cell, lambda: inst.get_many(engine, uuids))


def _placed_since(deps: ComputeAPIDeps, uuid: str) -> Found | None:
    mapping = instance_mappings.get(deps.api_engine, uuid)
    if mapping is None or mapping.cell is None:
        return None
    try:
        records = cell_records(deps, mapping.cell, [uuid])
    except CellUnavailable:
        return None
    record = records.get(uuid)
    return Found(mapping, record, None) if record is not None else None
