"""Transactions with retry on the failures a database may throw under load,
and read transactions that see one snapshot.

Deadlocks, serialization failures and lock timeouts are transient: the
whole unit of work is re-run. So is a unit of work that found its pooled
connection dead (the database restarted) before it got as far as COMMIT:
nothing of it was written, and SQLAlchemy has already discarded the pool's
stale connections. That replaces a ping round trip on every checkout. A unit of work may also raise ``Retry``
itself (for example when a generation compare-and-set lost a race it is
allowed to absorb). Whatever is left after the retries is raised as
``RetriesExhausted``, which the API turns into a 409, never a 500.

Every service's database goes through here; a service that counts its
retries passes an ``observer`` (Placement's own ``placement.store.tx`` does),
so one service's metrics never count another's transactions.
"""
from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Protocol, TypeVar

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import DBAPIError, OperationalError

T = TypeVar("T")

# PostgreSQL SQLSTATEs: serialization_failure, deadlock_detected, lock_not_available
_PG_STATES = {"40001", "40P01", "55P03"}
# MySQL/MariaDB: deadlock, lock wait timeout, WSREP (Galera) conflict
_MYSQL_CODES = {1213, 1205, 1180}
# A restart invalidates every pooled connection at once; one more attempt
# gets a fresh one, a second covers a restart racing the first.
_RECONNECT_ATTEMPTS = 2


class Retry(Exception):
    """Raised inside a unit of work to ask for it to be re-run."""

    def __init__(self, reason: str = "") -> None:
        super().__init__(reason)
        self.reason = reason


class RetriesExhausted(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class RetryObserver(Protocol):
    """Told of every retry and every unit of work that ran out of them."""

    def retried(self, *, write: bool, generation: bool) -> None: ...

    def exhausted(self, *, write: bool) -> None: ...


def is_transient(exc: BaseException) -> bool:
    if not isinstance(exc, DBAPIError):
        return False
    orig = exc.orig
    state = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    if state in _PG_STATES:
        return True
    args = getattr(orig, "args", ())
    if args and isinstance(args[0], int) and args[0] in _MYSQL_CODES:
        return True
    if isinstance(exc, OperationalError):
        text = str(orig).lower()
        if "database is locked" in text or "deadlock" in text or "busy" in text:
            return True
    return False


def run_write(engine: Engine, work: Callable[[Connection], T], *, retries: int = 10,
              observer: RetryObserver | None = None) -> T:
    """Run ``work`` in one write transaction, re-running it on transient failures."""
    return _run(engine, work, retries=retries, write=True, observer=observer)


def run_read(engine: Engine, work: Callable[[Connection], T], *, observer: RetryObserver | None = None) -> T:
    """Run ``work`` in one read-only transaction that sees a single snapshot.

    Writes run at READ COMMITTED (see ``billeting.common.db.engine``), where every
    statement sees what was committed when *it* started. A read of several
    statements (candidates, then their summaries; a provider, then its
    inventories) would then mix two states of the database: a provider gone
    between two statements, a child that appeared, a generation that does
    not match the rows returned with it. Reads therefore see one snapshot:

    * PostgreSQL: REPEATABLE READ, READ ONLY, set on the driver, which puts
      it in the BEGIN it sends anyway (no extra round trip). Read-only
      snapshot transactions never fail with serialization errors.
    * MySQL/MariaDB: ``SET TRANSACTION ... REPEATABLE READ, READ ONLY`` for
      the next transaction only (one short round trip): InnoDB then keeps
      the read view of the first statement for the whole transaction.
    * SQLite: already one snapshot; every transaction starts with BEGIN, and
      a WAL reader keeps the snapshot of its first read until it ends.
    """
    return _run(engine, work, retries=3, write=False, observer=observer)


_SNAPSHOT_OPTIONS = {"isolation_level": "REPEATABLE READ", "postgresql_readonly": True}
_MYSQL_SNAPSHOT = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"


def _run(engine: Engine, work: Callable[[Connection], T], *, retries: int, write: bool,
         observer: RetryObserver | None) -> T:
    last_reason = ""
    dialect = engine.dialect.name
    generation = False
    reconnects = 0
    attempt = 0
    while True:
        committing = False
        try:
            with engine.connect() as conn:
                if write:
                    conn = conn.execution_options(billeting_write=True)
                elif dialect == "postgresql":
                    conn = conn.execution_options(**_SNAPSHOT_OPTIONS)
                with conn.begin():
                    if not write and dialect == "mysql":
                        conn.exec_driver_sql(_MYSQL_SNAPSHOT)
                    result = work(conn)
                    committing = True
                return result
        except Retry as exc:
            last_reason, generation = exc.reason, True
        except DBAPIError as exc:
            if exc.connection_invalidated and not committing and reconnects < _RECONNECT_ATTEMPTS:
                # Dead pooled connection, found before COMMIT was sent: the
                # transaction did not happen, so running it again is safe.
                reconnects += 1
                continue
            if not is_transient(exc):
                raise
            last_reason, generation = str(exc.orig), False
        if attempt >= retries:
            if observer is not None:
                observer.exhausted(write=write)
            raise RetriesExhausted(last_reason)
        # Jittered back-off so racing writers do not collide again in step.
        time.sleep(random.uniform(0, 0.005 * (2 ** min(attempt, 6))))
        attempt += 1
        if observer is not None:
            observer.retried(write=write, generation=generation)
