"""Cell database migrations: upgrade, and tell whether a database is current.

The cell schema has its own Alembic history and version table
(``cell_alembic_version``), independent of Placement's.
"""
from __future__ import annotations

from pathlib import Path

from billeting.cells.tables import VERSION_TABLE
from billeting.schema_history import SchemaHistory

MIGRATIONS = Path(__file__).parent / "migrations"
HISTORY = SchemaHistory(MIGRATIONS, VERSION_TABLE)

head_revision = HISTORY.head_revision
current_revision = HISTORY.current_revision
is_current = HISTORY.is_current
upgrade = HISTORY.upgrade
