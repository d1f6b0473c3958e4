"""select_destinations against a real Placement: claims, fall-back when a
claim loses, all-or-nothing rollback, alternates, explanations, dry runs."""
from __future__ import annotations

import msgspec
import pytest

from billeting.placement_client import claims
from billeting.placement_client.inprocess import InProcessPlacementClient
from billeting.scheduler import ConsumerConflict, NoValidHost, ScheduleRequest, SchedulerSettings
from billeting.scheduler.nova import Flavor, request_from_nova
from billeting.scheduler.request import Destination, RequestGroup
from tests.scheduler.fleet import memory_catalog, new_uuids

SMALL = Flavor(vcpus=2, memory_mb=2048, root_gb=10)


def req(n=1, flavor=SMALL, **kw) -> ScheduleRequest:
    return request_from_nova(flavor, instance_uuids=new_uuids(n), project_id="proj", user_id="user", **kw)


def held(client, consumer):
    return {rp: dict(a.resources) for rp, a in client.get_allocations(consumer).allocations.items()}


def test_the_chosen_host_is_claimed_with_its_allocation_request(fleet, make_scheduler, placement):
    for i in range(3):
        fleet.host(f"h{i}", memory_mb=8192 * (i + 1))
    request = req()
    [[chosen]] = make_scheduler().select_destinations(request)
    assert chosen.claimed and chosen.nodename == "h2"  # the most free RAM: spread by default
    assert chosen.consumer_uuid == request.instance_uuids[0]
    assert chosen.allocation_request_version == "1.39"
    assert held(placement, chosen.consumer_uuid) == {fleet.hosts["h2"]: {"DISK_GB": 10, "MEMORY_MB": 2048,
                                                                            "VCPU": 2}}
    body = chosen.claim_body(project_id="proj", user_id="user")
    assert body.consumer_generation is None and body.allocations == chosen.allocation_request.allocations
    consumer = placement.get_allocations(chosen.consumer_uuid)
    assert (consumer.project_id, consumer.user_id, consumer.consumer_type) == ("proj", "user", "INSTANCE")


def test_a_negative_ram_multiplier_packs(fleet, make_scheduler):
    for i in range(3):
        fleet.host(f"h{i}", memory_mb=8192 * (i + 1))
    settings = SchedulerSettings().with_multipliers(ram_weight_multiplier=-1.0, cpu_weight_multiplier=0.0,
                                                     disk_weight_multiplier=0.0)
    [[chosen]] = make_scheduler(settings).select_destinations(req())
    assert chosen.nodename == "h0"


class LosingFirstClaims(InProcessPlacementClient):
    """Another scheduler fills the target host between our candidates and our claim."""

    def __init__(self, engine, settings, fleet, steal_from: list[str]):
        super().__init__(engine, settings)
        self.fleet, self.steal_from = fleet, list(steal_from)

    def put_allocations(self, consumer_uuid, write, *, version=None):
        if self.steal_from:
            name = self.steal_from.pop(0)
            usage = self.fleet.usage(name)
            free = 32768 - usage.get("MEMORY_MB", 0)
            thief = new_uuids(1)[0]
            from billeting.placement_client.model import AllocationRequest, ProviderResources

            grab = AllocationRequest({self.fleet.hosts[name]: ProviderResources({"MEMORY_MB": free})})
            assert claims.claim(self, thief, grab, project_id="other", user_id="other").ok
        return super().put_allocations(consumer_uuid, write, version=version)


def test_a_lost_claim_falls_back_to_the_next_host(engine, settings, fleet, make_scheduler, caplog):
    for i in range(3):
        fleet.host(f"h{i}", memory_mb=32768, vcpus=16 - i)  # h0 ranks first, then h1
    client = LosingFirstClaims(engine, settings, fleet, steal_from=["h0"])
    caplog.set_level("INFO", logger="billeting.scheduler.core")
    [[chosen, *alternates]] = make_scheduler(client=client).select_destinations(req(), alternates=2)
    assert chosen.nodename == "h1" and chosen.claimed
    assert [a.nodename for a in alternates] == ["h2"]  # the host whose claim lost is not offered again
    assert "lost (no_capacity)" in caplog.text and "h0" in caplog.text


def test_several_instances_all_or_nothing(fleet, make_scheduler, placement):
    fleet.host("a", memory_mb=4096)   # room for 2 of SMALL
    fleet.host("b", memory_mb=2048)   # room for 1
    request = req(4)
    with pytest.raises(NoValidHost) as failed:
        make_scheduler().select_destinations(request)
    for consumer in request.instance_uuids:
        assert placement.get_allocations(consumer).allocations == {}
    assert fleet.usage("a") == {} and fleet.usage("b") == {}
    assert "placed 3 before running out; all rolled back" in str(failed.value)


def test_several_instances_see_each_others_claims(fleet, make_scheduler, placement):
    fleet.host("a", memory_mb=4096)
    fleet.host("b", memory_mb=2048)
    request = req(3)
    lines = make_scheduler().select_destinations(request)
    assert sorted(line[0].nodename for line in lines) == ["a", "a", "b"]
    assert fleet.usage("a")["MEMORY_MB"] == 4096 and fleet.usage("b")["MEMORY_MB"] == 2048


def test_alternates_come_from_the_chosen_cell_and_never_a_sibling_choice(fleet, placement, make_scheduler):
    for i in range(6):
        fleet.host(f"h{i}", memory_mb=32768 - 1024 * i)
    catalog = memory_catalog(fleet, cell_of=lambda name: "cell-a" if name in ("h0", "h1", "h3", "h5") else "cell-b")
    lines = make_scheduler(catalog=catalog).select_destinations(req(2), alternates=5)
    chosen = {line[0].nodename for line in lines}
    assert chosen == {"h0", "h1"}
    for line in lines:
        first, alternates = line[0], line[1:]
        assert first.claimed and not any(a.claimed for a in alternates)
        assert all(a.cell_uuid == first.cell_uuid == "cell-a" for a in alternates)
        assert not chosen & {a.nodename for a in alternates}
        assert [a.nodename for a in alternates] == ["h3", "h5"]  # fewer than asked: the cell ran out
        for a in alternates:
            assert a.allocation_request is not None and a.consumer_uuid == first.consumer_uuid
            assert set(a.allocation_request.allocations) == {a.compute_node_uuid}
            assert placement.get_allocations(a.consumer_uuid).allocations.keys() == {first.compute_node_uuid}


def test_zero_alternates_means_only_the_chosen(fleet, make_scheduler):
    for i in range(3):
        fleet.host(f"h{i}")
    assert [len(line) for line in make_scheduler().select_destinations(req(2), alternates=0)] == [1, 1]


def test_an_existing_consumer_is_refused_and_nothing_else_is_claimed(fleet, make_scheduler, placement):
    fleet.host("a")
    fleet.host("b")
    request = req(2)
    # The second instance already holds an allocation somewhere.
    first = make_scheduler().select_destinations(req(1))[0][0]
    placement.delete_allocations(first.consumer_uuid)
    taken = request.instance_uuids[1]
    claims.claim(placement, taken, first.allocation_request, project_id="p", user_id="u")
    with pytest.raises(ConsumerConflict):
        make_scheduler().select_destinations(request)
    assert placement.get_allocations(request.instance_uuids[0]).allocations == {}
    assert placement.get_allocations(taken).allocations  # untouched


def test_no_valid_host_explains_placement_shortfalls_and_filters(fleet, make_scheduler):
    for i in range(4):
        fleet.host(f"big{i}", memory_mb=65536, traits=("HW_CPU_X86_AVX2",))
    for i in range(3):
        fleet.host(f"small{i}", memory_mb=4096)
    catalog = memory_catalog(fleet)
    import msgspec  # disable two of the big ones

    for name in ("big0", "big1"):
        rec = catalog.records([fleet.hosts[name]])[fleet.hosts[name]]  # noqa: F841
        catalog.put(msgspec.structs.replace(rec, enabled=False))
    request = req(17, flavor=Flavor(vcpus=1, memory_mb=8192))  # the two enabled big hosts take 16
    with pytest.raises(NoValidHost) as failed:
        make_scheduler(catalog=catalog).select_destinations(request)
    explanation = failed.value.explanation
    assert explanation.hosts_total == 7 and explanation.hosts_offered == 4
    assert [(s.hosts, s.reason) for s in explanation.placement] == [
        (3, "had no 8,192 MB of memory free in one provider")]
    assert [(f.filter, f.removed) for f in explanation.filters] == [("ComputeFilter", 2)]
    assert "resources=MEMORY_MB:8192,VCPU:1" in explanation.query
    assert explanation.message.startswith(
        "No valid host was found for 17 instances (placed 16 before running out; all rolled back)")
    assert "offered 4 of 7 hosts: 3 had no 8,192 MB of memory free in one provider; 2 were disabled or down" \
        in explanation.message


def test_dry_run_ranks_with_scores_and_claims_nothing(fleet, make_scheduler, placement):
    for i in range(3):
        fleet.host(f"h{i}", memory_mb=8192 * (i + 1), vcpus=16)
    request = req()
    ranked = make_scheduler().dry_run(request)
    assert [r.host for r in ranked] == ["h2", "h1", "h0"]
    assert ranked[0].scores["RAMWeigher"] == pytest.approx(1.0)
    assert ranked[0].weight == pytest.approx(sum(ranked[0].scores.values()))
    assert placement.get_allocations(request.instance_uuids[0]).allocations == {}
    assert all(fleet.usage(f"h{i}") == {} for i in range(3))


def test_claim_false_ranks_the_same_way_and_writes_nothing(fleet, make_scheduler, placement):
    for i in range(3):
        fleet.host(f"h{i}", memory_mb=8192 * (i + 1))
    request = req(3, flavor=Flavor(vcpus=2, memory_mb=6144, root_gb=10))
    lines = make_scheduler().select_destinations(request, alternates=1, claim=False)
    assert not any(s.claimed for line in lines for s in line)
    assert all(fleet.usage(f"h{i}") == {} for i in range(3))
    claimed = make_scheduler().select_destinations(request, alternates=1)
    assert [[s.nodename for s in line] for line in lines] == [[s.nodename for s in line] for line in claimed]
    assert [line[0].nodename for line in claimed] == ["h2", "h1", "h2"]


def test_requested_destination_and_ignored_hosts(fleet, make_scheduler):
    for i in range(3):
        fleet.host(f"h{i}", memory_mb=8192 * (i + 1))
    [[chosen]] = make_scheduler().select_destinations(req(destination=Destination(host="h0")))
    assert chosen.nodename == "h0"
    [[chosen]] = make_scheduler().select_destinations(req(ignore_hosts=["H2"]))
    assert chosen.nodename == "h1"
    with pytest.raises(NoValidHost, match="No valid host: no such host: nowhere"):
        make_scheduler().select_destinations(req(destination=Destination(host="nowhere")))
    with pytest.raises(NoValidHost, match="No valid host: no such node: nowhere"):
        make_scheduler().select_destinations(req(destination=Destination(node="nowhere")))
    with pytest.raises(NoValidHost, match="node h1 is not a node of host h0"):
        make_scheduler().select_destinations(req(destination=Destination(host="h0", node="h1")))


def test_traits_and_forbidden_traits_reach_placement(fleet, make_scheduler):
    fleet.host("plain", memory_mb=65536)
    fleet.host("fast", memory_mb=8192, traits=("CUSTOM_FAST",))
    fleet.host("fast-old", memory_mb=8192, traits=("CUSTOM_FAST", "CUSTOM_OLD"))
    request = ScheduleRequest(instance_uuids=new_uuids(1), project_id="p", user_id="u", groups=(
        RequestGroup(resources={"VCPU": 1}, required=(frozenset({"CUSTOM_FAST"}),),
                     forbidden=frozenset({"CUSTOM_OLD"})),))
    [[chosen]] = make_scheduler().select_destinations(request)
    assert chosen.nodename == "fast"


def test_a_disabled_compute_is_never_chosen(fleet, make_scheduler, placement):
    fleet.host("on", memory_mb=4096)
    fleet.host("off", memory_mb=65536, traits=("COMPUTE_STATUS_DISABLED",))
    [[chosen]] = make_scheduler().select_destinations(req())
    assert chosen.nodename == "on"


def test_bad_requests_are_refused_before_anything_happens(fleet, make_scheduler):
    from billeting.scheduler import InvalidRequest

    fleet.host("h")
    sched = make_scheduler()
    with pytest.raises(InvalidRequest):
        sched.select_destinations(ScheduleRequest(instance_uuids=(), project_id="p", user_id="u",
                                                  groups=(RequestGroup(resources={"VCPU": 1}),)))
    with pytest.raises(InvalidRequest):
        sched.select_destinations(ScheduleRequest(instance_uuids=("a", "a"), project_id="p", user_id="u",
                                                  groups=(RequestGroup(resources={"VCPU": 1}),)))
    with pytest.raises(InvalidRequest):
        sched.select_destinations(req(), alternates=-1)
    with pytest.raises(InvalidRequest, match="No such resource class"):
        sched.select_destinations(ScheduleRequest(instance_uuids=("x",), project_id="p", user_id="u",
                                                  groups=(RequestGroup(resources={"CUSTOM_NOPE": 1}),)))


class LosingTheBatch(InProcessPlacementClient):
    """Another scheduler fills host ``a`` just before our batch claim lands."""

    def __init__(self, engine, settings, fleet):
        super().__init__(engine, settings)
        self.fleet, self.batches = fleet, 0

    def post_allocations(self, writes):
        self.batches += 1
        if self.batches == 1:
            from billeting.placement_client.model import AllocationRequest, ProviderResources

            grab = AllocationRequest({self.fleet.hosts["a"]: ProviderResources({"MEMORY_MB": 30000})})
            assert claims.claim(self, new_uuids(1)[0], grab, project_id="other", user_id="other").ok
        return super().post_allocations(writes)


def test_a_multi_instance_request_claims_in_one_batch(fleet, make_scheduler, engine, settings):
    fleet.host("a", memory_mb=32768)
    fleet.host("b", memory_mb=16384)
    client = LosingTheBatch(engine, settings, fleet)
    client.batches = 1  # no theft: the batch goes through
    lines = make_scheduler(client=client).select_destinations(req(3))
    assert client.batches == 2 and all(line[0].claimed for line in lines)
    assert sum(fleet.usage(h).get("MEMORY_MB", 0) for h in ("a", "b")) == 3 * 2048


def test_a_lost_batch_falls_back_to_claims_one_by_one(fleet, make_scheduler, engine, settings, caplog):
    fleet.host("a", memory_mb=32768)   # the planner puts everything here first...
    fleet.host("b", memory_mb=16384)
    client = LosingTheBatch(engine, settings, fleet)
    caplog.set_level("INFO", logger="billeting.scheduler.core")
    request = req(3)
    lines = make_scheduler(client=client).select_destinations(request)
    # ...but "a" kept only 2,768 MB: the fresh decision prefers "b" now.
    assert sorted(line[0].nodename for line in lines) == ["b", "b", "b"]
    assert fleet.usage("a")["MEMORY_MB"] == 30000 and fleet.usage("b")["MEMORY_MB"] == 3 * 2048
    assert "batch claim of 3 instances lost" in caplog.text
    for line in lines:
        held = client.get_allocations(line[0].consumer_uuid)
        assert held.as_resources() == line[0].allocation_request.as_resources()


def test_alternates_spread_through_the_ranking_or_follow_the_chosen(fleet, make_scheduler):
    # Spread weighing ranks h0 (most free) first, then h1, h2, ... h8.
    for i in range(9):
        fleet.host(f"h{i}", memory_mb=32768 - 1024 * i)
    spread = make_scheduler().select_destinations(req(1), alternates=2)[0]
    # Eight eligible hosts after the chosen h0: alternates at the 3rd and 6th
    # of them, away from the top that requests in flight are about to take.
    assert [s.nodename for s in spread] == ["h0", "h3", "h6"]
    nxt = make_scheduler(SchedulerSettings(alternates_from="next")).select_destinations(req(1), alternates=2)[0]
    assert [s.nodename for s in nxt] == ["h1", "h2", "h3"]  # h0 holds the first claim now
    with pytest.raises(ValueError, match="alternates_from"):
        make_scheduler(SchedulerSettings(alternates_from="random"))


def _with_failures(fleet, names: set[str]):
    catalog = memory_catalog(fleet)
    for rec in catalog.all():
        if rec.name in names:
            catalog.put(msgspec.structs.replace(rec, failed_builds=1))
    return catalog


def test_with_the_build_failure_weigher_off_failed_hosts_are_alternates_like_any(fleet, make_scheduler):
    for i in range(9):
        fleet.host(f"h{i}", memory_mb=32768 - 1024 * i)
    catalog = _with_failures(fleet, {"h3", "h6"})
    # With BuildFailureWeigher off, failures count for nothing: alternates
    # spread over all eight hosts after h0 are the two that failed.
    off = SchedulerSettings().with_multipliers(build_failure_weight_multiplier=0.0)
    blind = make_scheduler(off, catalog=catalog).select_destinations(req(1), alternates=2)[0]
    assert [s.nodename for s in blind] == ["h0", "h3", "h6"]


def test_a_short_ranking_spreads_its_alternates_over_hosts_without_failures(fleet, make_scheduler):
    # What a sampled decision sees: a few hosts of the cell, the one that
    # just failed sunk to the bottom. Spread over h1..h3, the second
    # alternate would be h3.
    for i in range(4):
        fleet.host(f"h{i}", memory_mb=32768 - 1024 * i)
    catalog = _with_failures(fleet, {"h3"})
    line = make_scheduler(catalog=catalog).select_destinations(req(1), alternates=2)[0]
    assert [s.nodename for s in line] == ["h0", "h1", "h2"]


def test_a_host_that_failed_once_among_instances_it_runs_stays_an_alternate(fleet, make_scheduler, placement):
    # It has shown it can build: passed over, BuildFailureWeigher would keep
    # it sunk with no build left to clear its count.
    from billeting.placement_client.model import AllocationRequest, ProviderResources

    for i in range(4):
        fleet.host(f"h{i}", memory_mb=32768 - 2048 * i)
    assert claims.claim(placement, new_uuids(1)[0], AllocationRequest(
        {fleet.hosts["h3"]: ProviderResources({"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1})}),
        project_id="p", user_id="u").ok
    catalog = _with_failures(fleet, {"h3"})
    line = make_scheduler(catalog=catalog).select_destinations(req(1), alternates=2)[0]
    assert [s.nodename for s in line] == ["h0", "h2", "h3"]  # spread over h1..h3, as without failures


def test_hosts_with_failures_are_alternates_only_when_too_few_others_are_left(fleet, make_scheduler):
    for i in range(4):
        fleet.host(f"h{i}", memory_mb=32768 - 1024 * i)
    catalog = _with_failures(fleet, {"h1", "h2"})
    for settings in (SchedulerSettings(), SchedulerSettings(alternates_from="next")):
        line = make_scheduler(settings, catalog=catalog).select_destinations(req(1), alternates=2)[0]
        chosen = line[0].nodename
        assert chosen in {"h0", "h3"}
        assert [s.nodename for s in line[1:]] == [{"h0": "h3", "h3": "h0"}[chosen], "h1"]


def _metric(name: str, **labels) -> float:
    from prometheus_client import REGISTRY

    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_a_lost_claim_shows_in_the_selection_and_in_the_metrics(engine, settings, fleet, make_scheduler):
    for i in range(3):
        fleet.host(f"h{i}", memory_mb=32768, vcpus=16 - i)  # h0 ranks first, then h1
    client = LosingFirstClaims(engine, settings, fleet, steal_from=["h0"])
    lost = _metric("billeting_scheduler_claims_lost_total")
    placed = _metric("billeting_scheduler_instances_placed_total")
    decided = _metric("billeting_scheduler_decision_duration_seconds_count", front_door="python")
    [[chosen, *alternates]] = make_scheduler(client=client).select_destinations(req(), alternates=2)
    assert (chosen.nodename, chosen.claims_lost) == ("h1", 1)
    assert [a.claims_lost for a in alternates] == [0]
    assert _metric("billeting_scheduler_claims_lost_total") == lost + 1
    assert _metric("billeting_scheduler_instances_placed_total") == placed + 1
    assert _metric("billeting_scheduler_decision_duration_seconds_count", front_door="python") == decided + 1
    [[again]] = make_scheduler().select_destinations(req())
    assert again.claims_lost == 0 and _metric("billeting_scheduler_claims_lost_total") == lost + 1


def test_fall_backs_and_no_valid_host_reasons_are_counted(fleet, make_scheduler, engine, settings):
    fleet.host("a", memory_mb=32768)
    fleet.host("b", memory_mb=16384)
    fallbacks = _metric("billeting_scheduler_claim_fallbacks_total", kind="instances")
    make_scheduler(client=LosingTheBatch(engine, settings, fleet)).select_destinations(req(3))
    assert _metric("billeting_scheduler_claim_fallbacks_total", kind="instances") == fallbacks + 1

    none_offered = _metric("billeting_scheduler_no_valid_host_total", reason="no_candidates")
    with pytest.raises(NoValidHost):
        make_scheduler().select_destinations(req(flavor=Flavor(vcpus=64, memory_mb=1024, root_gb=1)))
    assert _metric("billeting_scheduler_no_valid_host_total", reason="no_candidates") == none_offered + 1
