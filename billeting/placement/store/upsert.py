"""Inserts that tolerate a row somebody else inserted first.

Used where two requests may legitimately create the same name at the same
time (aggregate uuids, custom traits and classes, projects, users, consumer
types, the standard names synced at start-up): the loser must not fail, it
simply finds the winner's row afterwards. The statement does not abort the
transaction on a duplicate, so the caller can keep working in it; a
concurrent uncommitted insert of the same key makes it wait for that
transaction's outcome.

On MySQL ``INSERT IGNORE`` also downgrades other errors (e.g. over-long
values) to warnings, so callers must validate values before they get here.
"""
from __future__ import annotations

from sqlalchemy import Connection, Table, insert, select

from billeting.common.db.keys import Keyed, match

# (dialect name, table name) → the statement; values are bound per call, so
# the statement is built (and its SQL compiled) once per process.
_STATEMENTS: dict[tuple[str, str], object] = {}


def _statement(conn: Connection, table: Table):
    dialect = conn.dialect.name
    key = (dialect, table.name)
    stmt = _STATEMENTS.get(key)
    if stmt is not None:
        return stmt
    if dialect == "mysql":
        stmt = insert(table).prefix_with("IGNORE")
    else:
        # psycopg reports no rowcount for ON CONFLICT inserts: RETURNING says
        # which rows really went in.
        stmt = _conflict_free_insert(dialect, table).returning(*table.primary_key.columns)
    _STATEMENTS[key] = stmt
    return stmt


def insert_ignoring_duplicates(conn: Connection, table: Table, rows: list[dict]) -> int:
    """Insert ``rows``, skipping any that violate a unique constraint, and
    return how many were actually inserted."""
    if not rows:
        return 0
    stmt = _statement(conn, table)
    result = conn.execute(stmt.values(**rows[0])) if len(rows) == 1 else conn.execute(stmt, rows)
    if conn.dialect.name == "mysql":
        return result.rowcount
    return len(result.all())


def insert_if_absent(conn: Connection, table: Table, values: dict) -> int | None:
    """Insert one row; its new id, or None when a unique constraint already held it."""
    result = conn.execute(_statement(conn, table), values)
    if conn.dialect.name == "mysql":
        return result.inserted_primary_key[0] if result.rowcount == 1 else None
    return result.scalar()


# (dialect name, table name, key column) → the statement of ``insert_all_new``
# (on MySQL: the read-back of the new ids).
_RETURNING_KEYS: dict[tuple[str, str, str], object] = {}


def insert_all_new(conn: Connection, table: Table, rows: list[dict], key: str) -> dict[str, int] | None:
    """Insert ``rows`` in ONE statement, none of which may exist yet: their
    new ids by ``key`` value, or None when a unique constraint already held
    any of them (the rest are inserted all the same; callers then re-run
    their unit of work). Many rows cost one round trip, not one each."""
    dialect = conn.dialect.name
    if dialect == "mysql":
        # No RETURNING on MySQL: count what went in, then read the ids back
        # (our own uncommitted rows, visible to this transaction only).
        if conn.execute(_statement(conn, table), rows).rowcount != len(rows):
            return None
        read_back = _RETURNING_KEYS.get((dialect, table.name, key))
        if read_back is None:
            read_back = _RETURNING_KEYS[(dialect, table.name, key)] = Keyed(
                lambda keys: select(table.c.id, table.c[key]).where(match(table.c[key], "keys", keys)), "keys")
        found = conn.execute(*read_back.bind({"keys": [row[key] for row in rows]}))
        return {value: id_ for id_, value in found}
    stmt = _RETURNING_KEYS.get((dialect, table.name, key))
    if stmt is None:
        stmt = _RETURNING_KEYS[(dialect, table.name, key)] = (
            _conflict_free_insert(dialect, table).returning(table.c.id, table.c[key]))
    inserted = {value: id_ for id_, value in conn.execute(stmt, rows)}
    return inserted if len(inserted) == len(rows) else None


def _conflict_free_insert(dialect: str, table: Table):
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as dialect_insert
    else:
        from sqlalchemy.dialects.sqlite import insert as dialect_insert
    return dialect_insert(table).on_conflict_do_nothing()
