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
from sqlalchemy import JSON, Engine, Integer, cast, func, select, type_coerce
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


def project_usage(engine: Engine, project_id: str) -> Usage:
    """The project's servers in this cell that are not deleted (built,
    building or in ERROR), and the cores and RAM their flavors give them."""
    dialect = engine.dialect.name
    query = select(func.count(), func.coalesce(func.sum(_number(dialect, "vcpus")), 0),
                   func.coalesce(func.sum(_number(dialect, "memory_mb")), 0)).where(
        _c.project_id == project_id, _c.vm_state != "deleted")
    count, vcpus, memory = run_read(engine, lambda conn: conn.execute(query).one())
    return Usage(instances=int(count), vcpus=int(vcpus), memory_mb=int(memory))
