"""The bounded scan of a flat fleet tests capacity set-based over each batch
of provider ids (``sql.serving_window``); the unbounded query tests it with
its own set form over the whole fleet. Both must admit exactly the same
providers, whatever the inventories' units, reservations, ratios and usage.
"""
from __future__ import annotations

import random
import uuid

import pytest

from tests.api.direct_rows import add_aggregates
from tests.api.test_allocation_candidates_fleet import Fleet

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


@pytest.mark.parametrize("seed", [4, 5])
def test_fleetwide_answer_is_the_probes_answer(client, engine, monkeypatch, seed):
    """SQLite answers an unbounded flat query with the capacity test in Python
    on the summaries' usage (``candidates.fleetwide``); the correlated probes
    it replaces must give the very same body, summaries' usage included, for
    every microversion form of the answer."""
    if engine.dialect.name != "sqlite":
        pytest.skip("the fleetwide path is SQLite's")
    from billeting.placement.candidates import fleetwide

    rng = random.Random(seed)
    fleet = _random_fleet(client, rng, 40)
    agg = str(uuid.uuid4())
    for name in ("h01", "h02", "h03", "h17"):
        add_aggregates(engine, fleet.uuid[name], agg)
    queries = [("1.39", "resources=VCPU:2,MEMORY_MB:1024"),
               ("1.39", "resources=VCPU:3,MEMORY_MB:2048,DISK_GB:10&root_required=!COMPUTE_STATUS_DISABLED"),
               ("1.39", f"resources=VCPU:1&member_of={agg}"),  # a few providers: usage read for them only
               ("1.39", "resources=VCPU:100"),  # none
               ("1.26", "resources=MEMORY_MB:512"),  # summaries of the requested classes only
               ("1.10", "resources=DISK_GB:4")]  # list-form requests
    for mv, query in queries:
        monkeypatch.setattr(fleetwide, "applies", lambda *a, **k: False)
        probed = client.get(f"/allocation_candidates?{query}", mv=mv)
        monkeypatch.undo()
        answered = client.get(f"/allocation_candidates?{query}", mv=mv)
        assert probed.status == answered.status == 200
        assert answered.json == probed.json, query


def test_fleetwide_answer_is_the_probes_answer_on_trees_before_1_29(client, engine, monkeypatch):
    """Below 1.29 a nested fleet is answered provider by provider with the
    providers' own summaries, so the fleetwide path serves it too; tree-wide
    rules (the root's aggregates and forbidden traits) must hold as before."""
    if engine.dialect.name != "sqlite":
        pytest.skip("the fleetwide path is SQLite's")
    from billeting.placement.candidates import fleetwide

    fleet = Fleet(client)
    agg = str(uuid.uuid4())
    for i in range(6):
        root = f"cn{i}"
        fleet.provider(root, inventory={"VCPU": 8, "MEMORY_MB": 4096}, aggregates=[agg] if i % 2 else (),
                       traits=["COMPUTE_STATUS_DISABLED"] if i == 5 else ())
        fleet.provider(f"{root}-nic", parent=root, inventory={"SRIOV_NET_VF": 4},
                       traits=["CUSTOM_PHYSNET_A"] if i % 3 else ())
        fleet.allocate({root: {"VCPU": i + 2}, f"{root}-nic": {"SRIOV_NET_VF": i % 4 + 1}})
    # (mv, query, answered by the fleetwide path: one provider per answer)
    queries = [("1.26", "resources=VCPU:4", True),
               ("1.26", "resources=VCPU:1,MEMORY_MB:512", False),  # tree-wide, two classes: combined
               ("1.26", "resources=SRIOV_NET_VF:2", True),
               ("1.26", f"resources=SRIOV_NET_VF:1&member_of={agg}", True),  # the root's aggregate counts
               ("1.28", "resources1=SRIOV_NET_VF:1&required1=CUSTOM_PHYSNET_A", True),
               ("1.28", "resources=VCPU:2&required=!COMPUTE_STATUS_DISABLED", True)]
    for mv, query, direct in queries:
        monkeypatch.setattr(fleetwide, "applies", lambda *a, **k: False)
        probed = client.get(f"/allocation_candidates?{query}", mv=mv)
        monkeypatch.undo()
        calls = []
        real = fleetwide.find
        monkeypatch.setattr(fleetwide, "find", lambda *a, **k: calls.append(1) or real(*a, **k))
        answered = client.get(f"/allocation_candidates?{query}", mv=mv)
        monkeypatch.undo()
        assert bool(calls) == direct, query
        assert probed.status == answered.status == 200, (query, answered)
        assert answered.json == probed.json, query
        assert answered.json["allocation_requests"], query  # each query finds something
