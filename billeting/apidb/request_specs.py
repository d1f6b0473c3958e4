"""Stored request specs, and ``SqlRequestSpecs`` (the ``RequestSpecs`` protocol of the move tasks)."""
from __future__ import annotations

import msgspec
from sqlalchemy import Connection, Engine, insert, select, update

from billeting import typeinfo
from billeting.apidb import tables as t
from billeting.apidb.aggregates import utcnow
from billeting.common.db.tx import run_read, run_write
from billeting.scheduler.nova import Flavor, Image


class StoredRequestSpec(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What was asked for when the instance was created, kept by the API
    database so a move can be scheduled like the original build."""

    instance_uuid: str
    project_id: str
    user_id: str
    flavor: Flavor
    image: Image | None = None
    is_bfv: bool = False
    availability_zone: str | None = None
    server_group: str | None = None          # server group uuid
    # Scheduler hints as the API received them (same_host, different_host, ...).
    hints: dict[str, list[str]] = {}


_enc = msgspec.json.Encoder().encode
_dec = typeinfo.decoder(StoredRequestSpec).decode


def add(conn: Connection, spec: StoredRequestSpec) -> None:
    now = utcnow()
    conn.execute(insert(t.request_specs).values(instance_uuid=spec.instance_uuid, spec=_enc(spec).decode(),
                                                created_at=now, updated_at=now))


class SqlRequestSpecs:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def get(self, instance_uuid: str) -> StoredRequestSpec | None:
        text = run_read(self.engine, lambda conn: conn.execute(select(t.request_specs.c.spec).where(
            t.request_specs.c.instance_uuid == instance_uuid)).scalar())
        return _dec(text) if text is not None else None

    def save(self, spec: StoredRequestSpec) -> None:
        def work(conn: Connection) -> None:
            changed = conn.execute(update(t.request_specs).where(
                t.request_specs.c.instance_uuid == spec.instance_uuid).values(
                    spec=_enc(spec).decode(), updated_at=utcnow())).rowcount
            if not changed:
                add(conn, spec)
        run_write(self.engine, work)
