"""Alembic environment of the cell database: always driven from cells.migrate."""
from alembic import context

from billeting.cells.tables import VERSION_TABLE, metadata

config = context.config


def run() -> None:
    connection = config.attributes.get("connection")
    if connection is None:
        raise RuntimeError("cell database migrations run through billeting.cells.migrate")
    context.configure(connection=connection, target_metadata=metadata, compare_type=True,
                      version_table=VERSION_TABLE)
    with context.begin_transaction():
        context.run_migrations()


run()
