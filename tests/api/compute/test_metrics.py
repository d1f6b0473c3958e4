"""The compute API's ``GET /metrics``: requests counted by route template
(never the raw path), method and status; no token needed."""
from __future__ import annotations

import uuid

from prometheus_client.parser import text_string_to_metric_families

REQUESTS = "billeting_compute_api_http_requests_total"


def scrape(plane) -> dict[tuple[str, tuple], float]:
    resp = plane.client.simulate_get("/metrics")  # no token
    assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/plain")
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(resp.text) for s in family.samples}


def count(samples, route: str, method: str, status: int) -> float:
    return samples.get((REQUESTS, (("method", method), ("route", route), ("status", str(status)))), 0.0)


def test_requests_are_counted_by_route_template_and_status(plane_factory):
    plane = plane_factory(computes=1)
    before = scrape(plane)
    for _ in range(2):
        assert plane.call("GET", "/v2.1/flavors").status_code == 200
    missing = str(uuid.uuid4())
    assert plane.call("GET", f"/v2.1/servers/{missing}").status_code == 404
    after = scrape(plane)
    assert count(after, "/v2.1/flavors", "GET", 200) == count(before, "/v2.1/flavors", "GET", 200) + 2
    assert count(after, "/v2.1/servers/{server_id}", "GET", 404) == \
        count(before, "/v2.1/servers/{server_id}", "GET", 404) + 1
    assert not any(missing in str(labels) for _, labels in after)
    assert plane.client.simulate_post("/metrics").status_code == 405
