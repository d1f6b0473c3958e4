"""Server groups and their members in the API database.

Each function takes an open transaction. ``lock`` takes the group's row for
the rest of the transaction (``SELECT ... FOR UPDATE``; on SQLite the write
transaction already holds the database lock): the scheduler holds it while
it decides for a request of the group, so two requests of one anti-affinity
group never both pass the same host or rack.
"""
from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

import msgspec
from sqlalchemy import Connection, delete, insert, select

from billeting.apidb import tables as t
from billeting.apidb.aggregates import utcnow


class StoredGroup(msgspec.Struct, frozen=True, kw_only=True):
    id: int
    uuid: str
    name: str
    project_id: str
    user_id: str
    policy: str
    max_server_per_host: int | None
    scope: str
    created_at: dt.datetime | None
    members: tuple[str, ...] = ()


def _group(row, members: Iterable[str] = ()) -> StoredGroup:
    return StoredGroup(id=row.id, uuid=row.uuid, name=row.name, project_id=row.project_id, user_id=row.user_id,
                       policy=row.policy, max_server_per_host=row.max_server_per_host, scope=row.scope,
                       created_at=row.created_at, members=tuple(members))


def create(conn: Connection, *, uuid: str, name: str, project_id: str, user_id: str, policy: str,
           max_server_per_host: int | None, scope: str) -> StoredGroup:
    now = utcnow()
    new_id = conn.execute(insert(t.server_groups).values(
        uuid=uuid, name=name, project_id=project_id, user_id=user_id, policy=policy,
        max_server_per_host=max_server_per_host, scope=scope, created_at=now, updated_at=now)).inserted_primary_key[0]
    return StoredGroup(id=new_id, uuid=uuid, name=name, project_id=project_id, user_id=user_id, policy=policy,
                       max_server_per_host=max_server_per_host, scope=scope, created_at=now)


def _members(conn: Connection, group_ids: list[int]) -> dict[int, list[str]]:
    m = t.server_group_members.c
    found: dict[int, list[str]] = {}
    if group_ids:
        for gid, inst in conn.execute(select(m.group_id, m.instance_uuid).where(m.group_id.in_(group_ids))
                                      .order_by(m.created_at, m.instance_uuid)):
            found.setdefault(gid, []).append(inst)
    return found


def get(conn: Connection, uuid: str, *, lock: bool = False) -> StoredGroup | None:
    query = select(t.server_groups).where(t.server_groups.c.uuid == uuid)
    if lock:
        query = query.with_for_update()
    row = conn.execute(query).first()
    if row is None:
        return None
    return _group(row, _members(conn, [row.id]).get(row.id, ()))


def list_groups(conn: Connection, *, project_id: str | None = None) -> list[StoredGroup]:
    g = t.server_groups.c
    query = select(t.server_groups).order_by(g.created_at, g.id)
    if project_id is not None:
        query = query.where(g.project_id == project_id)
    rows = conn.execute(query).all()
    members = _members(conn, [r.id for r in rows])
    return [_group(r, members.get(r.id, ())) for r in rows]


def delete_group(conn: Connection, uuid: str) -> bool:
    row = conn.execute(select(t.server_groups.c.id).where(t.server_groups.c.uuid == uuid)).first()
    if row is None:
        return False
    conn.execute(delete(t.server_group_members).where(t.server_group_members.c.group_id == row.id))
    conn.execute(delete(t.server_groups).where(t.server_groups.c.id == row.id))
    return True


def groups_of(conn: Connection, instance_uuids: Iterable[str]) -> dict[str, str]:
    """Instance uuid -> uuid of the group it belongs to, for those that belong to one."""
    wanted = list(instance_uuids)
    if not wanted:
        return {}
    m, g = t.server_group_members.c, t.server_groups.c
    return dict(conn.execute(select(m.instance_uuid, g.uuid).join_from(
        t.server_group_members, t.server_groups, m.group_id == g.id).where(m.instance_uuid.in_(wanted))).all())


def add_members(conn: Connection, group_id: int, instance_uuids: Iterable[str]) -> None:
    now = utcnow()
    rows = [{"group_id": group_id, "instance_uuid": u, "created_at": now} for u in dict.fromkeys(instance_uuids)]
    if rows:
        conn.execute(insert(t.server_group_members), rows)


def remove_member(conn: Connection, group_id: int, instance_uuid: str) -> bool:
    m = t.server_group_members.c
    return conn.execute(delete(t.server_group_members).where(m.group_id == group_id,
                                                             m.instance_uuid == instance_uuid)).rowcount > 0
