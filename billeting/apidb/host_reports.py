"""Host reports: the small catalog table, keyed by node name.

A compute (or its operator) reports what Placement cannot say: the service
host that runs the node, its cell, whether it is enabled, a heartbeat,
recent build failures, instance counts, and what its hypervisor is and can
run (type, version, cpu_info, supported instances, stats; the last three
kept as JSON text). ``HostReportLoader`` turns the
table into the ``HostReport`` overlay ``PlacementHostCatalog`` applies.

Up or down: a report with a heartbeat is up while the heartbeat is younger
than ``down_after_s`` (Nova's ``service_down_time``, 60 s); an explicit
``up`` applies only to reports that never sent a heartbeat.
"""
from __future__ import annotations

import datetime as dt
from collections.abc import Callable

import msgspec
from sqlalchemy import Connection, Engine, delete, insert, select, update
from sqlalchemy.exc import IntegrityError

from billeting import typeinfo
from billeting.apidb import tables as t
from billeting.apidb.aggregates import utcnow
from billeting.common.db.tx import Retry, run_read
from billeting.scheduler.catalog import CAPABILITY_JSON, HostReport, json_facts, json_text

DOWN_AFTER_S = 60.0
FIELDS = ("service_host", "cell", "enabled", "up", "failed_builds", "num_instances", "num_io_ops",
          "hypervisor_type", "hypervisor_version")  # the table's columns, HostReport's names
_ATTRIBUTE = {"cell": "cell_uuid"}  # where a column's name is not the attribute's


# The body of PUT /hosts/{name}, and a table row's values, by their names (``cell``).
to_report_fields = typeinfo.converter(HostReport)


class StoredReport(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    fields: HostReport  # as stored: ``up`` is the explicit one
    last_heartbeat: dt.datetime | None
    updated_at: dt.datetime | None

    def up(self, now: dt.datetime, down_after_s: float = DOWN_AFTER_S) -> bool | None:
        if self.last_heartbeat is not None:
            return (now - self.last_heartbeat).total_seconds() <= down_after_s
        return self.fields.up

    def as_host_report(self, now: dt.datetime, down_after_s: float = DOWN_AFTER_S) -> HostReport:
        return msgspec.structs.replace(self.fields, up=self.up(now, down_after_s))


def _stored(row) -> StoredReport:
    values = {k: getattr(row, k) for k in FIELDS}
    values.update(json_facts(row))
    return StoredReport(name=row.name, fields=to_report_fields(values),
                        last_heartbeat=row.last_heartbeat, updated_at=row.updated_at)


def put(conn: Connection, name: str, fields: HostReport, *, heartbeat: bool) -> tuple[StoredReport, bool]:
    """Replace the report of ``name``; (the report, True when it is new)."""
    now = utcnow()
    values = {k: getattr(fields, _ATTRIBUTE.get(k, k)) for k in FIELDS}
    values.update({k: json_text(getattr(fields, k)) for k in CAPABILITY_JSON})
    row = conn.execute(select(t.host_reports).where(t.host_reports.c.name == name).with_for_update()).first()
    if row is None:
        try:
            conn.execute(insert(t.host_reports).values(name=name, **values, created_at=now, updated_at=now,
                                                       last_heartbeat=now if heartbeat else None))
        except IntegrityError:  # created by a concurrent writer: run again, as an update
            raise Retry(f"host report {name} was created concurrently") from None
        created = True
    else:
        extra = {"last_heartbeat": now} if heartbeat else {}
        conn.execute(update(t.host_reports).where(t.host_reports.c.id == row.id).values(
            **values, updated_at=now, **extra))
        created = False
    found = get(conn, name)
    assert found is not None
    return found, created


def get(conn: Connection, name: str) -> StoredReport | None:
    row = conn.execute(select(t.host_reports).where(t.host_reports.c.name == name)).first()
    return _stored(row) if row is not None else None


def list_reports(conn: Connection) -> list[StoredReport]:
    return [_stored(r) for r in conn.execute(select(t.host_reports).order_by(t.host_reports.c.name))]


def delete_report(conn: Connection, name: str) -> bool:
    return conn.execute(delete(t.host_reports).where(t.host_reports.c.name == name)).rowcount > 0


class HostReportLoader:
    """``reports=`` for ``PlacementHostCatalog``: node name -> HostReport."""

    def __init__(self, engine: Engine, *, down_after_s: float = DOWN_AFTER_S,
                 clock: Callable[[], dt.datetime] = utcnow) -> None:
        self.engine = engine
        self.down_after_s = down_after_s
        self.clock = clock

    def __call__(self) -> dict[str, HostReport]:
        reports = run_read(self.engine, list_reports)
        now = self.clock()
        return {r.name: r.as_host_report(now, self.down_after_s) for r in reports}
