"""Engine creation with the per-backend settings Billeting relies on."""
from __future__ import annotations

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url

SUPPORTED_DRIVERS = ("sqlite", "postgresql+psycopg", "mysql+pymysql")


class UnsupportedDatabase(ValueError):
    pass


def normalize_url(url: str) -> str:
    """Accept the short spellings and map them onto the drivers we ship."""
    parsed = make_url(url)
    driver = parsed.drivername
    if driver in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    elif driver == "mysql":
        parsed = parsed.set(drivername="mysql+pymysql")
    elif driver == "sqlite+pysqlite":
        parsed = parsed.set(drivername="sqlite")
    if parsed.drivername not in SUPPORTED_DRIVERS:
        raise UnsupportedDatabase(
            f"unsupported database driver {parsed.drivername!r}; use one of "
            + ", ".join(f"{d}://" for d in SUPPORTED_DRIVERS)
        )
    if parsed.drivername == "mysql+pymysql" and "charset" not in parsed.query:
        parsed = parsed.update_query_dict({"charset": "utf8mb4"})
    return parsed.render_as_string(hide_password=False)


class PoolLimits:
    """The process's ceiling on pooled connections per engine, set once by the
    command line (``--db-pool-size``/``--db-max-overflow`` or ``[database]
    max_pool_size``/``max_overflow``). A distributed deployment runs a dozen
    processes each opening several engines against one database server whose
    connection limit (PostgreSQL: 100) they share."""

    pool_size: int | None = None
    max_overflow: int | None = None


def configure_pools(pool_size: int | None = None, max_overflow: int | None = None) -> None:
    if pool_size is not None and pool_size < 1:
        raise ValueError("the database pool size must be at least 1")
    if max_overflow is not None and max_overflow < 0:
        raise ValueError("the database pool overflow must be 0 or more")
    PoolLimits.pool_size, PoolLimits.max_overflow = pool_size, max_overflow


def make_engine(url: str, *, pool_size: int = 10, max_overflow: int = 20) -> Engine:
    url = normalize_url(url)
    if url.startswith("sqlite"):
        return _sqlite_engine(url)
    if PoolLimits.pool_size is not None:
        pool_size = PoolLimits.pool_size
    if PoolLimits.max_overflow is not None:
        max_overflow = PoolLimits.max_overflow
    # LIFO: a quiet server keeps reusing its most recent connection, whose
    # database backend has the statements prepared and its caches warm,
    # instead of rotating through every pooled connection.
    # No pool_pre_ping: it costs a round trip per transaction; store.tx
    # re-runs a unit of work that finds its connection dead instead.
    kwargs: dict = {"pool_size": pool_size, "max_overflow": max_overflow, "pool_use_lifo": True,
                    # Waiting for a pooled connection longer than this is an
                    # outage, reported as such (503), not a hung request.
                    "pool_timeout": 30}
    if url.startswith("mysql"):
        # READ COMMITTED keeps every statement on fresh data, like PostgreSQL's
        # default; the generation compare-and-set provides the serialization.
        kwargs["isolation_level"] = "READ COMMITTED"
        kwargs["pool_recycle"] = 3600
    engine = create_engine(url, **kwargs)
    if url.startswith("postgresql"):
        # An INSERT of several rows (inventories, trait and aggregate links,
        # allocations) becomes ONE multi-row statement, as it does with
        # psycopg2, instead of psycopg 3's pipelined executemany, whose
        # pipeline bookkeeping costs several times the statement's own Python
        # time and holds the GIL while doing it.
        engine.dialect.use_insertmanyvalues_wo_returning = True
    return engine


def _sqlite_engine(url: str) -> Engine:
    engine = create_engine(url, connect_args={"timeout": 30, "check_same_thread": False})

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record):
        # Let us issue BEGIN ourselves, so writers can take the lock up front.
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        if ":memory:" not in url and url != "sqlite://":
            cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute("PRAGMA busy_timeout=30000")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn):
        # A write transaction starts with BEGIN IMMEDIATE: SQLite then
        # serializes writers at BEGIN instead of failing one of them with
        # "database is locked" when it upgrades from a read lock.
        # Sent on the driver's connection: three transactions a build, and
        # SQLAlchemy's execution set-up costs several times SQLite's BEGIN.
        write = conn.get_execution_options().get("billeting_write")
        conn.connection.dbapi_connection.execute("BEGIN IMMEDIATE" if write else "BEGIN")

    return engine
