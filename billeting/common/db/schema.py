"""What every service's tables share: constraint names and MySQL's table options.

Named constraints let Alembic drop and alter them by name on every backend;
utf8mb4 with a binary collation makes MySQL/MariaDB compare strings as
PostgreSQL and SQLite do (case- and accent-sensitive).
"""
from __future__ import annotations

NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}
MYSQL = {"mysql_charset": "utf8mb4", "mysql_collate": "utf8mb4_bin", "mysql_engine": "InnoDB"}
