"""What a project's servers in one cell use, counted by the cell's database.

``GET /limits`` shows a project's totals (servers, cores, RAM). Reading
every record to add them up costs a project of thousands a read of
thousands of rows; the database sums them in one row instead. A server's
flavor is JSON text (``scheduler.nova.Flavor``, whose ``vcpus`` and
``memory_mb`` are always written): each backend reads the two numbers out
of it with its own JSON functions.
"""
from __future__ import annotations

import msgspec
from sqlalchemy import JSON, Engine, Integer, cast, func, literal, null, select, type_coerce, union_all
from sqlalchemy.sql.elements import ColumnElement

from billeting.cells import tables as t
from billeting.common.db.tx import run_read

_c = t.instances.c


class Usage(msgspec.Struct, frozen=True, kw_only=True):
    instances: int = 0
    vcpus: int = 0
    memory_mb: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(instances=self.instances + other.instances, vcpus=self.vcpus + other.vcpus,
                     memory_mb=self.memory_mb + other.memory_mb)


def _number(dialect: str, key: str) -> ColumnElement:
    if dialect == "postgresql":  # (TEXT has no JSON operators there: cast first)
        return cast(cast(_c.flavor, JSON)[key].as_string(), Integer)
    # MySQL and MariaDB (where JSON is text, and CAST AS JSON does not exist), SQLite
    return type_coerce(_c.flavor, JSON)[key].as_integer()


def project_usage(engine: Engine, project_id: str, among: list[str] = ()) -> tuple[Usage, set[str]]:
    """The project's servers in this cell that are not deleted (built,
    building or in ERROR), the cores and RAM their flavors give them, and
    which of ``among`` (servers still queued as build requests when they
    were read) the cell holds.

    One statement answers both, so both see the same moment: read apart, a
    server handed to the cell between the two reads would be counted twice
    or not at all."""
    dialect = engine.dialect.name
    totals = select(null().label("uuid"), func.count().label("n"),
                    func.coalesce(func.sum(_number(dialect, "vcpus")), 0).label("vcpus"),
                    func.coalesce(func.sum(_number(dialect, "memory_mb")), 0).label("memory_mb")).where(
        _c.project_id == project_id, _c.vm_state != "deleted")
    query = totals if not among else union_all(
        totals, select(_c.uuid, literal(0), literal(0), literal(0)).where(_c.uuid.in_(list(among))))
    rows = run_read(engine, lambda conn: conn.execute(query).all())
    usage, held = Usage(), set()
    for uuid, count, vcpus, memory in rows:
        if uuid is None:
            usage = Usage(instances=int(count), vcpus=int(vcpus), memory_mb=int(memory))
        else:
            held.add(uuid)
    return usage, held
