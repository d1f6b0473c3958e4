"""The bounded scan of a flat fleet tests capacity set-based over each batch
of provider ids (``sql.serving_window``); the unbounded query tests it with
its own set form over the whole fleet. Both must admit exactly the same
providers, whatever the inventories' units, reservations, ratios and usage.
"""
from __future__ import annotations

import random
import uuid

import pytest

from tests.placement.api.test_allocation_candidates_fleet import Fleet

pytestmark = pytest.mark.usefixtures("summary_paths")


def _random_fleet(client, rng: random.Random, count: int) -> Fleet:
    fleet = Fleet(client)
    for i in range(count):
        inventory = {}
        for rc, total in (("VCPU", 8), ("MEMORY_MB", 4096), ("DISK_GB", 100)):
            if rng.random() < 0.1:
                continue  # no inventory of this class at all
            inventory[rc] = {"total": total, "reserved": rng.choice([0, 0, 1, total // 4]),
                             "min_unit": rng.choice([1, 1, 2, 4]), "max_unit": rng.choice([total, total, 2, 3]),
                             "step_size": rng.choice([1, 1, 1, 2, 3]),
                             "allocation_ratio": rng.choice([1.0, 1.0, 1.5, 0.9, 16.0])}
        fleet.provider(f"h{i:02d}", inventory=inventory or None,
                       traits=["COMPUTE_STATUS_DISABLED"] if rng.random() < 0.1 else ())
    # Usage, some of it near the limits (refused allocations are simply skipped).
    for _ in range(2 * count):
        name = f"h{rng.randrange(count):02d}"
        rc, amount = rng.choice([("VCPU", 1), ("VCPU", 2), ("VCPU", 4), ("MEMORY_MB", 512), ("MEMORY_MB", 1024),
                                 ("MEMORY_MB", 2048), ("DISK_GB", 50)])
        resp = client.put(f"/allocations/{uuid.uuid4()}", mv="1.39", json={
            "allocations": {fleet.uuid[name]: {"resources": {rc: amount}}},
            "consumer_generation": None, "project_id": "p", "user_id": "u", "consumer_type": "TEST"})
        assert resp.status in (204, 400, 409), resp
    return fleet


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_bounded_scan_admits_what_the_full_query_admits(client, seed):
    rng = random.Random(seed)
    fleet = _random_fleet(client, rng, 40)
    queries = ["resources=VCPU:2,MEMORY_MB:1024",
               "resources=VCPU:3,MEMORY_MB:2048,DISK_GB:10",
               "resources=VCPU:4&required=!COMPUTE_STATUS_DISABLED",
               "resources=MEMORY_MB:3000,DISK_GB:2&root_required=!COMPUTE_STATUS_DISABLED"]
    for query in queries:
        full = client.get(f"/allocation_candidates?{query}", mv="1.39")
        bounded = client.get(f"/allocation_candidates?{query}&limit=1000", mv="1.39")
        small = client.get(f"/allocation_candidates?{query}&limit=7", mv="1.39")
        assert full.status == bounded.status == small.status == 200
        assert fleet.requests(bounded.json) == fleet.requests(full.json), query
        assert fleet.summary_names(bounded.json) == fleet.summary_names(full.json), query
        assert set(fleet.requests(small.json)) <= set(fleet.requests(full.json)), query
        assert len(small.json["allocation_requests"]) == min(7, len(full.json["allocation_requests"]))
        assert 0 < len(full.json["allocation_requests"]) < 40, query  # the fleet tells them apart

