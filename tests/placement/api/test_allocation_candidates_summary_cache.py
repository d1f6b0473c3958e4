"""Provider summaries served through the per-process summary cache stay exact
after every kind of change that can alter them, including the ones that do
not bump provider generations (usage going down, reparenting, class renames,
a provider re-created under the same uuid)."""
from __future__ import annotations

import gc
import tracemalloc

import pytest

from billeting.placement.candidates import summary_cache
from tests.placement.api.test_allocation_candidates_fleet import Fleet

AC = "/allocation_candidates"


@pytest.fixture(autouse=True)
def cached(monkeypatch):
    summary_cache.clear()
    monkeypatch.setattr(summary_cache, "MIN_SCOPE", 0)
    yield
    summary_cache.clear()


@pytest.fixture
def fills(monkeypatch) -> list:
    """Providers read in full by each cache fill."""
    calls: list = []
    real = summary_cache._fill

    def spy(conn, stale, rc_name):
        calls.append(len(stale))
        return real(conn, stale, rc_name)

    monkeypatch.setattr(summary_cache, "_fill", spy)
    return calls


def summaries(client, query: str = "resources=VCPU:1", mv: str = "1.39") -> dict:
    resp = client.get(f"{AC}?{query}", mv=mv)
    assert resp.status == 200, resp
    return resp.json["provider_summaries"]


def two_hosts(client) -> Fleet:
    fleet = Fleet(client)
    fleet.provider("cn1", inventory={"VCPU": 8, "MEMORY_MB": 1024}, traits=["HW_CPU_X86_AVX2"])
    fleet.provider("cn2", inventory={"VCPU": 4}, traits=["HW_CPU_X86_SSE2"])
    return fleet


def test_unchanged_providers_are_not_read_again(client, fills):
    fleet = two_hosts(client)
    first = summaries(client)
    assert fills == [2]
    assert summaries(client) == first
    assert fills == [2]
    fleet.set_traits("cn2", ["HW_CPU_X86_SSE2", "STORAGE_DISK_SSD"])
    changed = summaries(client)
    assert fills == [2, 1]  # only the provider whose generation moved
    assert sorted(changed[fleet.uuid["cn2"]]["traits"]) == ["HW_CPU_X86_SSE2", "STORAGE_DISK_SSD"]
    assert changed[fleet.uuid["cn1"]] == first[fleet.uuid["cn1"]]


def test_inventory_changes_show(client):
    fleet = two_hosts(client)
    summaries(client)
    fleet.set_inventory("cn1", {"VCPU": {"total": 16, "allocation_ratio": 2.0}, "DISK_GB": 100})
    got = summaries(client)[fleet.uuid["cn1"]]["resources"]
    assert got == {"VCPU": {"capacity": 32, "used": 0}, "DISK_GB": {"capacity": 100, "used": 0}}


@pytest.fixture(params=["scoped", "everything"])
def usage_reads(request, monkeypatch):
    """Usage summed for the providers in scope, or for all (large scopes)."""
    if request.param == "everything":
        monkeypatch.setattr(summary_cache, "_SCOPED_USAGE_MAX", 0)


@pytest.mark.usefixtures("usage_reads")
def test_usage_going_up_and_down_shows(client):
    fleet = two_hosts(client)
    summaries(client)
    consumer = fleet.allocate({"cn1": {"VCPU": 3, "MEMORY_MB": 256}})
    got = summaries(client)[fleet.uuid["cn1"]]["resources"]
    assert got == {"VCPU": {"capacity": 8, "used": 3}, "MEMORY_MB": {"capacity": 1024, "used": 256}}
    # DELETE /allocations bumps no provider generation (docs/design/placement-model.md#generations)
    assert client.delete(f"/allocations/{consumer}", mv="1.39").status == 204
    got = summaries(client)[fleet.uuid["cn1"]]["resources"]
    assert got == {"VCPU": {"capacity": 8, "used": 0}, "MEMORY_MB": {"capacity": 1024, "used": 0}}


@pytest.mark.usefixtures("usage_reads")
def test_a_consumer_moving_away_frees_the_old_provider(client):
    fleet = two_hosts(client)
    consumer = fleet.allocate({"cn1": {"VCPU": 2}})
    assert summaries(client)[fleet.uuid["cn1"]]["resources"]["VCPU"]["used"] == 2
    generation = client.get(f"/allocations/{consumer}", mv="1.39").json["consumer_generation"]
    resp = client.put(f"/allocations/{consumer}", mv="1.39", json={
        "allocations": {fleet.uuid["cn2"]: {"resources": {"VCPU": 2}}}, "consumer_generation": generation,
        "project_id": "p", "user_id": "u", "consumer_type": "TEST"})
    assert resp.status == 204, resp
    got = summaries(client)
    assert got[fleet.uuid["cn1"]]["resources"]["VCPU"]["used"] == 0  # cn1 was not bumped
    assert got[fleet.uuid["cn2"]]["resources"]["VCPU"]["used"] == 2


def test_reparenting_shows_the_new_parent_and_root(client):
    fleet = Fleet(client)
    fleet.provider("cn1", inventory={"DISK_GB": 10})
    fleet.provider("cn2", inventory={"DISK_GB": 10})
    fleet.provider("gpu", parent="cn1", inventory={"VGPU": 1})
    before = summaries(client, "resources=VGPU:1")[fleet.uuid["gpu"]]
    assert before["parent_provider_uuid"] == fleet.uuid["cn1"]
    resp = client.put(f"/resource_providers/{fleet.uuid['gpu']}", mv="1.39", json={
        "name": "gpu", "parent_provider_uuid": fleet.uuid["cn2"]})
    assert resp.status == 200, resp
    after = summaries(client, "resources=VGPU:1")
    assert after[fleet.uuid["gpu"]]["parent_provider_uuid"] == fleet.uuid["cn2"]
    assert after[fleet.uuid["gpu"]]["root_provider_uuid"] == fleet.uuid["cn2"]
    assert fleet.uuid["cn2"] in after and fleet.uuid["cn1"] not in after


def test_a_renamed_custom_class_shows_its_new_name(client):
    fleet = Fleet(client)
    fleet.provider("bm1", inventory={"CUSTOM_BAREMETAL_GOLD": {"total": 1, "max_unit": 1}, "VCPU": 1})
    assert "CUSTOM_BAREMETAL_GOLD" in summaries(client)[fleet.uuid["bm1"]]["resources"]
    resp = client.put("/resource_classes/CUSTOM_BAREMETAL_GOLD", mv="1.2", json={"name": "CUSTOM_BAREMETAL_PLATINUM"})
    assert resp.status == 200, resp
    got = summaries(client)[fleet.uuid["bm1"]]["resources"]
    assert set(got) == {"CUSTOM_BAREMETAL_PLATINUM", "VCPU"}


def test_a_provider_recreated_under_the_same_uuid_is_read_afresh(client):
    fleet = Fleet(client)
    fleet.provider("keep", inventory={"VCPU": 1})
    # (on SQLite the re-created provider even gets the same id back, and here
    # the same generation: only its creation time tells it apart)
    uuid = fleet.provider("again", inventory={"VCPU": 2})
    assert summaries(client)[uuid]["resources"]["VCPU"]["capacity"] == 2
    assert client.delete(f"/resource_providers/{uuid}", mv="1.39").status == 204
    resp = client.post("/resource_providers", mv="1.39", json={"name": "again", "uuid": uuid})
    assert resp.status == 200, resp
    resp = client.put(f"/resource_providers/{uuid}/inventories", mv="1.39", json={
        "resource_provider_generation": 0, "inventories": {"VCPU": {"total": 4}}})
    assert resp.status == 200, resp
    assert summaries(client)[uuid]["resources"] == {"VCPU": {"capacity": 4, "used": 0}}


def test_old_microversions_list_requested_classes_only(client):
    fleet = two_hosts(client)
    summaries(client)  # fills the cache with every class
    got = summaries(client, "resources=MEMORY_MB:1", mv="1.26")
    assert got == {fleet.uuid["cn1"]: {"resources": {"MEMORY_MB": {"capacity": 1024, "used": 0}},
                                       "traits": ["HW_CPU_X86_AVX2"]}}


def _cached_ids() -> set[int]:
    return {p for cache in summary_cache._CACHES.values() for p in cache.entries}


def _flat_hosts(client, count: int, traits: list[str]) -> Fleet:
    fleet = Fleet(client)
    for i in range(count):
        fleet.provider(f"cn{i}", inventory={"VCPU": i + 1, "MEMORY_MB": 1024}, traits=traits)
    return fleet


def test_a_full_cache_keeps_its_bound_and_stays_exact(client, monkeypatch, fills):
    fleet = _flat_hosts(client, 40, ["HW_CPU_X86_AVX2", "HW_CPU_X86_SSE2"])
    monkeypatch.setattr(summary_cache, "MAX_BYTES", 25_000)  # room for about 15 of them
    expected = {f"cn{i}": i + 1 for i in range(40)}
    for round_ in range(3):
        got = summaries(client)
        assert {fleet.name[u]: s["resources"]["VCPU"]["capacity"] for u, s in got.items()} == expected
        assert 0 < summary_cache.charged_bytes() <= summary_cache.MAX_BYTES
    kept = len(_cached_ids())
    assert 0 < kept < 40
    # The part that fits stays; only the rest is read again each time.
    assert fills == [40, 40 - kept, 40 - kept]


def test_the_bound_covers_what_the_cache_really_holds(client, monkeypatch):
    """Measured: the memory the cache frees when emptied, serialized summaries
    of both cached shapes included, is within what it was charged."""
    _flat_hosts(client, 40, ["HW_CPU_X86_AVX2", "CUSTOM_A_RATHER_LONG_TRAIT_NAME"])
    monkeypatch.setattr(summary_cache, "MAX_BYTES", 40_000)
    summaries(client)  # (statements and names cached before measuring)
    summary_cache.clear()
    tracemalloc.start()
    try:
        for mv in ("1.39", "1.28", "1.39"):  # (two shapes of serialized summary)
            summaries(client, mv=mv)
        gc.collect()
        charged = summary_cache.charged_bytes()
        with_cache = tracemalloc.get_traced_memory()[0]
        summary_cache.clear()
        gc.collect()
        held = with_cache - tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert 0 < held <= charged <= summary_cache.MAX_BYTES


def test_a_full_cache_makes_room_for_the_scope_it_serves(client, monkeypatch):
    fleet = Fleet(client)
    for i in range(20):
        fleet.provider(f"a{i}", inventory={"VCPU": 4}, traits=["HW_CPU_X86_AVX2"])
        fleet.provider(f"b{i}", inventory={"VCPU": 4}, traits=["HW_CPU_X86_SSE2"])
    monkeypatch.setattr(summary_cache, "MAX_BYTES", 30_000)  # about one group's worth
    ids = {}
    for group, trait in (("a", "HW_CPU_X86_AVX2"), ("b", "HW_CPU_X86_SSE2")):
        got = summaries(client, f"resources=VCPU:1&required={trait}")
        assert {fleet.name[u][0] for u in got} == {group}
        ids[group] = _cached_ids()
    assert ids["a"] and ids["b"] and not ids["a"] & ids["b"]  # a's entries made way for b's
    assert summary_cache.charged_bytes() <= summary_cache.MAX_BYTES
