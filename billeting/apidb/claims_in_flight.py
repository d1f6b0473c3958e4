"""The ``claims_in_flight`` table: which instances a live request may hold
claims for. The rules around it are ``billeting.scheduler.inflight``'s."""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Engine, delete, insert, select, update
from sqlalchemy.exc import IntegrityError

from billeting.apidb.tables import claims_in_flight as t


class Busy(Exception):
    """An instance of the request is already in flight (another request's)."""

    def __init__(self, instance: str) -> None:
        super().__init__(instance)
        self.instance = instance


@dataclass(frozen=True, slots=True)
class Stale:
    request_id: str
    owner: str
    created_at: datetime
    instances: tuple[str, ...]


def record(engine: Engine, request_id: str, instances: Iterable[str], owner: str, now: datetime) -> None:
    """One row per instance, all or none; Busy when one is in flight already."""
    rows = [{"instance_uuid": i, "request_id": request_id, "owner": owner, "created_at": now, "renewed_at": now}
            for i in instances]
    try:
        with engine.begin() as conn:
            conn.execute(insert(t), rows)
    except IntegrityError:
        with engine.connect() as conn:
            taken = conn.execute(select(t.c.instance_uuid).where(
                t.c.instance_uuid.in_([r["instance_uuid"] for r in rows]))).scalars().first()
        raise Busy(taken or rows[0]["instance_uuid"]) from None


def forget(engine: Engine, request_ids: Iterable[str]) -> int:
    """Remove the requests' rows; how many there were."""
    ids = list(request_ids)
    if not ids:
        return 0
    with engine.begin() as conn:
        return conn.execute(delete(t).where(t.c.request_id.in_(ids))).rowcount


def renew(engine: Engine, request_ids: Iterable[str], now: datetime) -> None:
    ids = list(request_ids)
    if ids:
        with engine.begin() as conn:
            conn.execute(update(t).where(t.c.request_id.in_(ids)).values(renewed_at=now))


def stale(engine: Engine, before: datetime, limit: int = 500) -> list[Stale]:
    """Requests whose rows were last renewed before ``before``, oldest first."""
    with engine.connect() as conn:
        rows = conn.execute(select(t.c.request_id, t.c.owner, t.c.created_at, t.c.instance_uuid)
                            .where(t.c.renewed_at < before).order_by(t.c.renewed_at, t.c.instance_uuid)
                            .limit(limit)).all()
    found: dict[str, Stale] = {}
    for request_id, owner, created_at, instance in rows:
        seen = found.get(request_id)
        found[request_id] = Stale(request_id, owner, created_at, (*seen.instances, instance) if seen else (instance,))
    return list(found.values())


def take_over(engine: Engine, old: Stale, new_request_id: str, owner: str, before: datetime,
              now: datetime) -> tuple[str, ...]:
    """Make a stale request's rows the caller's (renewed now), so no other
    sweeper handles them meanwhile and they come back if the caller dies;
    their instances (none when another process got there first)."""
    with engine.begin() as conn:
        conn.execute(update(t).where(t.c.request_id == old.request_id, t.c.renewed_at < before)
                     .values(request_id=new_request_id, owner=owner, renewed_at=now))
        return tuple(conn.execute(select(t.c.instance_uuid).where(t.c.request_id == new_request_id)
                                  .order_by(t.c.instance_uuid)).scalars())
