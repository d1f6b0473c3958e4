"""A small fleet builder for the allocation-candidates tests, plus tests of the
builder itself. Everything goes through the public HTTP API, so the fixtures
exercise the same paths a real client would.
"""
from __future__ import annotations

import uuid as uuidlib

import pytest

# Every test here runs with summaries read directly and through the cache.
pytestmark = pytest.mark.usefixtures("summary_paths")

AGG = "a1f5c0de-0000-4000-8000-000000000001"
AGG2 = "a1f5c0de-0000-4000-8000-000000000002"


class Fleet:
    """Providers by name; ``uuid[name]`` and ``name[uuid]`` translate."""

    def __init__(self, client) -> None:
        self.client = client
        self.uuid: dict[str, str] = {}
        self.name: dict[str, str] = {}
        self.generation: dict[str, int] = {}

    def provider(self, name: str, *, parent: str | None = None, inventory: dict | None = None,
                 traits: list[str] | tuple = (), aggregates: list[str] | tuple = ()) -> str:
        body = {"name": name, "uuid": str(uuidlib.uuid4())}
        if parent is not None:
            body["parent_provider_uuid"] = self.uuid[parent]
        resp = self.client.post("/resource_providers", json=body, mv="1.20")
        assert resp.status == 200, resp
        uuid = resp.json["uuid"]
        self.uuid[name], self.name[uuid] = uuid, name
        self.generation[name] = resp.json["generation"]
        if inventory:
            self.set_inventory(name, inventory)
        if traits:
            self.set_traits(name, list(traits))
        if aggregates:
            self.set_aggregates(name, list(aggregates))
        return uuid

    def set_inventory(self, name: str, inventory: dict) -> None:
        records = {rc: (spec if isinstance(spec, dict) else {"total": spec})
                   for rc, spec in inventory.items()}
        for rc in records:
            if rc.startswith("CUSTOM_"):
                assert self.client.put(f"/resource_classes/{rc}", mv="1.7").status in (201, 204)
        resp = self.client.put(f"/resource_providers/{self.uuid[name]}/inventories", mv="1.39", json={
            "resource_provider_generation": self.generation[name], "inventories": records})
        assert resp.status == 200, resp
        self.generation[name] = resp.json["resource_provider_generation"]

    def set_traits(self, name: str, traits: list[str]) -> None:
        for trait in traits:
            if trait.startswith("CUSTOM_"):
                assert self.client.put(f"/traits/{trait}", mv="1.6").status in (201, 204)
        resp = self.client.put(f"/resource_providers/{self.uuid[name]}/traits", mv="1.39", json={
            "resource_provider_generation": self.generation[name], "traits": traits})
        assert resp.status == 200, resp
        self.generation[name] = resp.json["resource_provider_generation"]

    def set_aggregates(self, name: str, aggregates: list[str]) -> None:
        resp = self.client.put(f"/resource_providers/{self.uuid[name]}/aggregates", mv="1.39", json={
            "resource_provider_generation": self.generation[name], "aggregates": aggregates})
        assert resp.status == 200, resp
        self.generation[name] = resp.json["resource_provider_generation"]

    def allocate(self, allocations: dict[str, dict[str, int]]) -> str:
        """Allocate for a new consumer: {provider name: {class: amount}}."""
        consumer = str(uuidlib.uuid4())
        resp = self.client.put(f"/allocations/{consumer}", mv="1.39", json={
            "allocations": {self.uuid[n]: {"resources": r} for n, r in allocations.items()},
            "consumer_generation": None, "project_id": "p", "user_id": "u", "consumer_type": "TEST"})
        assert resp.status == 204, resp
        for n in allocations:
            self.generation[n] += 1
        return consumer

    # --- reading answers in names -------------------------------------------

    def requests(self, body: dict) -> list:
        """Allocation requests as comparable, name-based values (order-insensitive).

        Dict form becomes ``(frozenset of (provider, class, amount), mappings)``
        with mappings a frozenset of (suffix, frozenset of providers), or None
        when absent; list form (mv < 1.12) the same with mappings None.
        """
        out = []
        for ar in body["allocation_requests"]:
            allocations = ar["allocations"]
            if isinstance(allocations, list):
                triples = frozenset((self.name[a["resource_provider"]["uuid"]], rc, amount)
                                    for a in allocations for rc, amount in a["resources"].items())
            else:
                triples = frozenset((self.name[u], rc, amount)
                                    for u, a in allocations.items() for rc, amount in a["resources"].items())
            mappings = None
            if "mappings" in ar:
                mappings = frozenset((s, frozenset(self.name[u] for u in us)) for s, us in ar["mappings"].items())
                for us in ar["mappings"].values():
                    assert len(us) == len(set(us)), ar
            out.append((triples, mappings))
        return sorted(out, key=canonical)

    def summary_names(self, body: dict) -> set[str]:
        return {self.name[u] for u in body["provider_summaries"]}


def canonical(request: tuple) -> str:
    """A sort key that does not depend on set iteration order."""
    triples, mappings = request
    maps = None if mappings is None else sorted((s, sorted(ps)) for s, ps in mappings)
    return repr((sorted(triples), maps))


def alloc(*triples, mappings: dict | None = None):
    """Expected request: alloc(("numa0", "VCPU", 2), ..., mappings={"": ["numa0"]})."""
    maps = None
    if mappings is not None:
        maps = frozenset((s, frozenset(ps)) for s, ps in mappings.items())
    return frozenset(triples), maps


def expect(*requests) -> list:
    return sorted(requests, key=canonical)


@pytest.fixture
def fleet(client) -> Fleet:
    return Fleet(client)


def test_builder_sets_everything_through_the_api(fleet, client):
    fleet.provider("cn", inventory={"VCPU": 8, "CUSTOM_GOLD": {"total": 1, "max_unit": 1}},
                   traits=["HW_CPU_X86_AVX2", "CUSTOM_FAST"], aggregates=[AGG])
    uuid = fleet.uuid["cn"]
    inv = client.get(f"/resource_providers/{uuid}/inventories", mv="1.39").json["inventories"]
    assert set(inv) == {"VCPU", "CUSTOM_GOLD"}
    traits = client.get(f"/resource_providers/{uuid}/traits", mv="1.39").json["traits"]
    assert set(traits) == {"HW_CPU_X86_AVX2", "CUSTOM_FAST"}
    aggs = client.get(f"/resource_providers/{uuid}/aggregates", mv="1.39").json["aggregates"]
    assert aggs == [AGG]
    fleet.allocate({"cn": {"VCPU": 3}})
    usages = client.get(f"/resource_providers/{uuid}/usages", mv="1.39").json["usages"]
    assert usages["VCPU"] == 3
