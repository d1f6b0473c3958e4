"""Allocation candidates on realistic fleets: NUMA + SR-IOV trees, a shared
storage pool, granular device requests, bare metal, trait and aggregate
filters, usage, limits and the candidate-related settings."""
from __future__ import annotations

import pytest

from billeting.config import Settings
from billeting.placement.api.app import make_app
from tests.placement.api.test_allocation_candidates_fleet import AGG, AGG2, Fleet, alloc, expect
from tests.conftest import PlacementClient

# Every test here runs with summaries read directly and through the cache.
pytestmark = pytest.mark.usefixtures("summary_paths")

AC = "/allocation_candidates"
EMPTY = {"allocation_requests": [], "provider_summaries": {}}


def get(fleet: Fleet, query: str, mv: str = "1.39") -> dict:
    resp = fleet.client.get(f"{AC}?{query}", mv=mv)
    assert resp.status == 200, resp
    return resp.json


# --- NUMA nodes with SR-IOV physical functions ------------------------------------

@pytest.fixture
def nfv(client) -> Fleet:
    fleet = Fleet(client)
    fleet.provider("cn", traits=["COMPUTE_VOLUME_MULTI_ATTACH"])
    for n, physnet in ((0, "CUSTOM_PHYSNET_A"), (1, "CUSTOM_PHYSNET_B")):
        fleet.provider(f"numa{n}", parent="cn", inventory={"VCPU": 8, "MEMORY_MB": 4096},
                       traits=["HW_NUMA_ROOT"])
        fleet.provider(f"pf{n}", parent=f"numa{n}",
                       inventory={"NET_BW_EGR_KILOBIT_PER_SEC": 10000, "SRIOV_NET_VF": 8},
                       traits=[physnet])
    return fleet


NET = "resources_NET=SRIOV_NET_VF:1,NET_BW_EGR_KILOBIT_PER_SEC:1000"
COMPUTE = "resources_COMPUTE=VCPU:2,MEMORY_MB:1024"


def test_nfv_vf_on_the_numa_node_of_the_cpus(nfv):
    query = f"{COMPUTE}&{NET}&required_NET=CUSTOM_PHYSNET_A&same_subtree=_COMPUTE,_NET&group_policy=none"
    body = get(nfv, query)
    assert nfv.requests(body) == expect(
        alloc(("numa0", "VCPU", 2), ("numa0", "MEMORY_MB", 1024), ("pf0", "SRIOV_NET_VF", 1),
              ("pf0", "NET_BW_EGR_KILOBIT_PER_SEC", 1000), mappings={"_COMPUTE": ["numa0"], "_NET": ["pf0"]}))
    assert nfv.summary_names(body) == {"cn", "numa0", "numa1", "pf0", "pf1"}
    pf0 = body["provider_summaries"][nfv.uuid["pf0"]]
    assert pf0["resources"] == {"NET_BW_EGR_KILOBIT_PER_SEC": {"capacity": 10000, "used": 0},
                                "SRIOV_NET_VF": {"capacity": 8, "used": 0}}
    assert pf0["parent_provider_uuid"] == nfv.uuid["numa0"]
    assert pf0["root_provider_uuid"] == nfv.uuid["cn"]


def test_nfv_without_same_subtree_any_numa_node(nfv):
    body = get(nfv, f"{COMPUTE}&{NET}&required_NET=CUSTOM_PHYSNET_A&group_policy=none")
    assert {m for _, m in nfv.requests(body)} == {
        frozenset({("_COMPUTE", frozenset({"numa0"})), ("_NET", frozenset({"pf0"}))}),
        frozenset({("_COMPUTE", frozenset({"numa1"})), ("_NET", frozenset({"pf0"}))}),
    }


def test_nfv_same_subtree_with_physnet_b(nfv):
    body = get(nfv, f"{COMPUTE}&{NET}&required_NET=CUSTOM_PHYSNET_B&same_subtree=_COMPUTE,_NET"
                    "&group_policy=isolate")
    assert [m for _, m in nfv.requests(body)] == [
        frozenset({("_COMPUTE", frozenset({"numa1"})), ("_NET", frozenset({"pf1"}))})]


def test_nfv_unsuffixed_takes_each_class_from_any_provider_of_the_tree(nfv):
    body = get(nfv, "resources=VCPU:2,SRIOV_NET_VF:1")
    assert nfv.requests(body) == expect(*(
        alloc((numa, "VCPU", 2), (pf, "SRIOV_NET_VF", 1), mappings={"": [numa, pf]})
        for numa in ("numa0", "numa1") for pf in ("pf0", "pf1")))
    # Below 1.29 every one of them uses two providers of one tree.
    assert get(nfv, "resources=VCPU:2,SRIOV_NET_VF:1", mv="1.28") == EMPTY


def test_nfv_single_child_survives_nested_blind_versions(nfv):
    body = get(nfv, "resources=VCPU:2,MEMORY_MB:512", mv="1.28")
    assert nfv.requests(body) == expect(
        alloc(("numa0", "VCPU", 2), ("numa0", "MEMORY_MB", 512)),
        alloc(("numa1", "VCPU", 2), ("numa1", "MEMORY_MB", 512)))
    assert nfv.summary_names(body) == {"numa0", "numa1"}


def test_nfv_usage_reduces_capacity(nfv):
    nfv.allocate({"numa0": {"VCPU": 7}, "pf1": {"NET_BW_EGR_KILOBIT_PER_SEC": 9500}})
    body = get(nfv, "resources=VCPU:2")
    assert nfv.requests(body) == expect(alloc(("numa1", "VCPU", 2), mappings={"": ["numa1"]}))
    assert body["provider_summaries"][nfv.uuid["numa0"]]["resources"]["VCPU"] == {"capacity": 8, "used": 7}
    body = get(nfv, f"{NET}")
    assert nfv.requests(body) == expect(alloc(("pf0", "SRIOV_NET_VF", 1), ("pf0", "NET_BW_EGR_KILOBIT_PER_SEC", 1000),
                                              mappings={"_NET": ["pf0"]}))


def test_nfv_in_tree_and_root_required(nfv):
    other = nfv.provider("cn_other", inventory={"VCPU": 8})
    body = get(nfv, "resources=VCPU:1")
    assert len(body["allocation_requests"]) == 3
    body = get(nfv, f"resources=VCPU:1&in_tree={nfv.uuid['pf1']}")
    assert {m for _, m in nfv.requests(body)} == {frozenset({("", frozenset({"numa0"}))}),
                                                  frozenset({("", frozenset({"numa1"}))})}
    body = get(nfv, f"resources=VCPU:1&in_tree={other}")
    assert nfv.requests(body) == expect(alloc(("cn_other", "VCPU", 1), mappings={"": ["cn_other"]}))
    body = get(nfv, "resources=VCPU:1&root_required=!COMPUTE_VOLUME_MULTI_ATTACH")
    assert nfv.summary_names(body) == {"cn_other"}
    body = get(nfv, "resources1=VCPU:1&in_tree1=" + nfv.uuid["cn"])
    assert nfv.summary_names(body) == {"cn", "numa0", "numa1", "pf0", "pf1"}
    unknown = "00000000-0000-4000-8000-00000000abcd"
    assert get(nfv, f"resources=VCPU:1&in_tree={unknown}") == EMPTY


# --- a shared storage pool ----------------------------------------------------------

@pytest.fixture
def pool(client) -> Fleet:
    fleet = Fleet(client)
    fleet.provider("cn1", inventory={"VCPU": 4, "DISK_GB": 10}, aggregates=[AGG])
    fleet.provider("cn2", inventory={"VCPU": 4, "DISK_GB": 10})
    fleet.provider("pool", inventory={"DISK_GB": 1000}, aggregates=[AGG],
                   traits=["MISC_SHARES_VIA_AGGREGATE"])
    return fleet


def test_pool_serves_only_members_of_its_aggregate(pool):
    body = get(pool, "resources=VCPU:1,DISK_GB:100")
    assert pool.requests(body) == expect(
        alloc(("cn1", "VCPU", 1), ("pool", "DISK_GB", 100), mappings={"": ["cn1", "pool"]}))
    assert pool.summary_names(body) == {"cn1", "pool"}
    body = get(pool, "resources=VCPU:1,DISK_GB:5")
    assert pool.requests(body) == expect(
        alloc(("cn1", "VCPU", 1), ("cn1", "DISK_GB", 5), mappings={"": ["cn1"]}),
        alloc(("cn1", "VCPU", 1), ("pool", "DISK_GB", 5), mappings={"": ["cn1", "pool"]}),
        alloc(("cn2", "VCPU", 1), ("cn2", "DISK_GB", 5), mappings={"": ["cn2"]}))


def test_pool_alone_and_deduplicated(pool):
    body = get(pool, "resources=DISK_GB:5")
    assert pool.requests(body) == expect(
        alloc(("cn1", "DISK_GB", 5), mappings={"": ["cn1"]}),
        alloc(("cn2", "DISK_GB", 5), mappings={"": ["cn2"]}),
        alloc(("pool", "DISK_GB", 5), mappings={"": ["pool"]}))


def test_pool_in_a_granular_group(pool):
    body = get(pool, "resources1=VCPU:1&resources2=DISK_GB:100&group_policy=isolate")
    assert pool.requests(body) == expect(
        alloc(("cn1", "VCPU", 1), ("pool", "DISK_GB", 100), mappings={"1": ["cn1"], "2": ["pool"]}))


def test_pool_with_member_of_and_forbidden_aggregates(pool):
    body = get(pool, f"resources=VCPU:1,DISK_GB:5&member_of={AGG}")
    assert pool.summary_names(body) == {"cn1", "pool"}
    assert len(body["allocation_requests"]) == 2
    body = get(pool, f"resources=VCPU:1,DISK_GB:5&member_of=!{AGG}")
    assert pool.requests(body) == expect(
        alloc(("cn2", "VCPU", 1), ("cn2", "DISK_GB", 5), mappings={"": ["cn2"]}))
    # The pool is not in AGG2, so with member_of=AGG2 only its own aggregates count.
    pool.set_aggregates("cn2", [AGG2])
    body = get(pool, f"resources=VCPU:1,DISK_GB:100&member_of={AGG2}")
    assert body == EMPTY


def test_pool_traits_count_when_it_contributes(pool):
    pool.set_traits("pool", ["MISC_SHARES_VIA_AGGREGATE", "STORAGE_DISK_SSD"])
    body = get(pool, "resources=VCPU:1,DISK_GB:5&required=STORAGE_DISK_SSD")
    assert pool.requests(body) == expect(
        alloc(("cn1", "VCPU", 1), ("pool", "DISK_GB", 5), mappings={"": ["cn1", "pool"]}))
    body = get(pool, "resources=VCPU:1,DISK_GB:5&required=!STORAGE_DISK_SSD")
    assert len(body["allocation_requests"]) == 2
    assert pool.summary_names(body) == {"cn1", "cn2"}


def test_pool_root_required_applies_to_the_anchor(pool):
    pool.set_traits("cn2", ["CUSTOM_GOLD"])
    pool.set_aggregates("cn2", [AGG])
    body = get(pool, "resources=VCPU:1,DISK_GB:100&root_required=CUSTOM_GOLD")
    assert pool.requests(body) == expect(
        alloc(("cn2", "VCPU", 1), ("pool", "DISK_GB", 100), mappings={"": ["cn2", "pool"]}))
    # Anchored at itself (or at cn1) the pool fails root_required; at cn2 it passes.
    body = get(pool, "resources=DISK_GB:100&root_required=CUSTOM_GOLD")
    assert pool.requests(body) == expect(alloc(("pool", "DISK_GB", 100), mappings={"": ["pool"]}))
    assert get(pool, "resources=DISK_GB:100&root_required=HW_CPU_X86_SSE2") == EMPTY


# --- two devices of one class told apart by traits ---------------------------------

@pytest.fixture
def gpus(client) -> Fleet:
    fleet = Fleet(client)
    fleet.provider("host", inventory={"VCPU": 8})
    fleet.provider("gpu_a", parent="host", inventory={"VGPU": 4}, traits=["CUSTOM_GPU_A"])
    fleet.provider("gpu_b", parent="host", inventory={"VGPU": 4}, traits=["CUSTOM_GPU_B"])
    return fleet


def test_two_devices_with_different_traits(gpus):
    body = get(gpus, "resources=VCPU:1&resources1=VGPU:1&required1=CUSTOM_GPU_A"
                     "&resources2=VGPU:1&required2=CUSTOM_GPU_B&group_policy=isolate")
    assert gpus.requests(body) == expect(
        alloc(("host", "VCPU", 1), ("gpu_a", "VGPU", 1), ("gpu_b", "VGPU", 1),
              mappings={"": ["host"], "1": ["gpu_a"], "2": ["gpu_b"]}))
    assert gpus.summary_names(body) == {"host", "gpu_a", "gpu_b"}


def test_two_devices_policies(gpus):
    base = "resources1=VGPU:1&resources2=VGPU:1"
    assert len(get(gpus, base + "&group_policy=isolate")["allocation_requests"]) == 2
    body = get(gpus, base + "&group_policy=none")
    assert len(body["allocation_requests"]) == 4
    assert alloc(("gpu_a", "VGPU", 2), mappings={"1": ["gpu_a"], "2": ["gpu_a"]}) in gpus.requests(body)


def test_summed_amounts_are_rechecked(gpus):
    gpus.provider("gpu_c", parent="host", inventory={"VGPU": {"total": 3, "max_unit": 2}},
                  traits=["CUSTOM_GPU_C"])
    gpus.allocate({"gpu_c": {"VGPU": 1}})
    query = "resources1=VGPU:1&required1=CUSTOM_GPU_C&resources2=VGPU:1&required2=CUSTOM_GPU_C&group_policy=none"
    body = get(gpus, query)  # 1 used + 2 fits capacity 3 and max_unit 2
    assert gpus.requests(body) == expect(alloc(("gpu_c", "VGPU", 2), mappings={"1": ["gpu_c"], "2": ["gpu_c"]}))
    query = ("resources1=VGPU:2&required1=CUSTOM_GPU_C&resources2=VGPU:1&required2=CUSTOM_GPU_C"
             "&group_policy=none")
    assert get(gpus, query) == EMPTY  # 3 > max_unit 2 (and 1 + 3 > capacity 3)
    # The unsuffixed group and a suffixed one drawing from the same provider.
    assert get(gpus, "resources=VGPU:2&resources1=VGPU:1&required1=CUSTOM_GPU_C"
                     "&required=CUSTOM_GPU_C") == EMPTY


# --- bare metal: one whole unit ----------------------------------------------------

@pytest.fixture
def ironic(client) -> Fleet:
    fleet = Fleet(client)
    whole = {"total": 1, "min_unit": 1, "max_unit": 1, "step_size": 1}
    fleet.provider("bm1", inventory={"CUSTOM_BAREMETAL_GOLD": whole}, traits=["CUSTOM_RAID"])
    fleet.provider("bm2", inventory={"CUSTOM_BAREMETAL_GOLD": whole})
    fleet.provider("bm3", inventory={"CUSTOM_BAREMETAL_GOLD": whole})
    fleet.provider("bm4", inventory={"CUSTOM_BAREMETAL_SILVER": whole})
    fleet.allocate({"bm3": {"CUSTOM_BAREMETAL_GOLD": 1}})
    return fleet


def test_bare_metal_whole_units(ironic):
    body = get(ironic, "resources=CUSTOM_BAREMETAL_GOLD:1")
    assert ironic.requests(body) == expect(
        alloc(("bm1", "CUSTOM_BAREMETAL_GOLD", 1), mappings={"": ["bm1"]}),
        alloc(("bm2", "CUSTOM_BAREMETAL_GOLD", 1), mappings={"": ["bm2"]}))
    assert body["provider_summaries"][ironic.uuid["bm2"]] == {
        "resources": {"CUSTOM_BAREMETAL_GOLD": {"capacity": 1, "used": 0}}, "traits": [],
        "parent_provider_uuid": None, "root_provider_uuid": ironic.uuid["bm2"]}
    assert get(ironic, "resources=CUSTOM_BAREMETAL_GOLD:2") == EMPTY
    assert ironic.summary_names(get(ironic, "resources=CUSTOM_BAREMETAL_GOLD:1&required=CUSTOM_RAID")) == {"bm1"}
    assert ironic.summary_names(get(ironic, "resources=CUSTOM_BAREMETAL_GOLD:1&required=!CUSTOM_RAID")) == {"bm2"}
    assert ironic.summary_names(get(ironic, "resources=CUSTOM_BAREMETAL_SILVER:1&limit=5")) == {"bm4"}


def test_step_size_and_min_unit(client):
    fleet = Fleet(client)
    fleet.provider("m", inventory={"MEMORY_MB": {"total": 4096, "min_unit": 512, "step_size": 256}})
    assert get(fleet, "resources=MEMORY_MB:256") == EMPTY
    assert get(fleet, "resources=MEMORY_MB:600") == EMPTY
    assert fleet.summary_names(get(fleet, "resources=MEMORY_MB:768")) == {"m"}
    fleet.provider("r", inventory={"VCPU": {"total": 4, "reserved": 1, "allocation_ratio": 2.0}})
    body = get(fleet, "resources=VCPU:6")
    assert body["provider_summaries"][fleet.uuid["r"]]["resources"]["VCPU"] == {"capacity": 6, "used": 0}
    assert get(fleet, "resources=VCPU:7") == EMPTY


# --- forbidden traits and negative member_of ---------------------------------------

@pytest.fixture
def computes(client) -> Fleet:
    fleet = Fleet(client)
    fleet.provider("c1", inventory={"VCPU": 4}, traits=["HW_CPU_X86_AVX2"], aggregates=[AGG])
    fleet.provider("c2", inventory={"VCPU": 4}, traits=["HW_CPU_X86_AVX2", "CUSTOM_WINDOWS"], aggregates=[AGG2])
    fleet.provider("c3", inventory={"VCPU": 4}, aggregates=[AGG, AGG2])
    fleet.provider("c4", inventory={"VCPU": 4})
    return fleet


@pytest.mark.parametrize("query,mv,names", [
    ("required=!CUSTOM_WINDOWS", "1.22", {"c1", "c3", "c4"}),
    ("required=HW_CPU_X86_AVX2,!CUSTOM_WINDOWS", "1.22", {"c1"}),
    ("required=!HW_CPU_X86_AVX2,!CUSTOM_WINDOWS", "1.22", {"c3", "c4"}),
    ("required=!!CUSTOM_WINDOWS", "1.22", {"c1", "c3", "c4"}),
    (f"member_of=!{AGG2}", "1.32", {"c1", "c4"}),
    (f"member_of=!in:{AGG},{AGG2}", "1.32", {"c4"}),
    (f"member_of=in:{AGG},{AGG2}", "1.21", {"c1", "c2", "c3"}),
    (f"member_of={AGG}&member_of={AGG2}", "1.24", {"c3"}),
    (f"member_of={AGG}&member_of=!{AGG}", "1.32", set()),
    (f"member_of={AGG}&member_of=!{AGG2}", "1.32", {"c1"}),
    ("required=in:HW_CPU_X86_AVX2,CUSTOM_WINDOWS", "1.39", {"c1", "c2"}),
    ("required=HW_CPU_X86_AVX2&required=!CUSTOM_WINDOWS", "1.39", {"c1"}),
    ("required=HW_CPU_X86_AVX2&required=!CUSTOM_WINDOWS", "1.38", {"c1", "c3", "c4"}),
    ("required=in:CUSTOM_WINDOWS,HW_CPU_X86_AVX2&required=!CUSTOM_WINDOWS", "1.39", {"c1"}),
    ("resources1=VCPU:1&required1=!CUSTOM_WINDOWS&member_of1=!" + AGG, "1.32", {"c4"}),
])
def test_trait_and_aggregate_filters(computes, query, mv, names):
    if not query.startswith("resources1"):
        query = "resources=VCPU:1&" + query
    body = get(computes, query, mv=mv)
    assert computes.summary_names(body) == names
    assert len(body["allocation_requests"]) == len(names)


def test_unknown_aggregate_matches_nothing(computes):
    assert get(computes, "resources=VCPU:1&member_of=00000000-0000-4000-8000-000000000999") == EMPTY


# --- limit and the candidate settings ------------------------------------------------

@pytest.fixture
def many(client) -> Fleet:
    fleet = Fleet(client)
    for i in range(12):
        fleet.provider(f"h{i}", inventory={"VCPU": 4, "MEMORY_MB": 1024}, traits=["HW_CPU_X86_AVX2"],
                       aggregates=[AGG])
    return fleet


def test_limit_on_a_flat_fleet(many):
    full = get(many, "resources=VCPU:1,MEMORY_MB:64")
    assert len(full["allocation_requests"]) == 12
    for limit in (1, 5, 12, 50):
        body = get(many, f"resources=VCPU:1,MEMORY_MB:64&limit={limit}")
        assert len(body["allocation_requests"]) == min(limit, 12)
        used = {u for ar in body["allocation_requests"] for u in ar["allocations"]}
        assert set(body["provider_summaries"]) == used
        assert set(many.requests(body)) <= set(many.requests(full))
    body = get(many, f"resources=VCPU:1&limit=3&limit=7&member_of={AGG}&required=HW_CPU_X86_AVX2")
    assert len(body["allocation_requests"]) == 3  # the first occurrence wins


def test_limit_with_several_groups_and_trees(client):
    fleet = Fleet(client)
    for i in range(6):
        fleet.provider(f"cn{i}", inventory={"DISK_GB": 100})
        for n in range(2):
            fleet.provider(f"cn{i}n{n}", parent=f"cn{i}", inventory={"VCPU": 4})
    query = "resources=DISK_GB:10&resources1=VCPU:1&resources2=VCPU:1&group_policy=isolate"
    full = fleet.requests(get(fleet, query))
    assert len(full) == 12
    for limit in (1, 3, 4, 11, 12, 13):
        body = get(fleet, query + f"&limit={limit}")
        got = fleet.requests(body)
        assert len(got) == min(limit, 12) and set(got) <= set(full)
        trees = {fleet.name[u][:3] for ar in body["allocation_requests"] for u in ar["allocations"]}
        assert fleet.summary_names(body) == {n for n in fleet.uuid if n[:3] in trees}


def _client_with(engine, db_url, **overrides) -> PlacementClient:
    return PlacementClient(make_app(Settings(db=db_url, **overrides), engine))


def test_max_allocation_candidates_caps_results(many, engine, db_url):
    capped = Fleet(_client_with(engine, db_url, max_allocation_candidates=4))
    capped.name = many.name
    body = get(capped, "resources=VCPU:1")
    assert len(body["allocation_requests"]) == 4
    assert len(get(capped, "resources=VCPU:1&limit=2")["allocation_requests"]) == 2


def test_randomized_candidates_are_a_valid_sample(many, engine, db_url):
    shuffled = Fleet(_client_with(engine, db_url, randomize_allocation_candidates=True))
    shuffled.name = many.name
    full = set(many.requests(get(many, "resources=VCPU:1")))
    seen = set()
    for _ in range(6):
        body = get(shuffled, "resources=VCPU:1&limit=3")
        got = shuffled.requests(body)
        assert len(got) == 3 and set(got) <= full
        seen.update(got)
        assert len(body["provider_summaries"]) == 3
    assert len(seen) > 3  # six random draws of 3 out of 12 do not all coincide
    assert set(shuffled.requests(get(shuffled, "resources=VCPU:1"))) == full


@pytest.mark.parametrize("strategy, trees", [("depth-first", 1), ("breadth-first", 3)])
def test_generation_strategy_decides_which_trees_a_cap_keeps(engine, db_url, strategy, trees):
    """Each tree offers four combinations (two VCPU children x two memory
    children); a cap of 3 takes them from one tree (depth-first) or one from
    each of three trees (breadth-first)."""
    fleet = Fleet(_client_with(engine, db_url, max_allocation_candidates=3,
                               allocation_candidates_generation_strategy=strategy))
    for i in range(4):
        fleet.provider(f"cn{i}", inventory={"DISK_GB": 100})
        for n in range(2):
            fleet.provider(f"cn{i}c{n}", parent=f"cn{i}", inventory={"VCPU": 4})
            fleet.provider(f"cn{i}m{n}", parent=f"cn{i}", inventory={"MEMORY_MB": 1024})
    body = get(fleet, "resources=VCPU:1,MEMORY_MB:64")
    assert len(body["allocation_requests"]) == 3
    roots = {fleet.name[u][:3] for ar in body["allocation_requests"] for u in ar["allocations"]}
    assert len(roots) == trees
