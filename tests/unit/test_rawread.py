"""``common.db.rawread``: one SELECT through the driver keeps what the pool
and ``run_read`` promise: SQLAlchemy's exceptions, a dead pooled connection
read again on a fresh one, the connection handed back as it was taken."""
from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError, ProgrammingError

from billeting.common.db import outage
from billeting.common.db.engine import make_engine
from billeting.common.db.rawread import fetch_all
from billeting.common.db.tx import run_read
from tests.support.ports import free_port


@pytest.fixture
def pg_engine(test_database):
    if test_database.backend != "postgresql":
        pytest.skip("the driver path is PostgreSQL's")
    engine = make_engine(test_database.url, pool_size=1, max_overflow=0)  # (one pooled connection, reused)
    yield engine
    engine.dispose()


def test_rows_come_back_and_the_connection_goes_back_as_it_was(pg_engine):
    rows = fetch_all(pg_engine, "SELECT %(a)s::int + 1, %(b)s::text", {"a": 41, "b": "x"})
    assert rows == [(42, "x")]
    with pg_engine.connect() as conn:
        assert conn.connection.dbapi_connection.autocommit is False
    assert run_read(pg_engine, lambda conn: conn.execute(text("SELECT 1")).scalar()) == 1


def test_a_pooled_connection_the_server_dropped_is_read_again_on_a_fresh_one(pg_engine):
    with pg_engine.connect() as conn:
        pid = conn.execute(text("SELECT pg_backend_pid()")).scalar()
    killer = make_engine(str(pg_engine.url.render_as_string(hide_password=False)))
    with killer.connect() as conn:
        conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
    killer.dispose()
    (now,), = fetch_all(pg_engine, "SELECT pg_backend_pid()", {})
    assert now != pid


def test_errors_are_sqlalchemys(pg_engine):
    with pytest.raises(ProgrammingError) as caught:
        fetch_all(pg_engine, "SELECT * FROM no_such_table", {})
    assert outage.unavailable_reason(caught.value) is None
    assert fetch_all(pg_engine, "SELECT 1", {}) == [(1,)]  # (the connection is still good)
    refused = make_engine(f"postgresql+psycopg://nobody@127.0.0.1:{free_port()}/gone?connect_timeout=2")
    try:
        with pytest.raises(DBAPIError) as caught:
            fetch_all(refused, "SELECT 1", {})
        assert outage.unavailable_reason(caught.value) == outage.CANNOT_CONNECT
    finally:
        refused.dispose()
