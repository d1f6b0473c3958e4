"""Tell a database that cannot be reached from any other database failure.

A refused connection, a connection the server dropped (restart, failover,
``pg_terminate_backend``) or a server that is starting up or shutting down
is an outage: the API answers 503 and the pool reconnects by itself once
the server is back (``pool_pre_ping`` replaces stale connections at
checkout; SQLAlchemy invalidates the pool when it sees a disconnect). Any
other driver error is a bug, and stays a 500.
"""
from __future__ import annotations

from sqlalchemy.exc import DBAPIError

# PostgreSQL SQLSTATEs of a server going away or not yet there:
# admin_shutdown, crash_shutdown, cannot_connect_now.
_PG_GOING_AWAY = {"57P01", "57P02"}
_PG_NOT_READY = {"57P03"}
# too_many_connections: the server's connection slots are all taken.
_PG_FULL = {"53300"}
# MySQL/MariaDB client and server codes for the same: can't connect (local,
# TCP), server gone away, lost connection (during query, at handshake),
# server shutdown, connection killed.
_MYSQL_CANNOT_CONNECT = {2002, 2003}
_MYSQL_LOST = {2006, 2013, 2055, 1053, 1927, 4031}

LOST = "the connection to it was lost"
CANNOT_CONNECT = "it cannot be reached"
NOT_READY = "it is starting up or shutting down"
FULL = "it has no free connections"


def unavailable_reason(exc: BaseException) -> str | None:
    """A short, client-safe reason when ``exc`` means the database is out of
    reach; ``None`` for any other failure."""
    from sqlalchemy.exc import TimeoutError as PoolTimeout

    if isinstance(exc, PoolTimeout):
        # Every pooled connection busy for the whole pool timeout.
        return FULL
    if not isinstance(exc, DBAPIError):
        return None
    orig = exc.orig
    reason = _postgresql_reason(orig) or _mysql_reason(orig)
    if reason is None and exc.connection_invalidated:
        reason = LOST
    return reason


def _postgresql_reason(orig: BaseException | None) -> str | None:
    try:
        import psycopg
    except ImportError:  # pragma: no cover - psycopg is a dependency
        return None
    if not isinstance(orig, psycopg.OperationalError):
        return None
    state = orig.sqlstate
    if state in _PG_GOING_AWAY:
        return LOST
    if state in _PG_NOT_READY:
        return NOT_READY
    if state in _PG_FULL or "too many clients" in str(orig).lower():
        return FULL
    if state is None or state.startswith("08"):  # client-side failure or connection_exception class
        text = str(orig).lower()
        if "closed" in text or "lost" in text or "terminat" in text or "consuming input failed" in text:
            return LOST
        return CANNOT_CONNECT
    return None


def _mysql_reason(orig: BaseException | None) -> str | None:
    try:
        import pymysql
    except ImportError:  # pragma: no cover - PyMySQL is a dependency
        return None
    if not isinstance(orig, (pymysql.err.OperationalError, pymysql.err.InterfaceError)):
        return None
    code = orig.args[0] if orig.args and isinstance(orig.args[0], int) else None
    if code == 1040:  # ER_CON_COUNT_ERROR: too many connections
        return FULL
    if code in _MYSQL_CANNOT_CONNECT:
        return CANNOT_CONNECT
    if code in _MYSQL_LOST or (isinstance(orig, pymysql.err.InterfaceError) and code == 0):
        return LOST
    return None
