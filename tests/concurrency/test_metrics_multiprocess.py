"""Metrics of a real multi-worker ``billeting serve``: any worker's GET /metrics
adds up every worker's counts, a dead worker's live gauges leave the sums
(its counts stay), and the master removes the metric files when it stops."""
from __future__ import annotations

import http.client
import os
import re
import signal
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.concurrency.serve import Http, running_server, stop
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow

REQUESTS = 40


def scrape(url: str) -> dict[tuple[str, tuple], float]:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    conn.request("GET", "/metrics")  # open by default: no token
    resp = conn.getresponse()
    text = resp.read().decode()
    conn.close()
    assert resp.status == 200
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def workers_of(master_pid: int) -> set[int]:
    children = Path(f"/proc/{master_pid}/task/{master_pid}/children").read_text().split()
    return {int(pid) for pid in children}


LISTED = ("billeting_placement_http_requests_total",
          (("method", "GET"), ("route", "/resource_providers"), ("status", "200")))
POOL_SIZE = ("billeting_placement_db_pool_size", ())


def test_metrics_add_up_across_workers_and_survive_a_dead_worker(db_url, engine):
    with running_server(db_url, workers=2, args=("--threads", "2")) as server:
        directory = wait_for(lambda: re.search(r"metrics: workers write to (\S+)", server.log()),
                             "the metrics directory in the log").group(1)
        # Separate connections, so that both workers take some of the requests.
        clients = [Http(server.url) for _ in range(8)]
        for i in range(REQUESTS):
            assert clients[i % len(clients)].request("GET", "/resource_providers")[0] == 200
        for client in clients:
            client.close()
        # The master forks its workers one by one after the socket is ready: on
        # a loaded machine the second may come a little after the first answered.
        pids = wait_for(lambda: (lambda now: now if len(now) == 2 else None)(workers_of(server.process.pid)),
                        "both workers")
        # Both workers have built their app (and instrumented their pool).
        wait_for(lambda: all(f"gauge_livesum_{pid}.db" in os.listdir(directory) for pid in pids),
                 "the gauges of both workers")
        samples = scrape(server.url)
        assert samples[LISTED] == REQUESTS
        per_worker_pool = samples[POOL_SIZE] / 2
        assert per_worker_pool >= 1

        victim = sorted(pids)[0]
        os.kill(victim, signal.SIGKILL)
        replaced = wait_for(lambda: (lambda now: now if len(now) == 2 and victim not in now else None)(
            workers_of(server.process.pid)), "a replacement worker")
        # The dead worker's live gauges are gone from the directory; its counts are not.
        wait_for(lambda: not any(n.startswith("gauge_livesum") and f"_{victim}." in n
                                 for n in os.listdir(directory)), "the dead worker's gauges to be dropped")
        assert any(n.startswith("counter") and f"_{victim}." in n for n in os.listdir(directory))

        new_worker = (replaced - pids).pop()
        # A worker builds its app (and instruments its pool) as it starts.
        wait_for(lambda: f"gauge_livesum_{new_worker}.db" in os.listdir(directory), "the new worker's gauges")
        after = scrape(server.url)
        assert after[LISTED] >= REQUESTS  # the dead worker's requests still count
        assert after[POOL_SIZE] == pytest.approx(2 * per_worker_pool)  # not three workers' worth
        assert stop(server) == 0
    assert not Path(directory).exists()
