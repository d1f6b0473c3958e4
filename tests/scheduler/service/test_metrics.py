"""The scheduler service's metrics: a real ``billeting scheduler serve`` with
two workers adds up both workers' counts on ``GET /metrics``, and the 201
answer of ``POST /selections`` says how many claims the chosen host's lost."""
from __future__ import annotations

import http.client
import os
import re
from pathlib import Path
from urllib.parse import urlsplit

import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from billeting.scheduler.api.app import make_app
from billeting.scheduler.service.runtime import SchedulerService
from billeting.scheduler.settings import SchedulerSettings
from tests.concurrency.test_metrics_multiprocess import workers_of
from tests.conftest import PlacementClient as WsgiClient
from tests.scheduler.fleet import Fleet as RankedFleet
from tests.scheduler.test_select import LosingFirstClaims
from tests.scheduler.service.conftest import simple_request
from tests.scheduler.service.procs import running_scheduler
from tests.support.wait import wait_for

REQUESTS = 12
PLACED = ("billeting_scheduler_instances_placed_total", ())
BY_HTTP = ("billeting_scheduler_decision_duration_seconds_count", (("front_door", "http"),))
BY_RPC = ("billeting_scheduler_decision_duration_seconds_count", (("front_door", "rpc"),))


def _call(url: str, method: str, path: str, body: object = None) -> tuple[int, bytes]:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)  # a new connection each time
    try:
        conn.request(method, path, body=orjson.dumps(body) if body is not None else None,
                     headers={"X-Auth-Token": "admin", "Content-Type": "application/json"})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def scrape(url: str) -> dict[tuple[str, tuple], float]:
    status, text = _call(url, "GET", "/metrics")  # no token needed
    assert status == 200
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text.decode()) for s in family.samples}


@pytest.mark.slow
def test_metrics_add_up_across_two_scheduler_workers(db_url, apidb_url, apidb, fleet):
    for i in range(4):
        fleet.add(f"m{i}", vcpu=64, memory_mb=65536)
    with running_scheduler("--db", apidb_url, "--placement-db", db_url, "--auto-upgrade", "--workers", "2",
                           "--threads", "2") as server:
        directory = wait_for(lambda: re.search(r"metrics: workers write to (\S+)", server.log()),
                             "the metrics directory in the log").group(1)
        wait_for(lambda: len(workers_of(server.process.pid)) == 2, "both workers")
        for _ in range(REQUESTS):
            status, body = _call(server.url, "POST", "/selections", simple_request())
            assert status == 201, body
            (chosen, *_), = orjson.loads(body)["selections"]
            assert chosen["claimed"] and chosen.get("claims_lost", 0) == 0
        # Whichever worker answers the scrape, it reports every worker's counts.
        for _ in range(4):
            samples = scrape(server.url)
            assert samples[PLACED] == REQUESTS
            assert samples[BY_HTTP] == REQUESTS and samples[BY_RPC] == 0
        pids = {int(m.group(1)) for n in os.listdir(directory) if (m := re.fullmatch(r"\w+_(\d+)\.db", n))}
        # Files of the master (its metrics exist before the fork) and of the
        # workers that answered something: which ones did is the accept
        # balancing's choice, so only "no stranger, at least one worker".
        workers = workers_of(server.process.pid)
        assert pids <= workers | {server.process.pid} and pids & workers, (pids, workers, server.log())
    assert not Path(directory).exists()


def test_the_201_answer_says_how_many_claims_were_lost(engine, settings, placement, apidb):
    hosts = RankedFleet(placement)
    for i in range(3):
        hosts.host(f"h{i}", memory_mb=32768, vcpus=16 - i)  # h0 ranks first, then h1
    client = LosingFirstClaims(engine, settings, hosts, steal_from=["h0"])
    api = WsgiClient(make_app(SchedulerService(client, apidb, SchedulerSettings(catalog_refresh_s=0.0))))
    resp = api.post("/selections", json={**simple_request(memory_mb=2048), "alternates": 1})
    assert resp.status == 201
    [[chosen, alternate]] = resp.json["selections"]
    assert (chosen["nodename"], chosen["claims_lost"]) == ("h1", 1)
    assert alternate["nodename"] == "h2" and "claims_lost" not in alternate  # 0, the default, is left out
    document = api.get("/openapi.json").json
    answer = document["paths"]["/selections"]["post"]["responses"]["201"]["content"]["application/json"]
    assert answer["schema"] == {"$ref": "#/components/schemas/SelectionList"}
    assert document["components"]["schemas"]["Selection"]["properties"]["claims_lost"] == {"type": "integer",
                                                                                         "default": 0}
