"""The directory generation: one counter every Directory write bumps.

A scheduler process keeps the directory in memory and asks for this one
number now and then (``SqlDirectory.check_every``); when it moved, another
process changed a domain, a zone or some metadata, and the whole directory
is read again. Bumping it in the writer's own transaction means a reader
never sees the new number with the old rows.
"""
from __future__ import annotations

from sqlalchemy import Connection, select, update

from billeting.apidb.tables import directory_generation as t

ROW = 1


def bump(conn: Connection) -> None:
    conn.execute(update(t).where(t.c.id == ROW).values(generation=t.c.generation + 1))


def read(conn: Connection) -> int:
    return conn.execute(select(t.c.generation).where(t.c.id == ROW)).scalar_one_or_none() or 0
