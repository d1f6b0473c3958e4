"""The in-process client builds typed candidates straight from the engine's
result (``direct``); they must be exactly what decoding the HTTP answer for
the same result gives: same values, same key and list order, at every
microversion the client speaks, and still after the memos have been filled
and the fleet's usage changed."""
from __future__ import annotations

import msgspec
import orjson
import pytest

from billeting.placement import candidates as engine
from billeting.placement.api import allocation_candidates as ac_api
from billeting.common.http.errors import HTTPProblem
from billeting.placement.store.tx import run_read
from billeting.placement_client import query as query_mod
from billeting.placement_client.client import version_str
from billeting.placement_client.direct import CandidatesView
from billeting.placement_client.inprocess import _parsed
from billeting.placement_client.model import (
    AllocationWrite,
    CandidateQuery,
    Candidates,
    Inventory,
    ProviderResources,
    RequestGroup,
)
from billeting.placement_client.query import UnsupportedQuery
from tests.scheduler.fleet import new_uuids

_decode = msgspec.json.Decoder(Candidates).decode
SHARING = "MISC_SHARES_VIA_AGGREGATE"
VERSIONS = [(1, 29), (1, 31), (1, 33), (1, 34), (1, 35), (1, 36), (1, 39)]


@pytest.fixture(params=["plain", "sharing"])
def mixed(request, fleet):
    """Flat hosts (with and without a trait), hosts with two PF children each,
    and (second fleet) a sharing disk provider in an aggregate with some flat
    hosts. Without a sharing provider one-group answers take the engine's
    compact single-provider form."""
    client = fleet.client
    shared_agg = "6b2b1a36-0d3c-4f39-9d7e-2a8b5a4d6f01"
    for i in range(6):
        fleet.host(f"flat{i}", vcpus=8 + i, memory_mb=8192 + 1024 * i,
                   traits=("HW_CPU_X86_AVX2",) if i % 2 else (),
                   aggregates=(shared_agg,) if i < 3 else ())
    for i in range(3):
        fleet.host(f"nest{i}", vcpus=4 + i, memory_mb=4096)
        fleet.child(f"nest{i}", f"nest{i}-pf0", {"SRIOV_NET_VF": 4}, traits=("CUSTOM_PHYSNET_A",))
        fleet.child(f"nest{i}", f"nest{i}-pf1", {"SRIOV_NET_VF": 4}, traits=("CUSTOM_PHYSNET_B",))
    if request.param == "plain":
        return fleet
    disk = client.create_provider("shared-disk")
    generation = client.put_inventories(disk.uuid, disk.generation, {"DISK_GB": Inventory(10000)})
    assert client.put_traits(disk.uuid, [SHARING], generation).ok
    generation = client.get_traits(disk.uuid).resource_provider_generation
    assert client.put_aggregates(disk.uuid, [shared_agg], generation).ok
    fleet.hosts["shared-disk"] = disk.uuid
    return fleet


def _queries(fleet) -> list[CandidateQuery]:
    compute = {"VCPU": 1, "MEMORY_MB": 512}
    return [
        CandidateQuery(groups=(RequestGroup(resources=compute),)),
        CandidateQuery(groups=(RequestGroup(resources=compute),), limit=3),
        CandidateQuery(groups=(RequestGroup(resources={**compute, "DISK_GB": 20}),)),
        CandidateQuery(groups=(RequestGroup(resources=compute, required=(frozenset({"HW_CPU_X86_AVX2"}),)),)),
        CandidateQuery(groups=(RequestGroup(resources=compute, forbidden=frozenset({"HW_CPU_X86_AVX2"})),)),
        CandidateQuery(groups=(RequestGroup(resources=compute, in_tree=fleet.hosts["nest1"]),)),
        CandidateQuery(groups=(
            RequestGroup(resources=compute),
            RequestGroup(suffix="1", resources={"SRIOV_NET_VF": 1}, required=(frozenset({"CUSTOM_PHYSNET_A"}),)),
            RequestGroup(suffix="2", resources={"SRIOV_NET_VF": 1}, required=(frozenset({"CUSTOM_PHYSNET_B"}),)),
        ), group_policy="isolate"),
        CandidateQuery(groups=(
            RequestGroup(resources=compute),
            RequestGroup(suffix="1", resources={"SRIOV_NET_VF": 1}),
            RequestGroup(suffix="2", resources={"SRIOV_NET_VF": 1}),
        ), group_policy="none", limit=4),
        CandidateQuery(groups=(RequestGroup(suffix="_NET", resources={"SRIOV_NET_VF": 2}),)),
        CandidateQuery(groups=(
            RequestGroup(resources=compute),
            RequestGroup(suffix="_A", resources={"SRIOV_NET_VF": 1}),
            RequestGroup(suffix="_B", required=(frozenset({"CUSTOM_PHYSNET_B"}),)),
        ), group_policy="none", same_subtree=(frozenset({"_A", "_B"}),)),
        CandidateQuery(groups=(RequestGroup(resources=compute),), root_forbidden=frozenset({"HW_CPU_X86_AVX2"})),
        CandidateQuery(groups=(RequestGroup(resources=compute, required=(
            frozenset({"HW_CPU_X86_AVX2", "CUSTOM_PHYSNET_A"}),)),)),
    ]


def _result(placement, query: CandidateQuery, mv) -> engine.CandidateResult | None:
    try:
        query_mod.params(query, mv)
        parsed = _parsed(query)
        ac_api.check(parsed, mv)
        return run_read(placement.engine,
                        lambda conn: engine.find(conn, ac_api.resolve(conn, parsed, mv, placement.settings)))
    except (UnsupportedQuery, HTTPProblem):
        return None  # not expressible at this microversion


def _as_http(result: engine.CandidateResult, mv) -> Candidates:
    return msgspec.structs.replace(_decode(orjson.dumps(ac_api.render(result, mv))), version=version_str(mv))


def _check_all(placement, fleet, view: CandidatesView) -> int:
    compared = 0
    for mv in VERSIONS:
        for query in _queries(fleet):
            result = _result(placement, query, mv)
            if result is None:
                continue
            expected = _as_http(result, mv)
            got = view.candidates(result, mv, version_str(mv))
            assert got == expected, (mv, query)
            # Byte-equal encodings: the same key and list order, too.
            assert msgspec.json.encode(got) == msgspec.json.encode(expected), (mv, query)
            compared += len(expected.allocation_requests)
    return compared


def test_direct_candidates_equal_decoded_http_answer(placement, mixed):
    view = CandidatesView()
    assert _check_all(placement, mixed, view) > 100
    # Again with the memos full (cached summaries come back as the same objects).
    _check_all(placement, mixed, view)
    # Usage changes on some hosts: their summaries must change with it.
    for name in ("flat0", "flat3", "nest1"):
        uuid = mixed.hosts[name]
        write = AllocationWrite(allocations={uuid: ProviderResources({"VCPU": 2, "MEMORY_MB": 1024})},
                                project_id="p", user_id="u", consumer_generation=None)
        assert placement.put_allocations(new_uuids(1)[0], write).ok
    _check_all(placement, mixed, view)


def test_every_answer_shape_is_covered(placement, mixed):
    """The fleet and queries reach both engine forms and every summary form."""
    kinds = set()
    for query in _queries(mixed):
        result = _result(placement, query, (1, 39))
        kinds.add(type(result.allocation_requests).__name__)
        if any(len(ar.allocations) > 1 for ar in result.requests()):
            kinds.add("several providers")
        if any(s.parent_uuid is not None for s in result.provider_summaries):
            kinds.add("nested")
    wanted = {"list", "several providers", "nested"}
    if "shared-disk" not in mixed.hosts:
        wanted.add("SingleProviderRequests")
    assert kinds >= wanted


def test_in_process_client_equals_http_client(placement, http_placement, mixed):
    for query in _queries(mixed):
        local = placement.allocation_candidates(query)
        remote = http_placement.allocation_candidates(query)
        assert local.version == remote.version
        if query.limit is None:  # unlimited answers come in a fixed order
            assert msgspec.json.encode(local) == msgspec.json.encode(remote)
        else:  # a limited scan starts at a random provider
            assert len(local.allocation_requests) == len(remote.allocation_requests) == query.limit
            assert local.provider_summaries.keys() <= placement.allocation_candidates(
                msgspec.structs.replace(query, limit=None)).provider_summaries.keys()


def test_cached_summaries_are_reused_until_they_change(placement, fleet):
    """Over 64 providers the engine serves summaries from its cache; the view
    reuses its typed summary exactly while the engine's object is the same."""
    for i in range(70):
        fleet.host(f"h{i:02d}", vcpus=8, memory_mb=8192)
    query = CandidateQuery(groups=(RequestGroup(resources={"VCPU": 1, "MEMORY_MB": 512}),))
    mv = (1, 39)
    view = CandidatesView()
    first = view.candidates(_result(placement, query, mv), mv, "1.39")
    result = _result(placement, query, mv)
    second = view.candidates(result, mv, "1.39")
    assert second == _as_http(result, mv)
    reused = [uuid for uuid, s in second.provider_summaries.items() if s is first.provider_summaries[uuid]]
    assert len(reused) == 70
    busy = fleet.hosts["h07"]
    write = AllocationWrite(allocations={busy: ProviderResources({"VCPU": 3, "MEMORY_MB": 1024})},
                            project_id="p", user_id="u", consumer_generation=None)
    assert placement.put_allocations(new_uuids(1)[0], write).ok
    result = _result(placement, query, mv)
    third = view.candidates(result, mv, "1.39")
    assert third == _as_http(result, mv)
    assert third.provider_summaries[busy].resources["VCPU"].used == 3
    assert {id(a) for a in second.allocation_requests} == {id(a) for a in third.allocation_requests}


def test_full_memos_are_emptied_and_answers_stay_exact(placement, mixed, monkeypatch):
    from billeting.placement_client import direct

    monkeypatch.setattr(direct, "_MAX_SUMMARIES", 5)
    monkeypatch.setattr(direct, "_MAX_REQUESTS", 5)
    view = CandidatesView()
    _check_all(placement, mixed, view)
    _check_all(placement, mixed, view)
    assert len(view._summary_ids) <= 5 + 20 and view._single_count <= 5 + 20
