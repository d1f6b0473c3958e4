"""Migration records: the cell-side record of a move (cold migrate, resize,
live migration, evacuation).

During a move the migration's uuid is the Placement consumer of the source
allocation (docs/design/moves.md#the-consumer-swap), so the record is what tells the audit
that such an allocation is legitimate: a migration whose status is not yet
one of ``audit.MIGRATION_DONE`` keeps its allocation. Status changes are
compare-and-set on the expected status, like instance transitions.

This module only keeps the records; the move flows themselves (swap,
prep/finish/confirm/revert, evacuation clean-up) are built on top of it.
"""
from __future__ import annotations

from datetime import datetime
from typing import Literal

import msgspec
from sqlalchemy import Engine, insert, select, update
from sqlalchemy.exc import IntegrityError

from billeting import typeinfo
from billeting.cells import tables as t
from billeting.cells.instances import utcnow
from billeting.common.db.tx import run_read, run_write
from billeting.scheduler.nova import Flavor

MigrationType = Literal["migration", "resize", "live-migration", "evacuation"]

_enc = msgspec.json.Encoder().encode
_dec_flavor = typeinfo.decoder(Flavor).decode


class MigrationRecord(msgspec.Struct, frozen=True, kw_only=True):
    uuid: str
    instance_uuid: str
    migration_type: str
    status: str
    source_compute: str | None
    source_node: str | None
    dest_compute: str | None
    dest_node: str | None
    old_flavor: Flavor | None
    new_flavor: Flavor | None
    created_at: datetime
    updated_at: datetime
    id: int = 0    # the row id: the integer the compute API shows (os-migrations)


class MigrationExists(Exception):
    pass


def _record(row) -> MigrationRecord:
    return MigrationRecord(
        uuid=row.uuid, instance_uuid=row.instance_uuid, migration_type=row.migration_type, status=row.status,
        source_compute=row.source_compute, source_node=row.source_node, dest_compute=row.dest_compute,
        dest_node=row.dest_node, old_flavor=_dec_flavor(row.old_flavor) if row.old_flavor else None,
        new_flavor=_dec_flavor(row.new_flavor) if row.new_flavor else None, created_at=row.created_at,
        updated_at=row.updated_at, id=row.id)


def create(engine: Engine, *, uuid: str, instance_uuid: str, migration_type: MigrationType,
           source_compute: str | None, source_node: str | None, status: str = "pre-migrating",
           dest_compute: str | None = None, dest_node: str | None = None, old_flavor: Flavor | None = None,
           new_flavor: Flavor | None = None) -> MigrationRecord:
    now = utcnow()
    values = dict(uuid=uuid, instance_uuid=instance_uuid, migration_type=migration_type, status=status,
                  source_compute=source_compute, source_node=source_node, dest_compute=dest_compute,
                  dest_node=dest_node, old_flavor=_enc(old_flavor).decode() if old_flavor else None,
                  new_flavor=_enc(new_flavor).decode() if new_flavor else None, created_at=now, updated_at=now)
    try:
        run_write(engine, lambda conn: conn.execute(insert(t.migrations).values(**values)))
    except IntegrityError:
        raise MigrationExists(f"migration {uuid} already exists") from None
    return get(engine, uuid)  # type: ignore[return-value]


def get(engine: Engine, uuid: str) -> MigrationRecord | None:
    row = run_read(engine, lambda conn: conn.execute(select(t.migrations).where(t.migrations.c.uuid == uuid)).first())
    return _record(row) if row is not None else None


def for_instance(engine: Engine, instance_uuid: str) -> list[MigrationRecord]:
    rows = run_read(engine, lambda conn: conn.execute(
        select(t.migrations).where(t.migrations.c.instance_uuid == instance_uuid)
        .order_by(t.migrations.c.created_at, t.migrations.c.id)).all())
    return [_record(r) for r in rows]


def listing(engine: Engine, *, instance_uuids: list[str] | None = None) -> list[MigrationRecord]:
    """Every migration (of those instances), newest first (the compute API's os-migrations)."""
    c = t.migrations.c
    query = select(t.migrations).order_by(c.created_at.desc(), c.id.desc())
    if instance_uuids is not None:
        query = query.where(c.instance_uuid.in_(instance_uuids))
    return [_record(r) for r in run_read(engine, lambda conn: conn.execute(query).all())]


def involving(engine: Engine, host: str) -> list[MigrationRecord]:
    """Migrations whose source or destination is ``host`` (a compute's recovery)."""
    c = t.migrations.c
    rows = run_read(engine, lambda conn: conn.execute(
        select(t.migrations).where((c.source_compute == host) | (c.dest_compute == host))
        .order_by(c.created_at, c.id)).all())
    return [_record(r) for r in rows]


def set_status(engine: Engine, uuid: str, status: str, *, expect: str | None = None,
               dest_compute: str | None = None, dest_node: str | None = None) -> bool:
    """Change the status (only from ``expect`` when given); False when the
    record is missing or elsewhere."""
    c = t.migrations.c
    conds = [c.uuid == uuid] + ([c.status == expect] if expect is not None else [])
    values: dict = {"status": status, "updated_at": utcnow()}
    if dest_compute is not None:
        values["dest_compute"] = dest_compute
    if dest_node is not None:
        values["dest_node"] = dest_node
    return run_write(engine, lambda conn: conn.execute(update(t.migrations).where(*conds).values(**values))
                     .rowcount == 1)
