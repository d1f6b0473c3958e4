"""Every microversion boundary where GET /allocation_candidates changes
(docs/design/allocation-candidates.md#microversions)."""
from __future__ import annotations

import pytest

from tests.placement.api.test_allocation_candidates_fleet import AGG, Fleet

# Every test here runs with summaries read directly and through the cache.
pytestmark = pytest.mark.usefixtures("summary_paths")

AC = "/allocation_candidates"


@pytest.fixture
def tree(client) -> Fleet:
    fleet = Fleet(client)
    fleet.provider("cn", inventory={"DISK_GB": 100}, traits=["HW_CPU_X86_AVX2"], aggregates=[AGG])
    fleet.provider("numa", parent="cn", inventory={"VCPU": 4, "MEMORY_MB": 1024}, traits=["HW_NUMA_ROOT"])
    return fleet


def get(client, query: str, mv: str):
    return client.get(f"{AC}?{query}", mv=mv)


def ok(client, query: str, mv: str) -> dict:
    resp = get(client, query, mv)
    assert resp.status == 200, resp
    return resp.json


def rejected(client, query: str, mv: str) -> None:
    resp = get(client, query, mv)
    assert resp.status == 400, resp
    assert "Invalid query string parameters" in resp.error["detail"]


def test_1_10_endpoint_appears(client, tree):
    assert get(client, "resources=VCPU:1", "1.9").status == 404
    body = ok(client, "resources=VCPU:1", "1.10")
    assert body["allocation_requests"] == [
        {"allocations": [{"resource_provider": {"uuid": tree.uuid["numa"]}, "resources": {"VCPU": 1}}]}]
    assert body["provider_summaries"] == {tree.uuid["numa"]: {"resources": {"VCPU": {"capacity": 4, "used": 0}}}}


def test_1_12_dict_form(client, tree):
    assert isinstance(ok(client, "resources=VCPU:1", "1.11")["allocation_requests"][0]["allocations"], list)
    body = ok(client, "resources=VCPU:1", "1.12")
    assert body["allocation_requests"] == [{"allocations": {tree.uuid["numa"]: {"resources": {"VCPU": 1}}}}]


def test_1_15_cache_headers(client, tree):
    old = get(client, "resources=VCPU:1", "1.14")
    assert "cache-control" not in old.headers and "last-modified" not in old.headers
    new = get(client, "resources=VCPU:1", "1.15")
    assert new.headers["cache-control"] == "no-cache"
    assert new.headers["last-modified"].endswith(" GMT")
    assert new.headers["content-type"] == "application/json"
    assert new.headers["openstack-api-version"] == "placement 1.15"


def test_1_16_limit(client, tree):
    rejected(client, "resources=VCPU:1&limit=1", "1.15")
    assert len(ok(client, "resources=VCPU:1&limit=1", "1.16")["allocation_requests"]) == 1


def test_1_17_required_and_traits_in_summaries(client, tree):
    rejected(client, "resources=VCPU:1&required=HW_NUMA_ROOT", "1.16")
    assert ok(client, "resources=VCPU:1", "1.16")["provider_summaries"][tree.uuid["numa"]].keys() == {"resources"}
    body = ok(client, "resources=VCPU:1&required=HW_NUMA_ROOT", "1.17")
    assert body["provider_summaries"][tree.uuid["numa"]]["traits"] == ["HW_NUMA_ROOT"]


def test_1_21_member_of(client, tree):
    rejected(client, f"resources=VCPU:1&member_of={AGG}", "1.20")
    assert len(ok(client, f"resources=DISK_GB:1&member_of={AGG}", "1.21")["allocation_requests"]) == 1


def test_1_22_forbidden_traits(client, tree):
    assert get(client, "resources=VCPU:1&required=!HW_CPU_X86_AVX2", "1.21").status == 400
    assert len(ok(client, "resources=VCPU:1&required=!HW_CPU_X86_AVX2", "1.22")["allocation_requests"]) == 1


def test_1_23_error_codes(client, tree):
    assert "code" not in get(client, "resources=VCPU:0", "1.22").error
    assert get(client, "resources=VCPU:0", "1.23").error["code"] == "placement.undefined_code"


def test_1_24_repeated_member_of(client, tree):
    query = f"resources=DISK_GB:1&member_of={AGG}&member_of=in:{AGG}"
    resp = get(client, query, "1.23")
    assert resp.status == 400
    assert resp.error["detail"] == "Multiple member_of parameters are not supported"
    assert len(ok(client, query, "1.24")["allocation_requests"]) == 1


def test_1_25_granular_groups(client, tree):
    rejected(client, "resources1=VCPU:1", "1.24")
    rejected(client, "resources=VCPU:1&group_policy=none", "1.24")
    assert get(client, "group_policy=none", "1.24").status == 400
    body = ok(client, "resources1=VCPU:1&resources2=MEMORY_MB:1&group_policy=none", "1.25")
    assert body["allocation_requests"] == [
        {"allocations": {tree.uuid["numa"]: {"resources": {"VCPU": 1, "MEMORY_MB": 1}}}}]
    # two providers of one tree are still hidden before 1.29
    assert ok(client, "resources1=VCPU:1&resources2=DISK_GB:1&group_policy=isolate", "1.25")[
        "allocation_requests"] == []
    assert len(ok(client, "resources1=VCPU:1&resources2=DISK_GB:1&group_policy=isolate", "1.29")[
        "allocation_requests"]) == 1
    # resources is no longer required by the schema
    assert "At least one request group" in get(client, "limit=1", "1.25").error["detail"]


def test_1_27_all_classes_in_summaries(client, tree):
    old = ok(client, "resources=VCPU:1", "1.26")["provider_summaries"][tree.uuid["numa"]]
    assert old["resources"] == {"VCPU": {"capacity": 4, "used": 0}}
    new = ok(client, "resources=VCPU:1", "1.27")["provider_summaries"][tree.uuid["numa"]]
    assert new["resources"] == {"VCPU": {"capacity": 4, "used": 0}, "MEMORY_MB": {"capacity": 1024, "used": 0}}


def test_1_29_nested_results_and_tree_summaries(client, tree):
    query = "resources=VCPU:1,DISK_GB:10"
    assert ok(client, query, "1.28") == {"allocation_requests": [], "provider_summaries": {}}
    body = ok(client, query, "1.29")
    assert body["allocation_requests"] == [{"allocations": {
        tree.uuid["numa"]: {"resources": {"VCPU": 1}}, tree.uuid["cn"]: {"resources": {"DISK_GB": 10}}}}]
    cn, numa = tree.uuid["cn"], tree.uuid["numa"]
    assert body["provider_summaries"][numa]["parent_provider_uuid"] == cn
    assert body["provider_summaries"][cn]["parent_provider_uuid"] is None
    assert {s["root_provider_uuid"] for s in body["provider_summaries"].values()} == {cn}
    # a single child: summaries are the whole tree from 1.29, the used provider before
    assert set(ok(client, "resources=VCPU:1", "1.28")["provider_summaries"]) == {numa}
    assert set(ok(client, "resources=VCPU:1", "1.29")["provider_summaries"]) == {cn, numa}


def test_1_31_in_tree(client, tree):
    rejected(client, f"resources=VCPU:1&in_tree={tree.uuid['cn']}", "1.30")
    rejected(client, f"resources1=VCPU:1&in_tree1={tree.uuid['cn']}", "1.30")
    assert len(ok(client, f"resources=VCPU:1&in_tree={tree.uuid['cn']}", "1.31")["allocation_requests"]) == 1
    assert len(ok(client, f"resources1=VCPU:1&in_tree1={tree.uuid['numa']}", "1.31")["allocation_requests"]) == 1


def test_1_32_forbidden_aggregates(client, tree):
    resp = get(client, f"resources=VCPU:1&member_of=!{AGG}", "1.31")
    assert resp.status == 400
    assert ok(client, f"resources=VCPU:1&member_of=!{AGG}", "1.32")["allocation_requests"] == []


def test_1_33_string_suffixes(client, tree):
    rejected(client, "resources_X=VCPU:1", "1.32")
    body = ok(client, "resources_X=VCPU:1", "1.33")
    assert len(body["allocation_requests"]) == 1
    assert len(ok(client, "resources" + "a" * 64 + "=VCPU:1", "1.33")["allocation_requests"]) == 1


def test_1_34_mappings(client, tree):
    assert "mappings" not in ok(client, "resources_X=VCPU:1", "1.33")["allocation_requests"][0]
    body = ok(client, "resources_X=VCPU:1&resources=DISK_GB:1", "1.34")
    assert body["allocation_requests"][0]["mappings"] == {"_X": [tree.uuid["numa"]], "": [tree.uuid["cn"]]}


def test_1_35_root_required(client, tree):
    rejected(client, "resources=VCPU:1&root_required=HW_CPU_X86_AVX2", "1.34")
    assert len(ok(client, "resources=VCPU:1&root_required=HW_CPU_X86_AVX2", "1.35")["allocation_requests"]) == 1
    assert ok(client, "resources=VCPU:1&root_required=!HW_CPU_X86_AVX2", "1.35")["allocation_requests"] == []


def test_1_36_same_subtree_and_resourceless_groups(client, tree):
    query = "resources_A=VCPU:1&required_B=HW_CPU_X86_AVX2&same_subtree=_A,_B&group_policy=none"
    rejected(client, query, "1.35")
    resp = get(client, "resources_A=VCPU:1&required_B=HW_CPU_X86_AVX2&group_policy=none", "1.35")
    assert "orphaned traits keys: required_B" in resp.error["detail"]
    body = ok(client, query, "1.36")
    assert body["allocation_requests"] == [{"allocations": {tree.uuid["numa"]: {"resources": {"VCPU": 1}}},
                                            "mappings": {"_A": [tree.uuid["numa"]], "_B": [tree.uuid["cn"]]}}]
    assert set(body["provider_summaries"]) == {tree.uuid["cn"], tree.uuid["numa"]}


def test_1_39_any_of_traits(client, tree):
    query = "resources=VCPU:1&required=in:HW_NUMA_ROOT,HW_CPU_X86_SSE2"
    assert "only supported since microversion 1.39" in get(client, query, "1.38").error["detail"]
    assert len(ok(client, query, "1.39")["allocation_requests"]) == 1
    # repetition: last only before 1.39, all AND-ed from 1.39
    repeated = "resources=VCPU:1&required=HW_CPU_X86_SSE2&required=HW_NUMA_ROOT"
    assert len(ok(client, repeated, "1.38")["allocation_requests"]) == 1
    assert ok(client, repeated, "1.39")["allocation_requests"] == []


@pytest.mark.parametrize("mv", ["1.37", "1.38"])
def test_no_change_at_1_37_and_1_38(client, tree, mv):
    assert ok(client, "resources_X=VCPU:1", mv) == ok(client, "resources_X=VCPU:1", "1.36")
