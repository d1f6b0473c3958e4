"""One SELECT on PostgreSQL straight through the driver, for reads on a hot path.

A listing page reads a thousand rows per cell. Through ``run_read`` each
read costs a BEGIN and a COMMIT round trip besides the SELECT, and
SQLAlchemy's result machinery a Python call or two per row. A single
statement needs neither: in autocommit it already sees one snapshot. So
``fetch_all`` checks a pooled connection out, runs the statement in
autocommit on a binary-format cursor (dates and integers parse quicker)
and hands back the driver's tuples.

What the pool and ``run_read`` give every other read still holds: errors
come out as SQLAlchemy's exceptions (so ``billeting.cells.health`` and the
outage handling see an unreachable database as such), and a pooled
connection found dead (the server restarted) is discarded and the read run
once more on a fresh one.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError

# A restart kills every pooled connection: a fresh one, and one more for a
# restart racing the first (as ``tx``).
_RECONNECT_ATTEMPTS = 2


def fetch_all(engine: Engine, sql: str, params: Mapping[str, Any]) -> list[tuple]:
    """Every row of ``sql`` (the driver's paramstyle, ``%(name)s``) with
    ``params``. PostgreSQL (psycopg) only."""
    dialect = engine.dialect
    dbapi_error = dialect.loaded_dbapi.Error
    for attempt in range(_RECONNECT_ATTEMPTS + 1):
        try:
            fairy = engine.raw_connection()
        except dbapi_error as exc:  # (the pool hands the driver's own error on)
            raise DBAPIError.instance(None, None, exc, dbapi_error, dialect=dialect,
                                      connection_invalidated=dialect.is_disconnect(exc, None, None)) from exc
        try:
            conn = fairy.dbapi_connection
            conn.autocommit = True
            try:
                with conn.cursor(binary=True) as cursor:
                    cursor.execute(sql, params)
                    return cursor.fetchall()
            finally:
                if not conn.closed:
                    conn.autocommit = False
        except dbapi_error as exc:
            gone = dialect.is_disconnect(exc, fairy.dbapi_connection, None)
            if gone:
                fairy.invalidate(exc)
            if gone and attempt < _RECONNECT_ATTEMPTS:
                continue
            raise DBAPIError.instance(sql, params, exc, dbapi_error, connection_invalidated=gone,
                                      dialect=dialect) from exc
        finally:
            fairy.close()
    raise AssertionError("unreachable")  # pragma: no cover
