"""Metadata on aggregates: tenant isolation and per-aggregate weigher multipliers.

Any Placement aggregate can be given metadata, also one whose members the
scheduler does not manage (a "plain" aggregate): ``filter_tenant_id*``
keys reserve its hosts for projects (with
``limit_tenants_to_placement_aggregate``), a key named like a multiplier
option (``ram_weight_multiplier``) overrides that weigher's multiplier for
its hosts, ``availability_zone`` puts its hosts in a zone. Domains and
zones carry metadata too; a zone keeps its ``availability_zone`` key.
"""
from __future__ import annotations

import re
from collections.abc import Mapping

from sqlalchemy.exc import IntegrityError

from billeting.apidb import aggregates as store
from billeting.apidb import generation
from billeting.apidb import snapshot as snapshot_mod
from billeting.apidb.directory import ZONE_KEY
from billeting.apidb.snapshot import Snapshot
from billeting.apidb.tables import KIND_PLAIN, KIND_ZONE
from billeting.common.db.tx import Retry, run_read, run_write
from billeting.scheduler.errors import IN_USE, NAME_CLASH, Conflict, InvalidRequest, NotFound
from billeting.scheduler.service.topology import check_name, describe
from billeting.scheduler.service.views import AggregateView, aggregate_view
from billeting.scheduler.service.zones import check_zone_name

KEY = re.compile(r"^[A-Za-z0-9_.:-]{1,255}$")


def check_metadata(metadata: Mapping[str, str]) -> None:
    for key, value in metadata.items():
        if not KEY.match(key):
            raise InvalidRequest(f"invalid metadata key {key!r}: 1 to 255 letters, digits, '-', '_', '.' or ':'")
        if len(value) > 255:
            raise InvalidRequest(f"metadata value of {key!r} is longer than 255 characters")
    if ZONE_KEY in metadata:
        check_zone_name(metadata[ZONE_KEY])


def put(service, uuid: str, *, metadata: Mapping[str, str], name: str | None = None) -> tuple[AggregateView, bool]:
    """Set the metadata (replacing it) of an aggregate; an aggregate the
    scheduler did not know becomes a plain one."""
    uuid = uuid.lower()
    check_metadata(metadata)
    if name is not None:
        check_name("aggregate", name)

    def work(conn) -> tuple[Snapshot, bool]:
        try:
            return _write(conn)
        except IntegrityError:
            raise Retry(f"aggregate {uuid} was changed concurrently") from None

    def _write(conn) -> tuple[Snapshot, bool]:
        snap = snapshot_mod.load(conn)
        agg = snap.aggregate_by_uuid(uuid)
        wanted = dict(metadata)
        if agg is not None and agg.kind != KIND_PLAIN:
            if name is not None and name != agg.name:
                raise InvalidRequest(f"aggregate {uuid} is {describe(snap, agg)}: its name is the "
                                 f"{'zone' if agg.kind == KIND_ZONE else 'domain'}'s and cannot change here")
            if agg.kind == KIND_ZONE:
                if wanted.get(ZONE_KEY, agg.name) != agg.name:
                    raise InvalidRequest(f"aggregate {uuid} is {describe(snap, agg)}: its {ZONE_KEY} stays {agg.name}")
                wanted[ZONE_KEY] = agg.name
        if name is not None:
            clash = snap.aggregate_by_name(name)
            if clash is not None and clash.uuid != uuid:
                raise Conflict(f"the name {name!r} is taken by {describe(snap, clash)}", code=NAME_CLASH)
        if agg is None:
            agg_id = store.create(conn, uuid=uuid, name=name, kind=KIND_PLAIN)
        else:
            agg_id = agg.id
            store.touch(conn, agg_id, **({"name": name} if name is not None and agg.kind == KIND_PLAIN else {}))
        store.set_metadata(conn, agg_id, wanted)
        generation.bump(conn)
        return snapshot_mod.load(conn), agg is None

    after, created = run_write(service.engine, work)
    service.directory.invalidate()
    return aggregate_view(after, after.aggregate_by_uuid(uuid)), created


def show(service, uuid: str) -> AggregateView:
    snap = run_read(service.engine, snapshot_mod.load)
    agg = snap.aggregate_by_uuid(uuid.lower())
    if agg is None:
        raise NotFound(f"the scheduler knows no aggregate {uuid}")
    return aggregate_view(snap, agg)


def list_aggregates(service) -> list[AggregateView]:
    snap = run_read(service.engine, snapshot_mod.load)
    return [aggregate_view(snap, a) for a in sorted(snap.aggregates.values(), key=lambda a: (a.kind, a.name or "",
                                                                                          a.uuid))]


def remove(service, uuid: str) -> None:
    """Forget a plain aggregate's metadata (Placement is not touched)."""
    uuid = uuid.lower()

    def work(conn) -> None:
        snap = snapshot_mod.load(conn)
        agg = snap.aggregate_by_uuid(uuid)
        if agg is None:
            raise NotFound(f"the scheduler knows no aggregate {uuid}")
        if agg.kind != KIND_PLAIN:
            raise Conflict(f"aggregate {uuid} is {describe(snap, agg)}: remove that instead", code=IN_USE)
        store.delete_aggregate(conn, agg.id)
        generation.bump(conn)

    run_write(service.engine, work)
    service.directory.invalidate()
