"""Host aggregates as Nova's ``os-aggregates`` has them: named, with hosts,
metadata and at most one availability zone each.

Each is a plain aggregate of the API database (its name and metadata, an
``availability_zone`` key for its zone, as any aggregate the scheduler
knows) whose hosts are Placement's: adding a host adds the aggregate to the
host's root provider, so what the scheduler places by (``member_of``, the
zone and tenant filters, per-aggregate multipliers) is what the aggregate
says, with no second copy of the membership to drift. Membership is read
back through the scheduler's host catalog.

Nova's rules are kept: names are unique (across zones and topology domains
too: one name, one aggregate), a host is in one zone at most, an aggregate
with hosts cannot be deleted, and a zone is never ``internal``. Zones and
domains defined through the scheduler's own API are listed like any
aggregate; only their metadata may change here.
"""
from __future__ import annotations

import datetime as dt
import uuid as uuidlib
from collections.abc import Mapping
from dataclasses import dataclass

from sqlalchemy.exc import IntegrityError

from billeting.apidb import aggregates as store
from billeting.apidb import generation
from billeting.apidb import snapshot as snapshot_mod
from billeting.apidb.directory import ZONE_KEY
from billeting.apidb.snapshot import AggregateInfo, Snapshot
from billeting.apidb.tables import KIND_PLAIN
from billeting.common.db.tx import Retry, run_read, run_write
from billeting.scheduler.catalog import HostRecord
from billeting.scheduler.service import sync
from billeting.scheduler.errors import IN_USE, NAME_CLASH, Conflict, InvalidRequest, NotFound
from billeting.scheduler.service.metadata import check_metadata
from billeting.scheduler.service.topology import describe
from billeting.scheduler.service.zones import INTERNAL_ZONE


@dataclass(frozen=True, slots=True)
class HostAggregate:
    id: int
    uuid: str
    name: str | None
    kind: str                       # "plain", or a zone or domain the scheduler's API defined
    metadata: dict[str, str]
    hosts: tuple[str, ...]          # compute service hosts whose nodes are members, sorted
    created_at: dt.datetime | None
    updated_at: dt.datetime | None

    @property
    def availability_zone(self) -> str | None:
        return self.metadata.get(ZONE_KEY)


def _view(agg: AggregateInfo, members: list[HostRecord]) -> HostAggregate:
    hosts = sorted({r.service_host for r in members})
    return HostAggregate(agg.id, agg.uuid, agg.name, agg.kind, dict(sorted(agg.metadata.items())), tuple(hosts),
                         agg.created_at, agg.updated_at)


def _find(snap: Snapshot, aggregate_id: int) -> AggregateInfo:
    agg = snap.aggregates.get(aggregate_id)
    if agg is None:
        raise NotFound(f"Aggregate {aggregate_id} could not be found.")
    return agg


def list_all(service) -> list[HostAggregate]:
    snap = run_read(service.engine, snapshot_mod.load)
    return [_view(agg, sync.member_hosts(service, agg.uuid))
            for agg in sorted(snap.aggregates.values(), key=lambda a: a.id)]


def get(service, aggregate_id: int) -> HostAggregate:
    agg = _find(run_read(service.engine, snapshot_mod.load), aggregate_id)
    return _view(agg, sync.member_hosts(service, agg.uuid))


def _check_zone(zone: str | None) -> None:
    if zone == INTERNAL_ZONE:
        raise InvalidRequest(f"The availability zone {INTERNAL_ZONE!r} is where services that are not computes are "
                         "listed: it cannot be given to an aggregate.")


def _zone_members(service, aggregate_id: int) -> list[HostRecord]:
    """The member nodes of an aggregate whose zone is about to change."""
    return sync.member_hosts(service, _find(run_read(service.engine, snapshot_mod.load), aggregate_id).uuid)


def _zones_elsewhere(service, agg_uuid: str, records: list[HostRecord]) -> dict[str, str]:
    """Service host → the zone its nodes are in through aggregates other than ``agg_uuid``."""
    directory = service.directory
    found = {}
    for record in records:
        zone = directory.zone_of(record.aggregates - {agg_uuid})
        if zone is not None:
            found[record.service_host] = zone
    return found


def _zone_clash(service, agg: AggregateInfo, zone: str | None, records: list[HostRecord]) -> list[str]:
    """Zones, other than ``zone``, that hosts of ``records`` are already in."""
    if zone is None:
        return []
    return sorted({z for z in _zones_elsewhere(service, agg.uuid, records).values() if z != zone})


def _write(service, what: str, work) -> Snapshot:
    """Run ``work(conn, snap)`` in a write transaction that bumps the
    directory generation; a concurrent change of the same names is retried."""

    def unit(conn) -> Snapshot:
        try:
            work(conn, snapshot_mod.load(conn))
        except IntegrityError:
            raise Retry(f"{what} was changed concurrently") from None
        generation.bump(conn)
        return snapshot_mod.load(conn)

    after = run_write(service.engine, unit)
    service.directory.invalidate()
    service.catalog.invalidate()
    return after


def _name_free(snap: Snapshot, name: str, aggregate_id: int | None = None) -> None:
    clash = snap.aggregate_by_name(name)
    if clash is not None and clash.id != aggregate_id:
        raise Conflict(f"Aggregate {name} already exists.", code=NAME_CLASH)


def create(service, name: str, zone: str | None = None) -> HostAggregate:
    _check_zone(zone)
    made: list[int] = []

    def work(conn, snap: Snapshot) -> None:
        _name_free(snap, name)
        made[:] = [store.create(conn, uuid=str(uuidlib.uuid4()), name=name, kind=KIND_PLAIN)]
        if zone is not None:
            store.set_metadata(conn, made[0], {ZONE_KEY: zone})

    after = _write(service, f"aggregate {name}", work)
    return _view(_find(after, made[0]), [])


def _plain(snap: Snapshot, agg: AggregateInfo, action: str) -> None:
    if agg.kind != KIND_PLAIN:
        raise InvalidRequest(f"Cannot {action} aggregate {agg.id}: it is {describe(snap, agg)}, defined through the "
                         "scheduler's API; change it there.")


def update(service, aggregate_id: int, changes: Mapping[str, str | None]) -> HostAggregate:
    """Nova's update: a new ``name`` and/or ``availability_zone`` (None takes the zone away)."""
    zone = {ZONE_KEY: changes[ZONE_KEY]} if ZONE_KEY in changes else {}
    return _change(service, aggregate_id, "update", zone, name=changes.get("name"), plain_only=True)


def set_metadata(service, aggregate_id: int, changes: Mapping[str, str | None]) -> HostAggregate:
    """Nova's ``set_metadata``: given keys set, keys given ``None`` removed, others kept."""
    check_metadata({k: v for k, v in changes.items() if v is not None})
    return _change(service, aggregate_id, "update metadata of", changes)


def _change(service, aggregate_id: int, action: str, changes: Mapping[str, str | None], *,
            name: str | None = None, plain_only: bool = False) -> HostAggregate:
    """Merge ``changes`` into the metadata (None removes a key) and rename,
    in one transaction; a zone change is checked against the members' other zones."""
    zone_given = ZONE_KEY in changes
    zone = changes.get(ZONE_KEY)
    _check_zone(zone)
    members = _zone_members(service, aggregate_id) if zone_given and zone is not None else []

    def work(conn, snap: Snapshot) -> None:
        agg = _find(snap, aggregate_id)
        if plain_only:
            _plain(snap, agg, action)
        elif agg.kind != KIND_PLAIN and zone_given and zone != agg.metadata.get(ZONE_KEY):
            raise InvalidRequest(f"Cannot {action} aggregate {agg.id}: it is {describe(snap, agg)}, whose "
                             f"{ZONE_KEY} is set through the scheduler's API.")
        if name is not None:
            _name_free(snap, name, agg.id)
        clash = _zone_clash(service, agg, zone, members) if zone_given else []
        if clash:
            raise InvalidRequest(f"Cannot {action} aggregate {agg.id}. Reason: One or more hosts already in "
                             f"availability zone(s) {clash}.")
        metadata = dict(agg.metadata)
        for key, value in changes.items():
            if value is None:
                metadata.pop(key, None)
            else:
                metadata[key] = value
        store.set_metadata(conn, agg.id, metadata)
        store.touch(conn, agg.id, **({"name": name} if name is not None else {}))

    after = _write(service, f"aggregate {aggregate_id}", work)
    return _view(agg := _find(after, aggregate_id), sync.member_hosts(service, agg.uuid))


def delete(service, aggregate_id: int) -> None:
    snap = run_read(service.engine, snapshot_mod.load)
    agg = _find(snap, aggregate_id)
    _plain(snap, agg, "delete")
    if sync.members(service.client, agg.uuid):
        raise InvalidRequest(f"Cannot remove aggregate {aggregate_id}. Reason: Host aggregate is not empty.")

    def work(conn, snap: Snapshot) -> None:
        if _find(snap, aggregate_id).kind == KIND_PLAIN:
            store.delete_aggregate(conn, aggregate_id)

    _write(service, f"aggregate {aggregate_id}", work)


def _named(service, host: str) -> list[HostRecord]:
    """The nodes whose compute service (or own name) is ``host``."""
    return [r for r in service.catalog.by_name(host) if host in (r.service_host, r.name)]


def _nodes(service, host: str) -> list[HostRecord]:
    """The nodes (root providers) of compute service ``host``."""
    found = _named(service, host)
    if not found:  # a compute that just reported may be newer than the catalog
        service.catalog.invalidate()
        found = _named(service, host)
    if not found:
        raise NotFound(f"Compute host {host} could not be found.")
    return found


def add_host(service, aggregate_id: int, host: str) -> HostAggregate:
    snap = run_read(service.engine, snapshot_mod.load)
    agg = _find(snap, aggregate_id)
    _plain(snap, agg, "add a host to")
    nodes = _nodes(service, host)
    if {node.uuid for node in nodes} <= sync.members(service.client, agg.uuid):
        raise Conflict(f"Aggregate {aggregate_id} already has host {host}.", code=IN_USE)
    clash = _zone_clash(service, agg, agg.metadata.get(ZONE_KEY), nodes)
    if clash:
        raise Conflict(f"Cannot add host to aggregate {aggregate_id}. Reason: One or more hosts already in "
                       f"availability zone(s) {clash}.", code=IN_USE)
    for node in nodes:
        sync.update_provider(service.client, node.uuid, add=[agg.uuid])
    service.catalog.invalidate()
    return get(service, aggregate_id)


def remove_host(service, aggregate_id: int, host: str) -> HostAggregate:
    snap = run_read(service.engine, snapshot_mod.load)
    agg = _find(snap, aggregate_id)
    _plain(snap, agg, "remove a host from")
    members = sync.members(service.client, agg.uuid)
    nodes = [node for node in _named(service, host) if node.uuid in members]
    if not nodes:
        raise NotFound(f"Aggregate {aggregate_id} has no host {host}.")
    for node in nodes:
        sync.update_provider(service.client, node.uuid, remove=[agg.uuid])
    service.catalog.invalidate()
    return get(service, aggregate_id)
