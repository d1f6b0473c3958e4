"""A small bounded scan reads its window whole (``window_rows``): capacity is
tested in Python and the provider summaries are made from the same rows. The
answer must be exactly the one the other paths give: the same providers
admitted, the same summaries (every class or only the requested ones, traits,
custom names), with the usage and names current when another writer has
changed them since the last answer.
"""
from __future__ import annotations

import os
import random
import uuid

import pytest

from billeting.placement.candidates import window_rows
from tests.placement.api.test_allocation_candidates_fleet import Fleet
from tests.placement.api.test_allocation_candidates_window import _random_fleet

# MySQL answers every bounded scan through the joined statement (its scan
# tests capacity in SQL); the whole-window read is PostgreSQL's and SQLite's.
whole_window_backend = pytest.mark.skipif(os.environ.get("BILLETING_TEST_DB") == "mysql",
                                          reason="MySQL does not read windows whole")

QUERIES = ["resources=VCPU:2,MEMORY_MB:1024",
           "resources=VCPU:3,MEMORY_MB:2048,DISK_GB:10",
           "resources=VCPU:4&required=!COMPUTE_STATUS_DISABLED",
           "resources=MEMORY_MB:3000,DISK_GB:2&root_required=!COMPUTE_STATUS_DISABLED",
           "resources=CUSTOM_FPGA:1,VCPU:1",
           "resources=VCPU:1&required=CUSTOM_FAST"]


def _extras(client, fleet: Fleet, rng: random.Random, count: int) -> None:
    """Custom classes and traits on some hosts, to show in the summaries."""
    for i in range(count):
        name = f"x{i:02d}"
        inventory = {"VCPU": 8, "MEMORY_MB": 4096}
        if rng.random() < 0.6:
            inventory["CUSTOM_FPGA"] = {"total": rng.choice([1, 2, 4]), "allocation_ratio": 1.0}
        traits = [t for t in ("CUSTOM_FAST", "HW_CPU_X86_AVX2", "COMPUTE_STATUS_DISABLED") if rng.random() < 0.4]
        fleet.provider(name, inventory=inventory, traits=traits)
        if "CUSTOM_FPGA" in inventory and rng.random() < 0.5:
            fleet.allocate({name: {"CUSTOM_FPGA": 1}})


def _summaries(answer: dict) -> dict:
    return {u: (s["resources"], sorted(s.get("traits", ())), s.get("parent_provider_uuid"),
                s.get("root_provider_uuid"))
            for u, s in answer["provider_summaries"].items()}


def _hosts(fleet: Fleet, answer: dict) -> list[str]:
    return sorted(fleet.name[u] for ar in answer["allocation_requests"] for u in ar["allocations"])


def _whole(monkeypatch, on: bool) -> None:
    monkeypatch.setattr(window_rows, "MAX_WINDOW", 256 if on else 0)


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("mv", ["1.39", "1.26", "1.16"])
@whole_window_backend
def test_whole_window_answers_what_the_other_paths_answer(client, monkeypatch, seed, mv):
    rng = random.Random(seed)
    fleet = _random_fleet(client, rng, 30)
    _extras(client, fleet, rng, 12)
    made = []
    summarize = window_rows.summaries
    monkeypatch.setattr(window_rows, "summaries", lambda *a, **k: made.append(1) or summarize(*a, **k))
    for query in QUERIES:
        if ("root_required" in query and mv < "1.35") or ("required=" in query and mv < "1.17"):
            continue  # (not in that microversion)
        # A limit above the fleet (42 hosts): the scan looks at every provider,
        # so the answer is the whole answer, in a window small enough to read whole.
        _whole(monkeypatch, True)
        made.clear()
        whole = client.get(f"/allocation_candidates?{query}&limit=60", mv=mv)
        assert made, query  # (the path under test answered)
        _whole(monkeypatch, False)
        joined = client.get(f"/allocation_candidates?{query}&limit=60", mv=mv)
        assert len(made) == 1, query
        full = client.get(f"/allocation_candidates?{query}", mv=mv)
        assert whole.status == joined.status == full.status == 200, (query, whole)
        assert fleet.requests(whole.json) == fleet.requests(joined.json) == fleet.requests(full.json), query
        assert _summaries(whole.json) == _summaries(joined.json) == _summaries(full.json), query
        assert 0 < len(full.json["allocation_requests"]) < 42, query  # the fleet tells them apart


@whole_window_backend
def test_whole_window_is_used_for_small_limits(client, monkeypatch):
    """The path under test really runs: a sampled request reads no summary
    statement of its own (the window's rows are the summaries)."""
    from billeting.placement.candidates import summaries

    fleet = Fleet(client)
    for i in range(5):
        fleet.provider(f"h{i}", inventory={"VCPU": 4, "MEMORY_MB": 1024}, traits=["HW_CPU_X86_AVX2"])
    called = []
    monkeypatch.setattr(summaries, "load", lambda *a, **k: called.append(1))
    answer = client.get("/allocation_candidates?resources=VCPU:1&limit=3", mv="1.39")
    assert answer.status == 200, answer
    assert len(answer.json["allocation_requests"]) == 3
    assert called == []
    for summary in answer.json["provider_summaries"].values():
        assert summary["resources"] == {"VCPU": {"capacity": 4, "used": 0},
                                        "MEMORY_MB": {"capacity": 1024, "used": 0}}
        assert summary["traits"] == ["HW_CPU_X86_AVX2"]


def test_another_writer_is_seen_at_once(client):
    """Usage and custom class names changed by another writer since the last
    answer: the next answer shows them (nothing of a provider is kept between
    answers but the standard names, which never change)."""
    fleet = Fleet(client)
    fleet.provider("a", inventory={"VCPU": 2, "CUSTOM_OLD": 1})
    fleet.provider("b", inventory={"VCPU": 2, "CUSTOM_OLD": 1})
    query = "/allocation_candidates?resources=VCPU:2&limit=5"
    first = client.get(query, mv="1.39")
    assert _hosts(fleet, first.json) == ["a", "b"]

    # Another writer fills a (and renames the custom class, mv 1.2-1.6).
    consumer = str(uuid.uuid4())
    resp = client.put(f"/allocations/{consumer}", mv="1.39", json={
        "allocations": {fleet.uuid["a"]: {"resources": {"VCPU": 2}}},
        "consumer_generation": None, "project_id": "p", "user_id": "u", "consumer_type": "TEST"})
    assert resp.status == 204, resp
    resp = client.put("/resource_classes/CUSTOM_OLD", mv="1.2", json={"name": "CUSTOM_NEW"})
    assert resp.status == 200, resp

    second = client.get(query, mv="1.39")
    assert _hosts(fleet, second.json) == ["b"]
    assert second.json["provider_summaries"][fleet.uuid["b"]]["resources"] == {
        "VCPU": {"capacity": 2, "used": 0}, "CUSTOM_NEW": {"capacity": 1, "used": 0}}

    # ... and gives the room back: a is a candidate again, with its usage.
    assert client.delete(f"/allocations/{consumer}", mv="1.39").status == 204
    third = client.get("/allocation_candidates?resources=VCPU:1&limit=5", mv="1.39")
    assert _hosts(fleet, third.json) == ["a", "b"]
    assert third.json["provider_summaries"][fleet.uuid["a"]]["resources"]["VCPU"] == {"capacity": 2, "used": 0}
