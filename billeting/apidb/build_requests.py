"""Build requests: what the API shows of an instance no cell holds yet."""
from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

import msgspec
from sqlalchemy import Connection, Engine, delete, insert, select

from billeting import typeinfo
from billeting.apidb import tables as t
from billeting.apidb.aggregates import utcnow
from billeting.common.db.tx import run_read, run_write
from billeting.scheduler.nova import Flavor, Image

_enc = msgspec.json.Encoder().encode
_dec_flavor = typeinfo.decoder(Flavor).decode
_dec_image = typeinfo.decoder(Image).decode


class BuildRequest(msgspec.Struct, frozen=True, kw_only=True):
    instance_uuid: str
    project_id: str
    user_id: str
    name: str
    flavor: Flavor
    image: Image | None
    availability_zone: str | None
    created_at: dt.datetime


def add(conn: Connection, *, instance_uuid: str, project_id: str, user_id: str, name: str, flavor: Flavor,
        image: Image | None, availability_zone: str | None) -> None:
    now = utcnow()
    conn.execute(insert(t.build_requests).values(
        instance_uuid=instance_uuid, project_id=project_id, user_id=user_id, name=name,
        flavor=_enc(flavor).decode(), image=_enc(image).decode() if image is not None else None,
        availability_zone=availability_zone, created_at=now, updated_at=now))


def _request(row) -> BuildRequest:
    return BuildRequest(instance_uuid=row.instance_uuid, project_id=row.project_id, user_id=row.user_id,
                        name=row.name, flavor=_dec_flavor(row.flavor),
                        image=_dec_image(row.image) if row.image else None,
                        availability_zone=row.availability_zone, created_at=row.created_at)


def get(engine: Engine, instance_uuid: str) -> BuildRequest | None:
    row = run_read(engine, lambda conn: conn.execute(
        select(t.build_requests).where(t.build_requests.c.instance_uuid == instance_uuid)).first())
    return _request(row) if row is not None else None


def get_many(engine: Engine, instance_uuids: Iterable[str]) -> dict[str, BuildRequest]:
    wanted = list(instance_uuids)
    if not wanted:
        return {}
    rows = run_read(engine, lambda conn: conn.execute(
        select(t.build_requests).where(t.build_requests.c.instance_uuid.in_(wanted))).all())
    return {r.instance_uuid: _request(r) for r in rows}


def listing(engine: Engine, *, project_id: str | None = None) -> list[BuildRequest]:
    """The build requests of a project (of all, for None): servers no cell
    holds yet, a few at a time, so read whole."""
    query = select(t.build_requests)
    if project_id is not None:
        query = query.where(t.build_requests.c.project_id == project_id)
    return [_request(r) for r in run_read(engine, lambda conn: conn.execute(query).all())]


def remove(engine: Engine, instance_uuid: str) -> bool:
    """True when this call deleted it (the super conductor then owns the build;
    False means the user deleted the server meanwhile)."""
    return run_write(engine, lambda conn: conn.execute(delete(t.build_requests).where(
        t.build_requests.c.instance_uuid == instance_uuid)).rowcount == 1)


def withdraw(engine: Engine, instance_uuids: Iterable[str]) -> None:
    """Forget servers the API recorded but could not hand to a super conductor
    (the message bus refused the cast): their build requests, mappings,
    request specs and actions, in one transaction, so no server is left in
    BUILD that nobody will ever build."""
    wanted = list(instance_uuids)

    def work(conn) -> None:
        for table in (t.instance_actions, t.request_specs, t.build_requests, t.instance_mappings):
            conn.execute(delete(table).where(table.c.instance_uuid.in_(wanted)))

    run_write(engine, work)
