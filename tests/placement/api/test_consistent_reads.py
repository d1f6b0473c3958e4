"""Every read that runs several statements answers from one moment, even when
another client commits between two of them.

Each test lets a read run up to some point, then commits a write through the
API from another thread (providers deleted, trees grown, inventories and
allocations changed) and lets the read go on. The answer must be exactly the
one from before the write, never a 500 and never a mix of both states; the
next read sees the write.
"""
from __future__ import annotations

import threading
import uuid as uuidlib

import pytest

from billeting.placement import consumers as consumers_module
from billeting.placement import inventories as inventories_module
from billeting.placement import providers as providers_module
from billeting.placement import usages as usages_module
from billeting.placement.candidates import search, summaries, summary_cache
from tests.placement.api.test_allocation_candidates_fleet import Fleet
from tests.conftest import PlacementClient

AC = "/allocation_candidates"


class Intrusion:
    """Runs ``write`` once, from another thread, before (or after) the first
    call of ``module.name``, and waits until it has committed."""

    def __init__(self, monkeypatch, module, name: str, write, *, after: bool = False) -> None:
        self.fired = False
        self.failure: BaseException | None = None
        real = getattr(module, name)

        def intrude() -> None:
            self.fired = True

            def run() -> None:
                try:
                    write()
                except BaseException as exc:  # reported by the test, not lost in the thread
                    self.failure = exc

            writer = threading.Thread(target=run)
            writer.start()
            writer.join(timeout=60)
            assert not writer.is_alive(), "the intruding write did not finish"

        def wrapper(*args, **kwargs):
            first = not self.fired  # (the writer's own calls come after it is set)
            if first and not after:
                intrude()
            result = real(*args, **kwargs)
            if first and after:
                intrude()
            return result

        monkeypatch.setattr(module, name, wrapper)

    def check(self) -> None:
        assert self.fired, "the read never reached the intrusion point"
        if self.failure is not None:
            raise self.failure


def answer(client, query: str) -> dict:
    resp = client.get(f"{AC}?{query}", mv="1.39")
    assert resp.status == 200, resp
    return resp.json


# --- allocation candidates ------------------------------------------------------

NESTED = ("resources=DISK_GB:10&resources_COMPUTE=VCPU:1&resources_FPGA=FPGA:1"
          "&group_policy=none&same_subtree=_COMPUTE,_FPGA")


def _nested_fleet(client) -> Fleet:
    fleet = Fleet(client)
    for host in ("cn1", "cn2"):
        fleet.provider(host, inventory={"DISK_GB": 100})
        for numa in (0, 1):
            fleet.provider(f"{host}-numa{numa}", parent=host, inventory={"VCPU": 4})
            fleet.provider(f"{host}-fpga{numa}", parent=f"{host}-numa{numa}", inventory={"FPGA": 1})
    return fleet


def _reshape_fleet(fleet: Fleet) -> None:
    """A leaf in the answer disappears, a tree grows a new leaf that would be
    in the answer, and a whole new tree appears."""
    writer = Fleet(PlacementClient(fleet.client.app))
    writer.uuid, writer.name, writer.generation = fleet.uuid, fleet.name, fleet.generation
    resp = writer.client.delete(f"/resource_providers/{fleet.uuid['cn1-fpga1']}")
    assert resp.status == 204, resp
    writer.provider("cn2-fpga1b", parent="cn2-numa1", inventory={"FPGA": 1})
    writer.provider("cn3", inventory={"DISK_GB": 100})
    writer.provider("cn3-numa0", parent="cn3", inventory={"VCPU": 4})
    writer.provider("cn3-fpga0", parent="cn3-numa0", inventory={"FPGA": 1})


# (module, function) a nested candidates read goes through, in order
NESTED_POINTS = {
    "search": (search, "collect"),
    "summaries": (summaries, "load"),
    "summary cache": (summary_cache, "summarize"),
}


@pytest.mark.usefixtures("summary_paths")
@pytest.mark.parametrize("limit", ["", "&limit=3"])
@pytest.mark.parametrize("point", list(NESTED_POINTS))
def test_candidates_answer_from_one_moment_while_trees_change(client, monkeypatch, summary_paths, point, limit):
    fleet = _nested_fleet(client)
    query = NESTED + limit
    before = answer(client, NESTED)
    assert len(before["allocation_requests"]) == 4
    module, name = NESTED_POINTS[point]
    intrusion = Intrusion(monkeypatch, module, name, lambda: _reshape_fleet(fleet))
    during = answer(client, query)
    if point == "summary cache" and summary_paths == "one-query":
        assert not intrusion.fired  # small answers do not go through the cache
        return
    intrusion.check()
    if limit:
        # (the limited scan starts at a random tree: compare with what it drew from)
        assert len(during["allocation_requests"]) == 3
        assert set(during["provider_summaries"]) <= set(before["provider_summaries"])
        for uuid, summary in during["provider_summaries"].items():
            assert summary == before["provider_summaries"][uuid]
        assert all(r in before["allocation_requests"] for r in during["allocation_requests"])
    else:
        assert during == before
    monkeypatch.undo()
    after = answer(client, NESTED)
    names = {fleet.name[u] for u in after["provider_summaries"]}
    assert "cn1-fpga1" not in names and {"cn2-fpga1b", "cn3-fpga0"} <= names
    assert len(after["allocation_requests"]) == 5


@pytest.mark.usefixtures("summary_paths")
def test_flat_candidates_answer_from_one_moment_while_providers_come_and_go(client, engine, monkeypatch):
    fleet = Fleet(client)
    for host in ("h1", "h2", "h3"):
        fleet.provider(host, inventory={"VCPU": 8, "MEMORY_MB": 1024})
    query = "resources=VCPU:1,MEMORY_MB:128"
    before = answer(client, query)

    def churn() -> None:
        writer = PlacementClient(client.app)
        assert writer.delete(f"/resource_providers/{fleet.uuid['h2']}").status == 204
        other = Fleet(writer)
        other.provider("h4", inventory={"VCPU": 8, "MEMORY_MB": 1024})
        _allocate(writer, fleet.uuid["h1"], str(uuidlib.uuid4()), 2)

    # Between the candidates query and the summaries' reads.
    intrusion = Intrusion(monkeypatch, summaries, "load", churn)
    during = answer(client, query)
    intrusion.check()
    assert during == before
    monkeypatch.undo()
    assert len(answer(client, query)["allocation_requests"]) == 3
    assert fleet.uuid["h2"] not in answer(client, query)["provider_summaries"]


# --- other reads that take several statements -------------------------------------

def _provider_with_inventory(client) -> Fleet:
    fleet = Fleet(client)
    fleet.provider("rp", inventory={"VCPU": 8, "MEMORY_MB": 1024})
    return fleet


def _allocate(client, provider: str, consumer: str, vcpus: int, generation=None) -> None:
    resp = client.put(f"/allocations/{consumer}", mv="1.39", json={
        "allocations": {provider: {"resources": {"VCPU": vcpus}}},
        "consumer_generation": generation, "project_id": "p", "user_id": "u", "consumer_type": "TEST"})
    assert resp.status == 204, resp


def test_inventories_and_their_generation_from_one_moment(client, monkeypatch):
    fleet = _provider_with_inventory(client)
    path = f"/resource_providers/{fleet.uuid['rp']}/inventories"
    before = client.get(path).json

    def change() -> None:
        resp = PlacementClient(client.app).put(path, json={
            "resource_provider_generation": before["resource_provider_generation"],
            "inventories": {"VCPU": {"total": 16}}})
        assert resp.status == 200, resp

    intrusion = Intrusion(monkeypatch, inventories_module, "get_all", change)
    during = client.get(path)
    intrusion.check()
    assert during.status == 200 and during.json == before
    monkeypatch.undo()
    assert client.get(path).json["resource_provider_generation"] == before["resource_provider_generation"] + 1


def test_usages_and_their_generation_from_one_moment(client, monkeypatch):
    fleet = _provider_with_inventory(client)
    provider = fleet.uuid["rp"]
    path = f"/resource_providers/{provider}/usages"
    before = client.get(path).json
    intrusion = Intrusion(monkeypatch, usages_module, "provider_usages",
                          lambda: _allocate(PlacementClient(client.app), provider, str(uuidlib.uuid4()), 3))
    during = client.get(path)
    intrusion.check()
    assert during.status == 200 and during.json == before
    monkeypatch.undo()
    assert client.get(path).json["usages"]["VCPU"] == 3


def test_provider_allocations_and_generation_from_one_moment(client, monkeypatch):
    fleet = _provider_with_inventory(client)
    provider = fleet.uuid["rp"]
    _allocate(client, provider, str(uuidlib.uuid4()), 1)
    path = f"/resource_providers/{provider}/allocations"
    before = client.get(path).json
    # for_provider reads the provider, then its allocations
    intrusion = Intrusion(monkeypatch, providers_module, "get",
                          lambda: _allocate(PlacementClient(client.app), provider, str(uuidlib.uuid4()), 2),
                          after=True)
    during = client.get(path)
    intrusion.check()
    assert during.status == 200 and during.json == before
    monkeypatch.undo()
    assert len(client.get(path).json["allocations"]) == 2


def test_consumer_allocations_and_generation_from_one_moment(client, monkeypatch):
    fleet = _provider_with_inventory(client)
    provider = fleet.uuid["rp"]
    consumer = str(uuidlib.uuid4())
    _allocate(client, provider, consumer, 1)
    path = f"/allocations/{consumer}"
    before = client.get(path, mv="1.39").json
    # for_consumer reads the consumer, then its allocations
    intrusion = Intrusion(monkeypatch, consumers_module, "get",
                          lambda: _allocate(PlacementClient(client.app), provider, consumer, 5,
                                            generation=before["consumer_generation"]),
                          after=True)
    during = client.get(path, mv="1.39")
    intrusion.check()
    assert during.status == 200 and during.json == before
    monkeypatch.undo()
    assert client.get(path, mv="1.39").json["allocations"][provider]["resources"] == {"VCPU": 5}
