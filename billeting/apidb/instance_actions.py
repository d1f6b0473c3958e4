"""Instance actions (create, delete, resize, migrate, ...) recorded at the API level."""
from __future__ import annotations

import datetime as dt

import msgspec
from sqlalchemy import Engine, insert, select, update

from billeting.apidb import tables as t
from billeting.apidb.aggregates import utcnow
from billeting.common.db.tx import run_read, run_write


class InstanceAction(msgspec.Struct, frozen=True, kw_only=True):
    id: int
    request_id: str
    instance_uuid: str
    action: str
    project_id: str
    user_id: str
    message: str | None
    start_time: dt.datetime
    finish_time: dt.datetime | None


def _action(row) -> InstanceAction:
    return InstanceAction(id=row.id, request_id=row.request_id, instance_uuid=row.instance_uuid,
                          action=row.action, project_id=row.project_id, user_id=row.user_id,
                          message=row.message, start_time=row.start_time, finish_time=row.finish_time)


def record(engine: Engine, *, instance_uuid: str, action: str, request_id: str, project_id: str, user_id: str,
           message: str | None = None, finished: bool = False, start_time: dt.datetime | None = None) -> None:
    now = utcnow()
    run_write(engine, lambda conn: conn.execute(insert(t.instance_actions).values(
        request_id=request_id, instance_uuid=instance_uuid, action=action, project_id=project_id,
        user_id=user_id, message=message[:255] if message else None, start_time=start_time or now,
        finish_time=now if finished else None, created_at=now, updated_at=now)))


def finish(engine: Engine, instance_uuid: str, action: str, *, message: str | None = None) -> None:
    """Close the latest open action of that kind (with an error message when it failed)."""
    a = t.instance_actions.c

    def work(conn) -> None:
        latest = conn.execute(select(a.id).where(a.instance_uuid == instance_uuid, a.action == action,
                                                 a.finish_time.is_(None)).order_by(a.id.desc())).scalar()
        if latest is not None:
            now = utcnow()
            values = {"finish_time": now, "updated_at": now}
            if message:
                values["message"] = message[:255]
            conn.execute(update(t.instance_actions).where(a.id == latest).values(**values))

    run_write(engine, work)


def listing(engine: Engine, instance_uuid: str) -> list[InstanceAction]:
    a = t.instance_actions.c
    rows = run_read(engine, lambda conn: conn.execute(select(t.instance_actions).where(
        a.instance_uuid == instance_uuid).order_by(a.start_time.desc(), a.id.desc())).all())
    return [_action(r) for r in rows]


def by_request(engine: Engine, instance_uuid: str, request_id: str) -> InstanceAction | None:
    a = t.instance_actions.c
    row = run_read(engine, lambda conn: conn.execute(select(t.instance_actions).where(
        a.instance_uuid == instance_uuid, a.request_id == request_id)).first())
    return _action(row) if row is not None else None


def close(engine: Engine, action_id: int, *, finish_time: dt.datetime, message: str | None = None) -> None:
    """Record the result the API derived for an open action (only if still open)."""
    a = t.instance_actions.c
    values: dict = {"finish_time": finish_time, "updated_at": utcnow()}
    if message:
        values["message"] = message[:255]
    run_write(engine, lambda conn: conn.execute(update(t.instance_actions).where(
        a.id == action_id, a.finish_time.is_(None)).values(**values)))
