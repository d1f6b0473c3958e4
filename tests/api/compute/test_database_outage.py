"""A database the compute API cannot use (unreachable, out of connections,
pool exhausted) is a 503 in Nova's format, never a 500."""
from __future__ import annotations

import falcon
import falcon.testing
import pytest
from sqlalchemy import create_engine, text

from billeting.api.compute import errors
from billeting.commands.pools import pool_limits
from billeting.common.db.engine import PoolLimits, configure_pools, make_engine
from tests.support.ports import free_port


class _Query:
    def __init__(self, engine) -> None:
        self.engine = engine

    def on_get(self, req, resp) -> None:
        with self.engine.connect() as conn:
            conn.execute(text("SELECT 1"))


def _client(engine) -> falcon.testing.TestClient:
    app = falcon.App()
    app.add_error_handler(Exception, errors.handle_any)
    app.add_error_handler(falcon.HTTPError, errors.handle_http)
    app.add_route("/q", _Query(engine))
    return falcon.testing.TestClient(app)


def test_an_unreachable_database_is_a_503_in_novas_format():
    engine = create_engine(f"postgresql+psycopg://nobody@127.0.0.1:{free_port()}/nothing")
    r = _client(engine).simulate_get("/q")
    assert r.status_code == 503, r.text
    fault = r.json["serviceUnavailable"]
    assert fault["code"] == 503 and "database is unavailable" in fault["message"], fault
    assert r.headers.get("retry-after") == "1"


def test_an_exhausted_pool_is_a_503(tmp_path):
    engine = create_engine(f"sqlite:///{tmp_path / 'x.sqlite'}", pool_size=1, max_overflow=0, pool_timeout=0.1)
    held = engine.connect()
    try:
        r = _client(engine).simulate_get("/q")
    finally:
        held.close()
    assert r.status_code == 503, r.text
    assert "no free connections" in r.json["serviceUnavailable"]["message"]


def test_pool_limits_apply_to_every_engine_of_the_process(tmp_path):
    import argparse

    conf = tmp_path / "b.conf"
    conf.write_text("[database]\nmax_pool_size = 2\nmax_overflow = 1\n")
    args = argparse.Namespace(config_file=str(conf), db_pool_size=None, db_max_overflow=None)
    assert pool_limits(args) == (2, 1)
    args.db_pool_size = 3
    assert pool_limits(args) == (3, 1)  # the flag wins
    saved = PoolLimits.pool_size, PoolLimits.max_overflow
    try:
        configure_pools(2, 1)
        engine = make_engine("postgresql+psycopg://nobody@127.0.0.1:1/nothing", pool_size=50)
        assert (engine.pool.size(), engine.pool._max_overflow) == (2, 1)
        with pytest.raises(ValueError):
            configure_pools(0, 0)
    finally:
        PoolLimits.pool_size, PoolLimits.max_overflow = saved
