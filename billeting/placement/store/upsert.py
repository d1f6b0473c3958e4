"""Inserts that tolerate a row somebody else inserted first.

Used where two requests may legitimately create the same name at the same
time (aggregate uuids, custom traits, custom resource classes): the loser
must not fail, it simply finds the winner's row afterwards. The statement
does not abort the transaction on a duplicate, so the caller can keep
working in it.
"""
from __future__ import annotations

from sqlalchemy import Connection, Table, insert


def insert_ignoring_duplicates(conn: Connection, table: Table, rows: list[dict]) -> int:
    """Insert ``rows``, skipping any that violate a unique constraint, and
    return how many were actually inserted.

    On MySQL ``INSERT IGNORE`` also downgrades other errors (e.g. over-long
    values) to warnings, so callers must validate values before they get here.
    """
    if not rows:
        return 0
    if conn.dialect.name == "mysql":
        stmt = insert(table).prefix_with("IGNORE")
        result = conn.execute(stmt.values(**rows[0])) if len(rows) == 1 else conn.execute(stmt, rows)
        return result.rowcount
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as dialect_insert
    else:
        from sqlalchemy.dialects.sqlite import insert as dialect_insert
    # psycopg reports no rowcount for ON CONFLICT inserts: count the returned keys.
    stmt = dialect_insert(table).on_conflict_do_nothing().returning(*table.primary_key.columns)
    result = conn.execute(stmt.values(**rows[0])) if len(rows) == 1 else conn.execute(stmt, rows)
    return len(result.all())
