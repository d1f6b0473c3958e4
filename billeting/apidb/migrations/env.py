"""Alembic environment of the API database: driven from ``billeting.apidb.migrate``."""
from alembic import context

from billeting.apidb.migrate import VERSION_TABLE
from billeting.apidb.tables import metadata

config = context.config


def _ours(obj, name, type_, reflected, compare_to) -> bool:
    # Autogenerate looks at this schema's tables only: the database may
    # also hold Placement's (or anybody's) tables.
    return not (type_ == "table" and reflected and compare_to is None)


def run() -> None:
    connection = config.attributes.get("connection")
    if connection is None:
        raise RuntimeError("API database migrations run through billeting.apidb.migrate")
    context.configure(connection=connection, target_metadata=metadata, compare_type=True,
                      version_table=VERSION_TABLE, include_object=_ours)
    with context.begin_transaction():
        context.run_migrations()


run()
