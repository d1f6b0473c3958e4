"""Server groups: create, show, list, delete, and scheduling within one.

A group has a policy (affinity, anti-affinity and their soft forms), for
anti-affinity a ``max_server_per_host`` rule, and a scope: the failure
domain the policy applies to, ``host`` or a topology level ("anti-affinity
per rack").

Scheduling for a group (``select``) holds the group's row for the whole
decision: the members are read, the scheduler decides and claims, and the
new members are recorded in one API-database transaction. Two requests of
one group therefore never decide on the same picture, across any number of
scheduler processes (PostgreSQL/MySQL: ``SELECT ... FOR UPDATE``; SQLite:
the write transaction's database lock).
"""
from __future__ import annotations

import logging
import threading
import uuid as uuidlib
from contextlib import contextmanager

import msgspec
from sqlalchemy.exc import DBAPIError

from billeting.apidb import server_groups as store
from billeting.apidb.server_groups import StoredGroup
from billeting.common.db.tx import RetriesExhausted, run_read, run_write
from billeting.placement_client import claims
from billeting.placement_client.client import PlacementError
from billeting.scheduler.core import RankedHost
from billeting.scheduler.request import HOST_SCOPE, ScheduleRequest, ServerGroup
from billeting.scheduler.selection import Selection
from billeting.scheduler.errors import GROUP_CONFLICT, UNKNOWN_LEVEL, Conflict, InvalidRequest, NotFound
from billeting.scheduler.service.topology import levels
from billeting.scheduler.service.views import GroupView, iso

LOG = logging.getLogger(__name__)

POLICIES = ("affinity", "anti-affinity", "soft-affinity", "soft-anti-affinity")


class GroupSpec(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    policy: str
    project_id: str
    user_id: str
    max_server_per_host: int | None = None
    scope: str = HOST_SCOPE


def view(group: StoredGroup) -> GroupView:
    rules = {"max_server_per_host": group.max_server_per_host} if group.max_server_per_host is not None else {}
    return GroupView(uuid=group.uuid, name=group.name, policy=group.policy, rules=rules, scope=group.scope,
                     project_id=group.project_id, user_id=group.user_id, members=list(group.members),
                     created_at=iso(group.created_at))


def create(service, spec: GroupSpec) -> GroupView:
    if spec.policy not in POLICIES:
        raise InvalidRequest(f"unknown policy {spec.policy!r} (policies: {', '.join(POLICIES)})")
    if spec.max_server_per_host is not None:
        if spec.policy != "anti-affinity":
            raise InvalidRequest("only the anti-affinity policy takes the max_server_per_host rule")
        if spec.max_server_per_host < 1:
            raise InvalidRequest("max_server_per_host must be at least 1")
    scopes = (HOST_SCOPE, *levels(service))
    if spec.scope not in scopes:
        raise InvalidRequest(f"unknown scope {spec.scope!r} (scopes: {', '.join(scopes)})", code=UNKNOWN_LEVEL)
    stored = run_write(service.engine, lambda conn: store.create(
        conn, uuid=str(uuidlib.uuid4()), name=spec.name, project_id=spec.project_id, user_id=spec.user_id,
        policy=spec.policy, max_server_per_host=spec.max_server_per_host, scope=spec.scope))
    return view(stored)


def get(service, uuid: str) -> StoredGroup:
    found = run_read(service.engine, lambda conn: store.get(conn, uuid.lower()))
    if found is None:
        raise NotFound(f"no server group {uuid}")
    return found


def list_groups(service, project_id: str | None = None) -> list[StoredGroup]:
    return run_read(service.engine, lambda conn: store.list_groups(conn, project_id=project_id))


def delete(service, uuid: str) -> None:
    if not run_write(service.engine, lambda conn: store.delete_group(conn, uuid.lower())):
        raise NotFound(f"no server group {uuid}")


def for_request(group: StoredGroup, request: ScheduleRequest) -> ServerGroup:
    """The group as the scheduler needs it: members of this request left out."""
    mine = set(request.instance_uuids)
    return ServerGroup(uuid=group.uuid, policy=group.policy,  # type: ignore[arg-type]
                       max_server_per_host=group.max_server_per_host or 1, scope=group.scope,
                       members=tuple(m for m in group.members if m not in mine))


class _Held:
    """A group held for one decision: ``run`` works in the holding transaction."""

    def __init__(self, group: StoredGroup | None, run) -> None:
        self.group = group
        self.run = run


class GroupLock:
    """Holds a group's row while a request of the group is decided.

    ``in_process`` is for an API database that is the very SQLite file the
    in-process Placement writes to: a transaction held across the decision
    would keep the claims from writing (or, in WAL mode, could not write
    after them), so the group is held by a lock of this process instead and
    each read or write is a short transaction of its own (one machine, one
    process is the only sound set-up there)."""

    def __init__(self, engine, *, in_process: bool = False) -> None:
        self.engine = engine
        self.in_process = in_process
        self._local = threading.Lock()

    @contextmanager
    def held(self, uuid: str):
        if self.in_process:
            with self._local:
                yield _Held(run_read(self.engine, lambda conn: store.get(conn, uuid)),
                            lambda work: run_write(self.engine, work))
            return
        with self.engine.connect() as conn:
            conn = conn.execution_options(billeting_write=True)
            with conn.begin():
                yield _Held(store.get(conn, uuid, lock=True), lambda work: work(conn))


def select(service, request: ScheduleRequest, alternates: int, group_uuid: str) -> list[list[Selection]]:
    selections: list[list[Selection]] = []
    try:
        with service.group_lock.held(group_uuid.lower()) as held:
            group = held.group
            if group is None:
                raise NotFound(f"no server group {group_uuid}")
            owners = held.run(lambda conn: store.groups_of(conn, request.instance_uuids))
            elsewhere = {i: g for i, g in owners.items() if g != group.uuid}
            if elsewhere:
                raise Conflict(f"instance(s) {', '.join(sorted(elsewhere))} already belong to another server "
                               f"group ({', '.join(sorted(set(elsewhere.values())))})", code=GROUP_CONFLICT)
            request = msgspec.structs.replace(request, server_group=for_request(group, request))
            selections = service.scheduler.select_destinations(request, alternates)
            new = [i for i in request.instance_uuids if i not in group.members]
            held.run(lambda conn: store.add_members(conn, group.id, new))
    except (DBAPIError, RetriesExhausted):
        _unclaim(service, selections)  # the members could not be recorded: nothing may stay claimed
        raise
    return selections


def _unclaim(service, selections: list[list[Selection]]) -> None:
    for line in selections:
        if line and line[0].claimed:
            try:
                claims.unclaim(service.client, line[0].consumer_uuid)
            except PlacementError as exc:
                LOG.error("could not roll back the claim of %s: %s", line[0].consumer_uuid, exc)


def dry_run(service, request: ScheduleRequest, group_uuid: str) -> list[RankedHost]:
    group = get(service, group_uuid)
    return service.scheduler.dry_run(msgspec.structs.replace(request, server_group=for_request(group, request)))
