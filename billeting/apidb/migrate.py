"""Schema migrations of the API database: upgrade, downgrade, status.

The history is recorded in ``apidb_alembic_version`` (not Alembic's default
``alembic_version``, which Placement's schema uses), so the API database
may share a database with Placement or have one of its own.

Adding a migration (for a new table or column):

1. declare the change in ``tables.py``;
2. add ``migrations/versions/NNNN_what.py`` with ``revision = "NNNN"`` and
   ``down_revision`` = the previous number, writing ``upgrade()`` and
   ``downgrade()`` with ``alembic.op`` (copy the shape of ``0001``); or let
   Alembic draft it against an up-to-date database::

       python -m billeting.apidb.migrate revision "what changed" --db URL

3. run ``tests/apidb/test_migrations.py``: it upgrades an empty database
   on every backend, compares the result with ``tables.py`` and downgrades.
"""
from __future__ import annotations

import sys
from pathlib import Path

from billeting.schema_history import SchemaHistory

MIGRATIONS = Path(__file__).parent / "migrations"
VERSION_TABLE = "apidb_alembic_version"
HISTORY = SchemaHistory(MIGRATIONS, VERSION_TABLE)

head_revision = HISTORY.head_revision
current_revision = HISTORY.current_revision
is_current = HISTORY.is_current
upgrade = HISTORY.upgrade
downgrade = HISTORY.downgrade
draft_revision = HISTORY.draft_revision


if __name__ == "__main__":  # python -m billeting.apidb.migrate revision "message" --db URL
    import argparse

    from billeting.common.db.engine import make_engine

    parser = argparse.ArgumentParser(prog="python -m billeting.apidb.migrate")
    parser.add_argument("action", choices=["revision"])
    parser.add_argument("message")
    parser.add_argument("--db", required=True, help="an API database at the current head")
    args = parser.parse_args()
    draft_revision(make_engine(args.db), args.message)
    sys.exit(0)
