"""Failure domains: define, remove, list, show (the proposal's "simple tool").

Levels are the operator's, narrowest first (``rack`` < ``row`` < ``room``),
with ``cell`` as one more, widest level. A domain at the narrowest level
(or a cell) is defined from hosts; a domain at a wider level from domains
of the level just below it (a row from racks; a cell may also be defined
from domains of the widest level). Every domain is a Placement aggregate
holding every host in it, its members' included, so "different rack from
X" is a ``member_of`` clause of the candidates query.

Each operation writes the API database first (one transaction, with the
checks that need it), then converges Placement's memberships of the
domain's aggregate and of every aggregate above it. Converging reads what
Placement holds, so running a failed operation again completes it.
Removing a domain empties its aggregate in Placement first, then forgets it.
"""
from __future__ import annotations

import re
import uuid as uuidlib
from collections.abc import Sequence

from sqlalchemy.exc import IntegrityError

from billeting.apidb import aggregates as store
from billeting.apidb import generation
from billeting.apidb import snapshot as snapshot_mod
from billeting.apidb.snapshot import AggregateInfo, DomainInfo, Snapshot
from billeting.apidb.tables import KIND_DOMAIN, KIND_ZONE
from billeting.common.db.tx import Retry, run_read, run_write
from billeting.scheduler.directory import CELL_LEVEL
from billeting.scheduler.service import resolve, sync
from billeting.scheduler.errors import (
    HOST_TAKEN,
    IN_USE,
    NAME_CLASH,
    UNKNOWN_LEVEL,
    WRONG_LEVEL,
    Conflict,
    InvalidRequest,
    NotFound,
)
from billeting.scheduler.service.views import DomainView, TopologyView, domain_view

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,254}$")


def check_name(kind: str, name: str) -> None:
    if not NAME.match(name):
        raise InvalidRequest(f"invalid {kind} name {name!r}: use 1 to 255 letters, digits, '-', '_', '.' or ':', "
                         "starting with a letter or digit")


def levels(service) -> tuple[str, ...]:
    """Every level, narrowest first, ``cell`` last."""
    return (*service.settings.topology_levels, CELL_LEVEL)


def check_level(service, level: str) -> int:
    order = levels(service)
    if level not in order:
        raise NotFound(f"unknown topology level {level!r} (levels: {', '.join(order)})", code=UNKNOWN_LEVEL)
    return order.index(level)


def describe(snap: Snapshot, agg: AggregateInfo) -> str:
    if agg.kind == KIND_DOMAIN:
        dom = snap.domain_of_aggregate(agg.id)
        return f"the {dom.level} {dom.name}" if dom else f"aggregate {agg.uuid}"
    if agg.kind == KIND_ZONE:
        return f"availability zone {agg.name}"
    return f"aggregate {agg.uuid}"


def _desired(snap: Snapshot, dom: DomainInfo) -> dict[str, set[str]]:
    """Aggregate -> hosts, for a domain and every domain above it."""
    return {d.aggregate_uuid: set(snap.hosts(d)) for d in (dom, *snap.ancestors(dom))}


def define(service, level: str, name: str, *, hosts: Sequence[str] | None = None,
           members: Sequence[str] | None = None) -> tuple[DomainView, bool]:
    """Create or redefine a domain; (its view, True when it is new)."""
    order = levels(service)
    index = check_level(service, level)
    check_name(level, name)
    if (hosts is None) == (members is None):
        raise InvalidRequest(f"define a {level} from hosts or from members, not both and not neither")
    narrowest = order[0]
    if hosts is not None and index != 0 and level != CELL_LEVEL:
        raise InvalidRequest(f"a {level} is defined from members ({order[index - 1]}s), not from hosts: only the "
                         f"narrowest level ({narrowest}) and cell take hosts", code=WRONG_LEVEL)
    if members is not None and index == 0:
        raise InvalidRequest(f"{level} is the narrowest level: define it from hosts", code=WRONG_LEVEL)
    below = order[index - 1] if index > 0 else None
    resolved = resolve.hosts(service.client, hosts) if hosts is not None else {}

    def work(conn) -> tuple[Snapshot, bool]:
        try:
            return _write(conn)
        except IntegrityError:
            raise Retry(f"the {level} {name} was changed concurrently") from None

    def _write(conn) -> tuple[Snapshot, bool]:
        snap = snapshot_mod.load(conn)
        existing = snap.domain(level, name)
        clash = snap.aggregate_by_name(name)
        if clash is not None and (existing is None or clash.id != existing.aggregate_id):
            raise Conflict(f"the name {name!r} is taken by {describe(snap, clash)}: names are unique across "
                           "domains and zones", code=NAME_CLASH)
        if existing is None:
            agg_id = store.create(conn, uuid=str(uuidlib.uuid4()), name=name, kind=KIND_DOMAIN)
            dom_id = store.create_domain(conn, aggregate_id=agg_id, level=level, name=name)
        else:
            agg_id, dom_id = existing.aggregate_id, existing.id
            store.touch(conn, agg_id)
        if members is None:
            taken = {p: a for p, a in store.hosts_in_scope(conn, level, resolved).items() if a != agg_id}
            if taken:
                names = ", ".join(f"{resolved[p]} is already in {describe(snap, snap.aggregates[a])}"
                                  for p, a in sorted(taken.items()))
                raise Conflict(f"a host is in one {level} at most: {names}", code=HOST_TAKEN)
            store.set_hosts(conn, agg_id, level, resolved)
            store.clear_children(conn, dom_id)
        else:
            children = []
            for member in dict.fromkeys(members):
                child = snap.domain(below, member)
                if child is None:
                    elsewhere = [lv for lv in order if snap.domain(lv, member) is not None]
                    if elsewhere:
                        raise InvalidRequest(f"{member} is a {elsewhere[0]}, not a {below}: a {level} is defined "
                                         f"from {below}s", code=WRONG_LEVEL)
                    raise InvalidRequest(f"no {below} named {member!r}: define it first", code=WRONG_LEVEL)
                if child.parent_id is not None and child.parent_id != dom_id:
                    parent = snap.domains[child.parent_id]
                    raise Conflict(f"the {below} {member} is already in the {parent.level} {parent.name}: "
                                   f"a {below} is in one {level} at most", code=IN_USE)
                children.append(child.id)
            store.set_hosts(conn, agg_id, level, {})
            if not store.set_children(conn, dom_id, children):
                raise Retry(f"a member of the {level} {name} was taken concurrently")
        generation.bump(conn)
        return snapshot_mod.load(conn), existing is None

    after, created = run_write(service.engine, work)
    service.directory.invalidate()
    dom = after.domain(level, name)
    sync.converge(service.client, _desired(after, dom))
    service.catalog.invalidate()
    return domain_view(after, dom), created


def remove(service, level: str, name: str) -> None:
    check_level(service, level)
    snap = run_read(service.engine, snapshot_mod.load)
    dom = snap.domain(level, name)
    if dom is None:
        raise NotFound(f"no {level} named {name!r}")
    _refuse_if_held(snap, dom)
    sync.converge(service.client, {dom.aggregate_uuid: set()})

    def work(conn) -> None:
        current = snapshot_mod.load(conn)
        found = current.domain(level, name)
        if found is None:
            return  # removed concurrently: done
        _refuse_if_held(current, found)
        store.delete_aggregate(conn, found.aggregate_id)
        generation.bump(conn)

    run_write(service.engine, work)
    service.directory.invalidate()
    service.catalog.invalidate()


def _refuse_if_held(snap: Snapshot, dom: DomainInfo) -> None:
    parent = snap.parent(dom)
    if parent is not None:
        raise Conflict(f"the {dom.level} {dom.name} is a member of the {parent.level} {parent.name}: "
                       f"define {parent.name} without it first", code=IN_USE)


def show(service, level: str, name: str) -> DomainView:
    check_level(service, level)
    snap = run_read(service.engine, snapshot_mod.load)
    dom = snap.domain(level, name)
    if dom is None:
        raise NotFound(f"no {level} named {name!r}")
    return domain_view(snap, dom)


def list_domains(service, level: str | None = None) -> TopologyView:
    order = levels(service)
    if level is not None:
        check_level(service, level)
    snap = run_read(service.engine, snapshot_mod.load)
    rank = {lv: i for i, lv in enumerate(order)}
    domains = sorted((d for d in snap.domains.values() if (level is None or d.level == level) and d.level in rank),
                     key=lambda d: (rank[d.level], d.name))
    return TopologyView(levels=list(order), domains=[domain_view(snap, d) for d in domains])
