"""Availability zones as Placement aggregates.

A zone is an aggregate with ``availability_zone=<name>`` metadata whose
members are the zone's hosts, so a request for zone Z becomes
``member_of=in:<Z's aggregate>`` (the AZ request filter) and each host's
record says its zone. A host is in one zone at most; hosts in none are in
the default zone (``nova``). Same write order as topology domains:
database first, then Placement converged; removal empties Placement first.
"""
from __future__ import annotations

import uuid as uuidlib
from collections.abc import Sequence

from sqlalchemy.exc import IntegrityError

from billeting.apidb import aggregates as store
from billeting.apidb import generation
from billeting.apidb import snapshot as snapshot_mod
from billeting.apidb.directory import ZONE_KEY
from billeting.apidb.snapshot import AggregateInfo, Snapshot
from billeting.apidb.tables import KIND_ZONE, ZONE_SCOPE
from billeting.common.db.tx import Retry, run_read, run_write
from billeting.scheduler.service import resolve, sync
from billeting.scheduler.errors import HOST_TAKEN, IN_USE, NAME_CLASH, Conflict, InvalidRequest, NotFound
from billeting.scheduler.service.topology import check_name, describe
from billeting.scheduler.service.views import ZoneView, zone_view


INTERNAL_ZONE = "internal"  # where Nova lists its non-compute services


def check_zone_name(name: str) -> None:
    """A zone the compute API can show and servers can be asked into: not
    empty, and not ``internal``, which the compute API keeps for its
    conductors (a host put there was listed as if it were one)."""
    if not name:
        raise InvalidRequest("an availability zone's name is not empty")
    if name == INTERNAL_ZONE:
        raise InvalidRequest(f"The availability zone {INTERNAL_ZONE!r} is where services that are not computes are "
                         "listed: it cannot be given to hosts.")


def define(service, name: str, hosts: Sequence[str]) -> tuple[ZoneView, bool]:
    check_name("availability zone", name)
    check_zone_name(name)
    resolved = resolve.hosts(service.client, hosts)

    def work(conn) -> tuple[Snapshot, bool]:
        try:
            return _write(conn)
        except IntegrityError:
            raise Retry(f"zone {name} was changed concurrently") from None

    def _write(conn) -> tuple[Snapshot, bool]:
        snap = snapshot_mod.load(conn)
        existing = snap.aggregate_by_name(name)
        if existing is not None and existing.kind != KIND_ZONE:
            raise Conflict(f"the name {name!r} is taken by {describe(snap, existing)}: names are unique across "
                           "domains and zones", code=NAME_CLASH)
        if existing is None:
            agg_id = store.create(conn, uuid=str(uuidlib.uuid4()), name=name, kind=KIND_ZONE)
            store.set_metadata(conn, agg_id, {ZONE_KEY: name})
        else:
            agg_id = existing.id
            store.touch(conn, agg_id)
        taken = {p: a for p, a in store.hosts_in_scope(conn, ZONE_SCOPE, resolved).items() if a != agg_id}
        if taken:
            names = ", ".join(f"{resolved[p]} is in zone {snap.aggregates[a].name}" for p, a in sorted(taken.items()))
            raise Conflict(f"a host is in one availability zone at most: {names}", code=HOST_TAKEN)
        store.set_hosts(conn, agg_id, ZONE_SCOPE, resolved)
        generation.bump(conn)
        return snapshot_mod.load(conn), existing is None

    after, created = run_write(service.engine, work)
    service.directory.invalidate()
    zone = after.aggregate_by_name(name)
    sync.converge(service.client, {zone.uuid: set(zone.hosts)})
    service.catalog.invalidate()
    return _view(service, after, name), created


def _zone(snap: Snapshot, name: str):
    found = snap.aggregate_by_name(name)
    if found is None or found.kind != KIND_ZONE:
        raise NotFound(f"no availability zone named {name!r}")
    return found


def _by_metadata(snap: Snapshot) -> dict[str, list[AggregateInfo]]:
    """Zone name → the aggregates not defined here whose metadata names it."""
    found: dict[str, list[AggregateInfo]] = {}
    for agg in snap.aggregates.values():
        zone = agg.metadata.get(ZONE_KEY)
        if zone and agg.kind != KIND_ZONE:
            found.setdefault(zone, []).append(agg)
    return found


def _view(service, snap: Snapshot, name: str) -> ZoneView | None:
    own = snap.aggregate_by_name(name)
    own = own if own is not None and own.kind == KIND_ZONE else None
    others = sorted(_by_metadata(snap).get(name, []), key=lambda a: a.uuid)
    if own is None and not others:
        return None
    hosts: set[str] = set()
    for agg in others:  # (their members are Placement's, not kept here)
        hosts.update(r.name for r in sync.member_hosts(service, agg.uuid))
    if own is not None:
        return zone_view(own, others, hosts)
    return ZoneView(name=name, aggregate=others[0].uuid, hosts=sorted(hosts), aggregates=[a.uuid for a in others],
                    defined_here=False)


def remove(service, name: str) -> None:
    snap = run_read(service.engine, snapshot_mod.load)
    found = snap.aggregate_by_name(name)
    by_metadata = _by_metadata(snap).get(name)
    if (found is None or found.kind != KIND_ZONE) and by_metadata:
        named_by = ", ".join(sorted(a.name or a.uuid for a in by_metadata))
        raise Conflict(f"availability zone {name!r} is named by the metadata of aggregate(s) {named_by}: remove "
                       f"their {ZONE_KEY} key instead (PUT /aggregates/{{uuid}}, or the compute API's "
                       "os-aggregates)", code=IN_USE)
    zone = _zone(snap, name)
    sync.converge(service.client, {zone.uuid: set()})

    def work(conn) -> None:
        found = snapshot_mod.load(conn).aggregate_by_name(name)
        if found is not None and found.kind == KIND_ZONE:
            store.delete_aggregate(conn, found.id)
            generation.bump(conn)

    run_write(service.engine, work)
    service.directory.invalidate()
    service.catalog.invalidate()


def show(service, name: str) -> ZoneView:
    view = _view(service, run_read(service.engine, snapshot_mod.load), name)
    if view is None:
        raise NotFound(f"no availability zone named {name!r}")
    return view


def list_zones(service) -> list[ZoneView]:
    """Every zone the scheduler places by: those defined here and those only
    aggregate metadata names."""
    snap = run_read(service.engine, snapshot_mod.load)
    names = {z.name for z in snap.zones() if z.name} | set(_by_metadata(snap))
    return [_view(service, snap, name) for name in sorted(names)]
