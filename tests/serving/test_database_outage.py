"""PostgreSQL restarted under a running ``billeting serve``: requests during
the outage get a 503 that says so, and the same server processes serve
again once the database is back, with no restart.

Uses a private cluster (never the shared server), so it runs once per suite,
in the PostgreSQL pass."""
from __future__ import annotations

import os
import time

import pytest

from tests.concurrency.serve import Http, running_server
from tests.serving.private_postgres import private_cluster
from tests.serving.rawhttp import child_pids
from tests.support.wait import wait_for

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.environ.get("BILLETING_TEST_DB") != "postgresql",
                       reason="starts its own PostgreSQL cluster; runs in the postgresql pass"),
]


def _wait_until(http: Http, path: str, status: int, timeout: float) -> tuple[int, dict]:
    deadline = time.monotonic() + timeout
    while True:
        got = http.request("GET", path)
        if got[0] == status or time.monotonic() > deadline:
            return got
        time.sleep(0.2)


def test_a_database_restart_gives_503s_then_recovers_without_a_server_restart():
    with private_cluster() as cluster, \
            running_server(cluster.url, workers=2, args=("--auto-upgrade",)) as server:
        http = Http(server.url)
        status, created = http.request("POST", "/resource_providers", {"name": "survivor"})
        assert status == 200, created
        # The arbiter forks its workers one after the other: the first may
        # answer before the second exists, so wait for both.
        workers = wait_for(lambda: (lambda now: len(now) == 2 and now)(child_pids(server.process.pid)),
                           "both workers running", timeout=30)

        cluster.stop()
        for method, path, body in (("GET", "/resource_providers", None),
                                   ("GET", f"/resource_providers/{created['uuid']}", None),
                                   ("POST", "/resource_providers", {"name": "during-outage"}),
                                   ("GET", "/resource_providers", None)):
            status, doc = http.request(method, path, body)
            assert status == 503, (status, doc, server.log()[-3000:])
            [err] = doc["errors"]
            assert err["title"] == "Service Unavailable" and err["request_id"].startswith("req-")
            assert err["detail"].startswith("The database is unavailable: ")
            assert err["detail"].endswith("; retry later.")
            assert "127.0.0.1" not in err["detail"]  # the driver's text stays in the log
        assert http.request("GET", "/")[0] == 200  # the version document needs no database

        cluster.start()
        status, listing = _wait_until(http, "/resource_providers", 200, timeout=30)
        assert status == 200, (listing, server.log()[-3000:])
        assert [rp["name"] for rp in listing["resource_providers"]] == ["survivor"]
        status, _ = http.request("POST", "/resource_providers", {"name": "after-outage"})
        assert status == 200
        # The same worker processes: recovery took no restart.
        assert child_pids(server.process.pid) == workers
        assert "database unavailable during" in server.log()
        assert "Traceback" not in server.log()
        http.close()
