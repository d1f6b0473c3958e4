"""Finding servers across the cells: mapping → cell → record, or the build request."""
from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from billeting.api.compute.context import ComputeAPIDeps, RequestContext
from billeting.api.compute.errors import not_found
from billeting.apidb import build_requests, instance_mappings
from billeting.apidb.build_requests import BuildRequest
from billeting.apidb.instance_mappings import InstanceMapping
from billeting.cells import instances as inst
from billeting.cells.instances import InstanceRecord


@dataclasses.dataclass(frozen=True)
class Found:
    mapping: InstanceMapping
    record: InstanceRecord | None       # None while only the build request exists
    build_request: BuildRequest | None

    @property
    def cell(self) -> str | None:
        return self.mapping.cell


def find(deps: ComputeAPIDeps, ctx: RequestContext, uuid: str, *, include_deleted: bool = False) -> Found:
    """The server, or 404 (also for another project's server, unless admin)."""
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
    record = inst.get(engine, mapping.instance_uuid) if engine is not None else None
    if record is None:
        # The conductor is between setting the cell and writing the record.
        br = build_requests.get(deps.api_engine, mapping.instance_uuid)
        if br is None:
            raise missing
        return Found(mapping, None, br)
    if record.vm_state.value == "deleted" and not include_deleted:
        raise missing
    return Found(mapping, record, None)


def find_many(deps: ComputeAPIDeps, mappings: Iterable[InstanceMapping]) -> list[Found]:
    """Every mapped server's record or build request (one read per cell)."""
    by_cell: dict[str | None, list[InstanceMapping]] = {}
    for m in mappings:
        by_cell.setdefault(m.cell, []).append(m)
    found: list[Found] = []
    unplaced = list(by_cell.pop(None, []))
    for cell, ms in by_cell.items():
        engine = deps.cells.engine_of(cell) if cell else None
        records = inst.get_many(engine, [m.instance_uuid for m in ms]) if engine is not None else {}
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


def _placed_since(deps: ComputeAPIDeps, uuid: str) -> Found | None:
    mapping = instance_mappings.get(deps.api_engine, uuid)
    if mapping is None or mapping.cell is None:
        return None
    engine = deps.cells.engine_of(mapping.cell)
    record = inst.get(engine, uuid) if engine is not None else None
    return Found(mapping, record, None) if record is not None else None
