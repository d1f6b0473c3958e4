"""A database that cannot be reached is a 503 in the Placement format, for
either server driver; any other database error stays what it was."""
from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from billeting.config import Settings
from billeting.placement.api.app import make_app
from billeting.common.db import outage
from billeting.common.db.engine import make_engine
from tests.conftest import PlacementClient
from tests.support.ports import free_port

DEAD_URLS = {
    "postgresql": "postgresql+psycopg://postgres@127.0.0.1:{port}/nothing?connect_timeout=5",
    "mysql": "mysql+pymysql://root@127.0.0.1:{port}/nothing?connect_timeout=5",
}


@pytest.fixture(params=sorted(DEAD_URLS))
def dead_engine(request):
    # A free port nobody listens on: every connection attempt is refused.
    engine = make_engine(DEAD_URLS[request.param].format(port=free_port()))
    yield engine
    engine.dispose()


def test_a_refused_connection_is_an_outage(dead_engine):
    with pytest.raises(DBAPIError) as caught:
        with dead_engine.connect():
            pass
    assert outage.unavailable_reason(caught.value) == outage.CANNOT_CONNECT


def test_the_api_answers_503_while_the_database_is_unreachable(dead_engine):
    client = PlacementClient(make_app(Settings(db=str(dead_engine.url)), dead_engine))
    for mv in ("1.0", "1.39"):
        resp = client.get("/resource_providers", mv=mv)
        assert resp.status == 503, resp
        assert resp.headers["content-type"] == "application/json"
        assert resp.error["detail"] == "The database is unavailable: it cannot be reached; retry later."
        assert resp.error["request_id"] == resp.headers["x-openstack-request-id"]
        assert resp.error.get("code") == ("placement.undefined_code" if mv == "1.39" else None)
    assert client.post("/resource_providers", json={"name": "x"}).status == 503


def test_other_database_errors_are_not_outages(engine):
    with pytest.raises(DBAPIError) as caught:
        with engine.connect() as conn:
            conn.execute(text("SELECT * FROM no_such_table"))
    assert outage.unavailable_reason(caught.value) is None
    assert outage.unavailable_reason(ValueError("not a database error")) is None


def test_a_connection_the_server_dropped_is_an_outage(engine, test_database):
    if test_database.backend == "sqlite":
        pytest.skip("SQLite has no server to drop a connection")
    victim = engine.connect()
    killer = engine.connect()
    try:
        if test_database.backend == "postgresql":
            pid = victim.execute(text("SELECT pg_backend_pid()")).scalar()
            killer.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
        else:
            pid = victim.execute(text("SELECT CONNECTION_ID()")).scalar()
            killer.execute(text(f"KILL CONNECTION {int(pid)}"))
        with pytest.raises(DBAPIError) as caught:
            victim.execute(text("SELECT 1"))
        assert outage.unavailable_reason(caught.value) == outage.LOST
    finally:
        victim.invalidate()
        victim.close()
        killer.close()
