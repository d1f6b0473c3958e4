"""MySQL/MariaDB: compare names and ids exactly (a NO PAD binary collation)

utf8mb4_bin is a PAD SPACE collation: 'p' and 'p ' compare equal. So on
MySQL/MariaDB two providers named 'cn1' and 'cn1 ' collided in the unique
index (a 500), project ids 'p' and 'p ' were merged into one project, and
GET /traits/HW_CPU_X86_VMX%20 found HW_CPU_X86_VMX -- unlike SQLite and
PostgreSQL, which compare strings exactly. Every table with string columns
moves to the server's NO PAD binary collation (MariaDB: utf8mb4_nopad_bin,
MySQL 8: utf8mb4_0900_bin); then every backend stores and finds such
strings as distinct values. Other backends: nothing to do.

Revision ID: 0003
Revises: 0002
"""
import logging

from alembic import op
from sqlalchemy import text

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None

LOG = logging.getLogger(__name__)

# The tables that have string columns (names, uuids, external ids).
_TABLES = ['resource_providers', 'resource_classes', 'traits', 'placement_aggregates', 'projects', 'users',
           'consumer_types', 'consumers']
_NO_PAD = ('utf8mb4_nopad_bin', 'utf8mb4_0900_bin')
_PAD_SPACE = 'utf8mb4_bin'


def _available(bind, collation: str) -> bool:
    return bind.execute(text("SHOW COLLATION WHERE Collation = :c"), {"c": collation}).first() is not None


def _convert(collation: str) -> None:
    for table in _TABLES:
        op.execute(f"ALTER TABLE {table} CONVERT TO CHARACTER SET utf8mb4 COLLATE {collation}")


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != 'mysql':
        return
    collation = next((c for c in _NO_PAD if _available(bind, c)), None)
    if collation is None:
        LOG.warning("this MySQL server has no NO PAD binary collation (%s): names differing only in "
                    "trailing spaces still compare equal here", " or ".join(_NO_PAD))
        return
    _convert(collation)


def downgrade() -> None:
    if op.get_bind().dialect.name == 'mysql':
        _convert(_PAD_SPACE)
