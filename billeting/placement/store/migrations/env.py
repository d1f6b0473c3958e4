"""Alembic environment: always driven programmatically from migrate.py."""
from alembic import context

from billeting.placement.store.tables import metadata

config = context.config


def run() -> None:
    connection = config.attributes.get("connection")
    if connection is None:
        raise RuntimeError("billeting migrations run through billeting.placement.store.migrate")
    context.configure(connection=connection, target_metadata=metadata, compare_type=True)
    with context.begin_transaction():
        context.run_migrations()


run()
