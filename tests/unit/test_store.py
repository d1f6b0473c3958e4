"""The store layer: migrations match the tables, the name sync is idempotent,
and the transaction helper retries what it should and nothing else."""
from __future__ import annotations

import threading

import os_resource_classes
import os_traits
import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError

from billeting.placement.store import migrate, tables as t, tx
from billeting.placement.store.sync import sync_standard_names


def test_migrations_create_exactly_the_declared_schema(engine):
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}), t.metadata)
    assert diff == []
    assert migrate.is_current(engine)


def test_standard_names_are_synced_idempotently_from_several_threads(engine):
    errors: list[BaseException] = []

    def run():
        try:
            sync_standard_names(engine)
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    with engine.connect() as conn:
        classes = dict(conn.execute(select(t.resource_classes.c.name, t.resource_classes.c.id)).all())
        trait_count = conn.execute(select(func.count()).select_from(t.traits)).scalar_one()
    for index, name in enumerate(os_resource_classes.STANDARDS):
        assert classes[name] == index
    assert trait_count == len(os_traits.get_traits())


def test_retry_reruns_the_unit_of_work(engine):
    calls = []

    def work(conn):
        calls.append(1)
        if len(calls) < 3:
            raise tx.Retry("lost a race")
        return "done"

    assert tx.run_write(engine, work) == "done"
    assert len(calls) == 3


def test_retries_exhausted_is_raised_with_the_reason(engine):
    def work(conn):
        raise tx.Retry("always loses")

    with pytest.raises(tx.RetriesExhausted) as info:
        tx.run_write(engine, work, retries=2)
    assert info.value.reason == "always loses"


def test_non_transient_errors_are_not_retried(engine):
    calls = []

    def work(conn):
        calls.append(1)
        conn.execute(t.traits.insert().values(name="HW_CPU_X86_AVX2"))

    with pytest.raises(IntegrityError):
        tx.run_write(engine, work)
    assert len(calls) == 1


def test_failed_unit_of_work_leaves_nothing_behind(engine):
    def work(conn):
        conn.execute(t.traits.insert().values(name="CUSTOM_HALF_WRITTEN"))
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        tx.run_write(engine, work)
    with engine.connect() as conn:
        assert conn.execute(select(t.traits.c.id).where(t.traits.c.name == "CUSTOM_HALF_WRITTEN")).first() is None


def test_a_dead_pooled_connection_is_replaced_without_an_error(test_database, db_url):
    """Pooled connections are not pinged before use; a unit of work that finds
    its connection dead (database restarted, backend killed) before COMMIT is
    simply run again on a fresh one."""
    from sqlalchemy import create_engine, text

    from billeting.common.db.engine import make_engine

    if test_database.backend == "sqlite":
        pytest.skip("SQLite has no server connection to lose")
    postgres = test_database.backend == "postgresql"
    eng = make_engine(db_url, pool_size=1)
    admin = create_engine(db_url, isolation_level="AUTOCOMMIT")
    try:
        backend = tx.run_read(eng, lambda conn: conn.execute(
            text("SELECT pg_backend_pid()" if postgres else "SELECT CONNECTION_ID()")).scalar())
        with admin.connect() as conn:
            conn.execute(text(f"SELECT pg_terminate_backend({int(backend)})" if postgres
                              else f"KILL {int(backend)}"))
        calls: list[int] = []

        def work(conn):
            calls.append(1)
            return conn.execute(text("SELECT 42")).scalar()

        assert tx.run_write(eng, work) == 42
        assert len(calls) == 2  # the first attempt met the dead connection
    finally:
        eng.dispose()
        admin.dispose()
