"""Instance mappings: which cell holds an instance (None while it is being scheduled)."""
from __future__ import annotations

from collections.abc import Iterable

import msgspec
from sqlalchemy import Connection, Engine, delete, insert, select, update

from billeting.apidb import tables as t
from billeting.apidb.aggregates import utcnow
from billeting.common.db.tx import run_read, run_write


class InstanceMapping(msgspec.Struct, frozen=True, kw_only=True):
    instance_uuid: str
    cell: str | None
    project_id: str
    user_id: str
    queued_for_delete: bool = False


def add(conn: Connection, *, instance_uuid: str, project_id: str, user_id: str) -> None:
    """Inside the API's create transaction (with the build request and spec)."""
    now = utcnow()
    conn.execute(insert(t.instance_mappings).values(
        instance_uuid=instance_uuid, cell_id=None, project_id=project_id, user_id=user_id,
        queued_for_delete=False, created_at=now, updated_at=now))


def set_cell(engine: Engine, instance_uuid: str, cell: str) -> bool:
    def work(conn: Connection) -> bool:
        cell_id = conn.execute(select(t.cell_mappings.c.id).where(t.cell_mappings.c.name == cell)).scalar()
        if cell_id is None:
            raise ValueError(f"no cell mapping named {cell}")
        return conn.execute(update(t.instance_mappings).where(
            t.instance_mappings.c.instance_uuid == instance_uuid).values(
                cell_id=cell_id, updated_at=utcnow())).rowcount == 1
    return run_write(engine, work)


def mark_deleted(engine: Engine, instance_uuid: str) -> None:
    run_write(engine, lambda conn: conn.execute(update(t.instance_mappings).where(
        t.instance_mappings.c.instance_uuid == instance_uuid).values(queued_for_delete=True, updated_at=utcnow())))


def remove(engine: Engine, instance_uuid: str) -> None:
    run_write(engine, lambda conn: conn.execute(delete(t.instance_mappings).where(
        t.instance_mappings.c.instance_uuid == instance_uuid)))


def _query():
    m, c = t.instance_mappings.c, t.cell_mappings.c
    return select(m.instance_uuid, c.name.label("cell"), m.project_id, m.user_id, m.queued_for_delete).join_from(
        t.instance_mappings, t.cell_mappings, m.cell_id == c.id, isouter=True)


def _mapping(row) -> InstanceMapping:
    return InstanceMapping(instance_uuid=row.instance_uuid, cell=row.cell, project_id=row.project_id,
                           user_id=row.user_id, queued_for_delete=bool(row.queued_for_delete))


def get(engine: Engine, instance_uuid: str) -> InstanceMapping | None:
    row = run_read(engine, lambda conn: conn.execute(
        _query().where(t.instance_mappings.c.instance_uuid == instance_uuid)).first())
    return _mapping(row) if row is not None else None


def listing(engine: Engine, *, project_id: str | None = None,
            instance_uuids: Iterable[str] | None = None) -> list[InstanceMapping]:
    query = _query().order_by(t.instance_mappings.c.id)
    if project_id is not None:
        query = query.where(t.instance_mappings.c.project_id == project_id)
    if instance_uuids is not None:
        query = query.where(t.instance_mappings.c.instance_uuid.in_(list(instance_uuids)))
    return [_mapping(r) for r in run_read(engine, lambda conn: conn.execute(query).all())]
