"""Transactions with retry on the failures a database may throw under load.

Deadlocks, serialization failures and lock timeouts are transient: the
whole unit of work is re-run. A unit of work may also raise ``Retry``
itself (for example when a generation compare-and-set lost a race it is
allowed to absorb). Whatever is left after the retries is raised as
``RetriesExhausted``, which the API turns into a 409, never a 500.
"""
from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import DBAPIError, OperationalError

T = TypeVar("T")

# PostgreSQL SQLSTATEs: serialization_failure, deadlock_detected, lock_not_available
_PG_STATES = {"40001", "40P01", "55P03"}
# MySQL/MariaDB: deadlock, lock wait timeout, WSREP (Galera) conflict
_MYSQL_CODES = {1213, 1205, 1180}


class Retry(Exception):
    """Raised inside a unit of work to ask for it to be re-run."""

    def __init__(self, reason: str = "") -> None:
        super().__init__(reason)
        self.reason = reason


class RetriesExhausted(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


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


def run_write(engine: Engine, work: Callable[[Connection], T], *, retries: int = 10) -> T:
    """Run ``work`` in one write transaction, re-running it on transient failures."""
    return _run(engine, work, retries=retries, write=True)


def run_read(engine: Engine, work: Callable[[Connection], T]) -> T:
    return _run(engine, work, retries=3, write=False)


def _run(engine: Engine, work: Callable[[Connection], T], *, retries: int, write: bool) -> T:
    last_reason = ""
    for attempt in range(retries + 1):
        try:
            with engine.connect() as conn:
                if write:
                    conn = conn.execution_options(billeting_write=True)
                with conn.begin():
                    return work(conn)
        except Retry as exc:
            last_reason = exc.reason
        except DBAPIError as exc:
            if not is_transient(exc):
                raise
            last_reason = str(exc.orig)
        if attempt < retries:
            # Jittered back-off so racing writers do not collide again in step.
            time.sleep(random.uniform(0, 0.005 * (2 ** min(attempt, 6))))
    raise RetriesExhausted(last_reason)
