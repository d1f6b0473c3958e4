"""Schema migrations: upgrade, and tell whether a database is current."""
from __future__ import annotations

from pathlib import Path

from billeting.schema_history import SchemaHistory

MIGRATIONS = Path(__file__).parent / "migrations"
HISTORY = SchemaHistory(MIGRATIONS)

head_revision = HISTORY.head_revision
current_revision = HISTORY.current_revision
is_current = HISTORY.is_current
upgrade = HISTORY.upgrade
