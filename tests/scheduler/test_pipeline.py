"""The filter/weigher pipeline on hand-made host states: stage order,
once-per-request filters, weighing math, picking."""
from __future__ import annotations

import math
import random

import pytest

from billeting.placement_client.model import AllocationRequest, Capacity, ProviderResources, ProviderSummary
from billeting.scheduler import filters, weighers
from billeting.scheduler.catalog import HostRecord
from billeting.scheduler.decision import Decision
from billeting.scheduler.directory import MemoryDirectory
from billeting.scheduler.hoststate import Consumption, HostState
from billeting.scheduler.pipeline import Pipeline
from billeting.scheduler.request import RequestGroup, ScheduleRequest
from billeting.scheduler.settings import SchedulerSettings


def host(name: str, *, ram: int = 1000, used_ram: int = 0, vcpu: int = 10, failed: int = 0, enabled=True,
         aggregates=frozenset(), consumption=None) -> HostState:
    uuid = f"uuid-{name}"
    summary = ProviderSummary(resources={"MEMORY_MB": Capacity(ram, used_ram), "VCPU": Capacity(vcpu, 0)},
                              root_provider_uuid=uuid)
    record = HostRecord(uuid=uuid, name=name, service_host=name, cell_uuid="c1", enabled=enabled,
                        failed_builds=failed, aggregates=aggregates)
    ar = AllocationRequest({uuid: ProviderResources({"MEMORY_MB": 100})})
    return HostState(record, [uuid], {uuid: summary}, consumption or Consumption(), [ar], {})


def decision(settings=None, directory=None, **request) -> Decision:
    req = ScheduleRequest(instance_uuids=request.pop("instances", ("i1",)), project_id="p", user_id="u",
                          groups=(RequestGroup(resources={"MEMORY_MB": 100}),), **request)
    return Decision(req, settings or SchedulerSettings(), directory or MemoryDirectory())


def test_filters_run_cheapest_first_whatever_the_configured_order():
    built = filters.build(("ServerGroupAffinityFilter", "FailureDomainFilter", "ComputeFilter"))
    assert [f.name for f in built] == ["ComputeFilter", "ServerGroupAffinityFilter", "FailureDomainFilter"]
    assert [f.cost for f in filters.build(None)] == sorted(f.cost for f in filters.build(None))


def test_unknown_plugins_are_a_clear_error():
    with pytest.raises(ValueError, match="unknown scheduler filter.*NoSuchFilter"):
        filters.build(("NoSuchFilter",))
    with pytest.raises(ValueError, match="unknown scheduler weigher.*NoSuchWeigher"):
        weighers.build(("NoSuchWeigher",))


def test_once_per_request_filters_only_run_for_the_first_instance():
    pipe = Pipeline(SchedulerSettings())
    hosts = [host("on"), host("off", enabled=False)]
    d = decision(instances=("i1", "i2"))
    trace = []
    assert [h.name for h in pipe.filter(hosts, d, trace)] == ["on"]
    assert [(s.name, s.removed) for s in trace] == [("ComputeFilter", 1)]
    d.index = 1
    assert [h.name for h in pipe.filter(hosts, d)] == ["on", "off"]  # ComputeFilter skipped


def test_weights_are_normalized_per_weigher_and_the_sign_packs_or_spreads():
    hosts = [host("empty", ram=1000), host("half", ram=1000, used_ram=500), host("full", ram=1000, used_ram=900)]
    only_ram = SchedulerSettings(weighers=("RAMWeigher",))
    spread = Pipeline(only_ram).weigh(hosts, decision(only_ram), scores=True)
    assert [(r.host.name, round(r.weight, 3)) for r in spread] == [("empty", 1.0), ("half", 0.5), ("full", 0.1)]
    pack = only_ram.with_multipliers(ram_weight_multiplier=-2.0)
    assert [r.host.name for r in Pipeline(pack).weigh(hosts, decision(pack))] == ["full", "half", "empty"]


def test_build_failures_sink_a_host_below_everything_else():
    hosts = [host("roomy-but-failing", ram=100000, failed=3), host("small", ram=1000)]
    ranked = Pipeline(SchedulerSettings()).weigh(hosts, decision())
    assert [r.host.name for r in ranked] == ["small", "roomy-but-failing"]


def test_aggregate_metadata_overrides_a_multiplier_smallest_wins():
    directory = MemoryDirectory()
    directory.set_metadata("pack-here", {"ram_weight_multiplier": "-1.0"})
    directory.set_metadata("pack-harder", {"ram_weight_multiplier": "-5"})
    directory.set_metadata("junk", {"ram_weight_multiplier": "lots"})
    settings = SchedulerSettings(weighers=("RAMWeigher",))
    d = decision(settings, directory)
    w = weighers.RAMWeigher()
    assert w.multiplier(host("a", aggregates=frozenset({"pack-here", "pack-harder"})), d) == -5.0
    assert w.multiplier(host("b", aggregates=frozenset({"junk"})), d) == 1.0
    assert w.multiplier(host("c"), d) == 1.0


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e999"])
def test_a_multiplier_metadata_that_is_not_finite_is_ignored(value):
    """Any admin may set aggregate metadata to "nan": the host's weight was
    NaN (``"weight": null`` in a dry run), so it ranked anywhere at random."""
    directory = MemoryDirectory()
    directory.set_metadata("odd", {"ram_weight_multiplier": value})
    settings = SchedulerSettings(weighers=("RAMWeigher",))
    d = decision(settings, directory)
    assert weighers.RAMWeigher().multiplier(host("odd", aggregates=frozenset({"odd"})), d) == 1.0
    hosts = [host("full", ram=1000, used_ram=900), host("odd", ram=1000, used_ram=500, aggregates=frozenset({"odd"})),
             host("empty", ram=1000)]
    ranked = Pipeline(settings).weigh(hosts, d)
    assert [r.host.name for r in ranked] == ["empty", "odd", "full"]
    assert all(math.isfinite(r.weight) for r in ranked)


def test_host_subset_size_picks_at_random_among_the_best():
    hosts = [host(f"h{i}", ram=1000 - i) for i in range(10)]
    settings = SchedulerSettings(weighers=("RAMWeigher",), host_subset_size=3)
    picks = set()
    for seed in range(40):
        pipe = Pipeline(settings, random.Random(seed))
        picks.add(pipe.rank(hosts, decision(settings))[1][0].host.name)
    assert picks == {"h0", "h1", "h2"}


def test_shuffling_equal_best_hosts():
    hosts = [host(f"node{i}") for i in range(5)]  # all weigh the same (Ironic-like)
    settings = SchedulerSettings(shuffle_best_same_weighed_hosts=True)
    firsts = {Pipeline(settings, random.Random(s)).rank(hosts, decision(settings))[1][0].host.name
              for s in range(30)}
    assert len(firsts) > 1
    plain = {Pipeline(SchedulerSettings(), random.Random(s)).rank(hosts, decision())[1][0].host.name
             for s in range(30)}
    assert plain == {"node0"}


def test_consumption_is_shared_and_makes_candidates_stop_fitting():
    shared = Consumption()
    a = host("a", ram=250, consumption=shared)
    assert a.free("MEMORY_MB") == 250 and a.first_candidate() is not None
    shared.add(a.candidates[0])
    shared.add(a.candidates[0])
    assert a.free("MEMORY_MB") == 50
    assert a.first_candidate() is None  # 100 MB no longer fit


def test_later_instances_weigh_again_exactly_the_hosts_their_claims_changed():
    """Raw values are kept between the instances of a request; a host a claim
    changed is weighed again, also when it was filtered out in between and
    comes back (the final ranking for alternates has every host again)."""
    shared = Consumption()
    hosts = [host(n, ram=1000, consumption=shared) for n in ("a", "b", "c")]
    only_ram = SchedulerSettings(weighers=("RAMWeigher",))
    pipe = Pipeline(only_ram)
    d = decision(only_ram, instances=("i1", "i2", "i3"))
    d.consumption = shared

    def free_in_order(ranked):
        return [(r.host.name, r.host.free("MEMORY_MB")) for r in ranked]

    assert [r.weight for r in pipe.weigh(hosts, d)] == [1.0, 1.0, 1.0]  # all equal
    shared.add(hosts[0].candidates[0])  # a claim on "a": 900 left
    d.index = 1
    assert free_in_order(pipe.weigh(hosts, d))[-1] == ("a", 900)
    shared.add(hosts[1].candidates[0])  # a claim on "b" while "b" is not weighed
    shared.add(hosts[1].candidates[0])
    d.index = 2
    assert [r.host.name for r in pipe.weigh([hosts[0], hosts[2]], d)] == ["c", "a"]
    d.index = 0
    ranked = pipe.weigh(hosts, d)  # "b" is back, with 800 free: last
    assert free_in_order(ranked) == [("c", 1000), ("a", 900), ("b", 800)]
    assert [round(r.weight, 3) for r in ranked] == [1.0, 0.9, 0.8]  # (minval 0)


def test_kept_raw_values_always_equal_weighing_afresh():
    """Whatever the claims and whichever lists of hosts the filters leave
    (the very list again, a subset, the full list back), weights from kept
    values are the weights a fresh weighing gives."""
    rng = random.Random(7)
    settings = SchedulerSettings(weighers=("RAMWeigher", "CPUWeigher"))
    for trial in range(20):
        shared = Consumption()
        hosts = [host(f"h{k}", ram=rng.choice((1000, 2000)), vcpu=rng.choice((8, 16)), consumption=shared)
                 for k in range(12)]
        pipe = Pipeline(settings)
        kept = decision(settings, instances=tuple(f"i{k}" for k in range(10)))
        kept.consumption = shared
        listed = hosts
        for index in range(10):
            kept.index = index
            ranked = pipe.weigh(listed, kept)
            fresh = pipe.weigh(listed, decision(settings))
            assert {r.host.name: round(r.weight, 9) for r in ranked} == \
                {r.host.name: round(r.weight, 9) for r in fresh}, (trial, index)
            shared.add(rng.choice(listed).candidates[0])   # a claim somewhere on the list
            if rng.random() < 0.3:
                shared.add(rng.choice(hosts).candidates[0])   # and maybe on a host not listed
            roll = rng.random()
            if roll < 0.3:
                listed = rng.sample(hosts, 8)
            elif roll < 0.5:
                listed = hosts
            elif roll < 0.6:
                listed = list(listed)  # another list object with the same hosts


def test_free_values_read_straight_from_summaries_equal_the_cached_figures():
    """The weighers' bulk read of free capacity gives what ``free`` gives
    for every kind of host: flat and untouched (read from the summary),
    claimed on, over capacity, without the class, and a tree."""
    from billeting.scheduler.hoststate import free_values

    shared = Consumption()
    plain = host("plain", ram=1000, consumption=shared)
    claimed = host("claimed", ram=1000, consumption=shared)
    over = host("over", ram=1000, used_ram=1500, consumption=shared)
    root, child = "uuid-tree", "uuid-tree-numa"
    summaries = {root: ProviderSummary(resources={"VCPU": Capacity(8, 2)}, root_provider_uuid=root),
                 child: ProviderSummary(resources={"MEMORY_MB": Capacity(500, 100)}, root_provider_uuid=root)}
    record = HostRecord(uuid=root, name="tree", service_host="tree", cell_uuid="c1")
    tree = HostState(record, [root, child], summaries, shared,
                     [AllocationRequest({child: ProviderResources({"MEMORY_MB": 100})})], {})
    hosts = [plain, claimed, over, tree]
    shared.add(claimed.candidates[0])
    expected = {"MEMORY_MB": [1000, 900, 0, 400], "VCPU": [10, 10, 10, 6], "DISK_GB": [0, 0, 0, 0]}
    for rc, values in expected.items():
        assert free_values(hosts, rc) == values
    fresh = [host("plain", ram=1000, consumption=shared), claimed, over, tree]
    assert [[h.free(rc) for h in fresh] for rc in expected] == list(expected.values())
    shared.add(tree.candidates[0])   # a claim after the figures were read: read again
    assert free_values(hosts, "MEMORY_MB") == [1000, 900, 0, 300]


def test_ranks_in_a_cell_are_the_same_with_and_without_what_the_frame_knows():
    """Alternates read the ranks of a cell's hosts but the excluded ones; a
    frame that knows every host is of one cell answers without a pass over
    the hosts, and must answer the same."""
    from billeting.scheduler.pipeline import RankedList, RawFrame

    rng = random.Random(3)
    hosts = [host(f"h{k}") for k in range(40)]
    order = list(range(40))
    rng.shuffle(order)
    weights = [0.0] * 40
    plain = RankedList(hosts, weights, order)
    known = RankedList(hosts, weights, order, frame=RawFrame(list(hosts)))
    for _ in range(20):
        excluded = {f"uuid-h{k}" for k in rng.sample(range(40), rng.randint(0, 6))} | {"uuid-elsewhere"}
        assert known.positions_in_cell("c1", excluded) == plain.positions_in_cell("c1", excluded)
        assert known.positions_in_cell("c2", excluded) == plain.positions_in_cell("c2", excluded) == []
    assert known.moved_to_front(5).positions_in_cell("c1", set()) == list(range(40))
