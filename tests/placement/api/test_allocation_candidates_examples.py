"""The worked examples of docs/design/allocation-candidates.md#examples, asserted as
exact (order-insensitive) sets of allocation requests and provider summaries."""
from __future__ import annotations

import pytest

from tests.placement.api.test_allocation_candidates_fleet import AGG, Fleet, alloc, expect

# Every test here runs with summaries read directly and through the cache.
pytestmark = pytest.mark.usefixtures("summary_paths")

AC = "/allocation_candidates"


@pytest.fixture
def model(client) -> Fleet:
    fleet = Fleet(client)
    fleet.provider("cn1", traits=["COMPUTE_VOLUME_MULTI_ATTACH"], aggregates=[AGG])
    fleet.provider("numa0", parent="cn1", inventory={"VCPU": 4, "MEMORY_MB": 2048},
                   traits=["HW_NUMA_ROOT"])
    fleet.provider("numa1", parent="cn1", inventory={"VCPU": 4, "MEMORY_MB": 2048},
                   traits=["HW_NUMA_ROOT", "HW_CPU_X86_AVX2"])
    fleet.provider("ss1", inventory={"DISK_GB": {"total": 1000, "reserved": 100}},
                   traits=["MISC_SHARES_VIA_AGGREGATE"], aggregates=[AGG])
    return fleet


def get(model: Fleet, query: str, mv: str = "1.39"):
    resp = model.client.get(f"{AC}?{query}", mv=mv)
    assert resp.status == 200, resp
    return resp.json


EXAMPLE1 = "resources=VCPU:2,MEMORY_MB:1024,DISK_GB:100"


def test_example1_unsuffixed_spans_tree_and_sharing_provider(model):
    body = get(model, EXAMPLE1)
    assert model.requests(body) == expect(
        alloc(("numa0", "VCPU", 2), ("numa0", "MEMORY_MB", 1024), ("ss1", "DISK_GB", 100),
              mappings={"": ["numa0", "ss1"]}),
        alloc(("numa1", "VCPU", 2), ("numa1", "MEMORY_MB", 1024), ("ss1", "DISK_GB", 100),
              mappings={"": ["numa1", "ss1"]}),
        alloc(("numa0", "VCPU", 2), ("numa1", "MEMORY_MB", 1024), ("ss1", "DISK_GB", 100),
              mappings={"": ["numa0", "numa1", "ss1"]}),
        alloc(("numa1", "VCPU", 2), ("numa0", "MEMORY_MB", 1024), ("ss1", "DISK_GB", 100),
              mappings={"": ["numa0", "numa1", "ss1"]}),
    )
    summaries = body["provider_summaries"]
    u = model.uuid
    assert summaries == {
        u["cn1"]: {"resources": {}, "traits": ["COMPUTE_VOLUME_MULTI_ATTACH"],
                   "parent_provider_uuid": None, "root_provider_uuid": u["cn1"]},
        u["numa0"]: {"resources": {"VCPU": {"capacity": 4, "used": 0},
                                   "MEMORY_MB": {"capacity": 2048, "used": 0}},
                     "traits": ["HW_NUMA_ROOT"],
                     "parent_provider_uuid": u["cn1"], "root_provider_uuid": u["cn1"]},
        u["numa1"]: {"resources": {"VCPU": {"capacity": 4, "used": 0},
                                   "MEMORY_MB": {"capacity": 2048, "used": 0}},
                     "traits": summaries[u["numa1"]]["traits"],
                     "parent_provider_uuid": u["cn1"], "root_provider_uuid": u["cn1"]},
        u["ss1"]: {"resources": {"DISK_GB": {"capacity": 900, "used": 0}},
                   "traits": ["MISC_SHARES_VIA_AGGREGATE"],
                   "parent_provider_uuid": None, "root_provider_uuid": u["ss1"]},
    }
    assert sorted(summaries[u["numa1"]]["traits"]) == ["HW_CPU_X86_AVX2", "HW_NUMA_ROOT"]


def test_example1_at_1_28_is_nested_blind(model):
    body = get(model, EXAMPLE1, mv="1.28")
    assert model.requests(body) == expect(
        alloc(("numa0", "VCPU", 2), ("numa0", "MEMORY_MB", 1024), ("ss1", "DISK_GB", 100)),
        alloc(("numa1", "VCPU", 2), ("numa1", "MEMORY_MB", 1024), ("ss1", "DISK_GB", 100)),
    )
    assert all("mappings" not in ar for ar in body["allocation_requests"])
    assert model.summary_names(body) == {"numa0", "numa1", "ss1"}
    for summary in body["provider_summaries"].values():
        assert set(summary) == {"resources", "traits"}


def test_example1_at_1_12_has_no_traits(model):
    body = get(model, EXAMPLE1, mv="1.12")
    assert len(body["allocation_requests"]) == 2
    assert model.summary_names(body) == {"numa0", "numa1", "ss1"}
    for summary in body["provider_summaries"].values():
        assert set(summary) == {"resources"}
    assert body["provider_summaries"][model.uuid["ss1"]] == {
        "resources": {"DISK_GB": {"capacity": 900, "used": 0}}}


def test_example1_at_1_10_uses_list_form(model):
    body = get(model, EXAMPLE1, mv="1.10")
    assert model.requests(body) == expect(
        alloc(("numa0", "VCPU", 2), ("numa0", "MEMORY_MB", 1024), ("ss1", "DISK_GB", 100)),
        alloc(("numa1", "VCPU", 2), ("numa1", "MEMORY_MB", 1024), ("ss1", "DISK_GB", 100)),
    )
    u = model.uuid
    shapes = [sorted(ar["allocations"], key=lambda a: a["resource_provider"]["uuid"])
              for ar in body["allocation_requests"]]
    assert sorted([{"resource_provider": {"uuid": u["numa0"]}, "resources": {"VCPU": 2, "MEMORY_MB": 1024}},
                   {"resource_provider": {"uuid": u["ss1"]}, "resources": {"DISK_GB": 100}}],
                  key=lambda a: a["resource_provider"]["uuid"]) in shapes


def test_example2_granular_groups(model):
    query = "resources_C=VCPU:2,MEMORY_MB:1024&resources_D=DISK_GB:100&group_policy=none"
    body = get(model, query)
    assert model.requests(body) == expect(
        alloc(("numa0", "VCPU", 2), ("numa0", "MEMORY_MB", 1024), ("ss1", "DISK_GB", 100),
              mappings={"_C": ["numa0"], "_D": ["ss1"]}),
        alloc(("numa1", "VCPU", 2), ("numa1", "MEMORY_MB", 1024), ("ss1", "DISK_GB", 100),
              mappings={"_C": ["numa1"], "_D": ["ss1"]}),
    )
    assert model.summary_names(body) == {"cn1", "numa0", "numa1", "ss1"}
    body = get(model, query + "&required_C=HW_CPU_X86_AVX2")
    assert model.requests(body) == expect(
        alloc(("numa1", "VCPU", 2), ("numa1", "MEMORY_MB", 1024), ("ss1", "DISK_GB", 100),
              mappings={"_C": ["numa1"], "_D": ["ss1"]}))
    assert model.summary_names(body) == {"cn1", "numa0", "numa1", "ss1"}


def test_example3_isolate_vs_none(model):
    body = get(model, "resources1=VCPU:1&resources2=VCPU:1&group_policy=isolate")
    assert model.requests(body) == expect(
        alloc(("numa0", "VCPU", 1), ("numa1", "VCPU", 1), mappings={"1": ["numa0"], "2": ["numa1"]}),
        alloc(("numa0", "VCPU", 1), ("numa1", "VCPU", 1), mappings={"1": ["numa1"], "2": ["numa0"]}),
    )
    body = get(model, "resources1=VCPU:1&resources2=VCPU:1&group_policy=none")
    assert model.requests(body) == expect(
        alloc(("numa0", "VCPU", 1), ("numa1", "VCPU", 1), mappings={"1": ["numa0"], "2": ["numa1"]}),
        alloc(("numa0", "VCPU", 1), ("numa1", "VCPU", 1), mappings={"1": ["numa1"], "2": ["numa0"]}),
        alloc(("numa0", "VCPU", 2), mappings={"1": ["numa0"], "2": ["numa0"]}),
        alloc(("numa1", "VCPU", 2), mappings={"1": ["numa1"], "2": ["numa1"]}),
    )


def test_example4_traits_only_from_contributing_providers(model):
    body = get(model, "resources=VCPU:2&required=COMPUTE_VOLUME_MULTI_ATTACH")
    assert body == {"allocation_requests": [], "provider_summaries": {}}

    body = get(model, "resources=VCPU:2&root_required=COMPUTE_VOLUME_MULTI_ATTACH")
    assert model.requests(body) == expect(
        alloc(("numa0", "VCPU", 2), mappings={"": ["numa0"]}),
        alloc(("numa1", "VCPU", 2), mappings={"": ["numa1"]}),
    )
    assert model.summary_names(body) == {"cn1", "numa0", "numa1"}

    body = get(model, "resources=VCPU:2,DISK_GB:100&required=HW_CPU_X86_AVX2")
    assert model.requests(body) == expect(
        alloc(("numa1", "VCPU", 2), ("ss1", "DISK_GB", 100), mappings={"": ["numa1", "ss1"]}))


def test_example5_aggregates_on_the_root(model):
    body = get(model, f"resources=VCPU:2&member_of={AGG}")
    assert model.requests(body) == expect(
        alloc(("numa0", "VCPU", 2), mappings={"": ["numa0"]}),
        alloc(("numa1", "VCPU", 2), mappings={"": ["numa1"]}),
    )
    body = get(model, f"resources1=VCPU:2&member_of1={AGG}")
    assert body == {"allocation_requests": [], "provider_summaries": {}}


def test_example6_sharing_provider_alone(model):
    body = get(model, "resources=DISK_GB:100")
    assert model.requests(body) == expect(alloc(("ss1", "DISK_GB", 100), mappings={"": ["ss1"]}))
    assert model.summary_names(body) == {"ss1"}


def test_example7_same_subtree_with_resourceless_group(model):
    query = "resources_A=VCPU:1&required_N=HW_NUMA_ROOT&same_subtree=_A,_N"
    body = get(model, query + "&group_policy=none")
    assert model.requests(body) == expect(
        alloc(("numa0", "VCPU", 1), mappings={"_A": ["numa0"], "_N": ["numa0"]}),
        alloc(("numa1", "VCPU", 1), mappings={"_A": ["numa1"], "_N": ["numa1"]}),
    )
    assert model.summary_names(body) == {"cn1", "numa0", "numa1"}
    body = get(model, query + "&group_policy=isolate")
    assert body == {"allocation_requests": [], "provider_summaries": {}}


def test_example8_limit_keeps_whole_trees_in_summaries(model):
    body = get(model, EXAMPLE1 + "&limit=1")
    assert len(body["allocation_requests"]) == 1
    assert model.summary_names(body) == {"cn1", "numa0", "numa1", "ss1"}
    assert model.requests(body)[0] in model.requests(get(model, EXAMPLE1))
