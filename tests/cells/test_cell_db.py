"""The cell database schema: Alembic creates exactly the declared tables,
in a history of its own that can share a server database with Placement's."""
from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect

from billeting.cells import migrate
from billeting.cells import tables as ct
from billeting.cells.wiring import CellSchemaError, open_cell_database
from billeting.placement.store import migrate as placement_migrate

import pytest


def test_migrations_create_exactly_the_declared_cell_schema(cell_db):
    engine = open_cell_database(cell_db)
    try:
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"compare_type": True, "version_table": ct.VERSION_TABLE})
            assert compare_metadata(context, ct.metadata) == []
        assert migrate.is_current(engine)
    finally:
        engine.dispose()


def test_the_cell_history_lives_beside_placements_in_one_database(private_engine):
    # private_engine holds Placement's schema; add the cell schema to it.
    assert placement_migrate.is_current(private_engine)
    migrate.upgrade(private_engine)
    assert migrate.is_current(private_engine) and placement_migrate.is_current(private_engine)
    tables = set(inspect(private_engine).get_table_names())
    assert {"alembic_version", ct.VERSION_TABLE, "instances", "resource_providers"} <= tables


def test_an_empty_cell_database_is_refused_until_upgraded(private_engine):
    url = private_engine.url.render_as_string(hide_password=False)
    with pytest.raises(CellSchemaError, match="empty"):
        open_cell_database(url)
    engine = open_cell_database(url, upgrade=True)
    engine.dispose()
    open_cell_database(url).dispose()
