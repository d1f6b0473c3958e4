"""Sampling for server group requests: a group kept apart per rack is asked
for one small query per rack it needs, not for every candidate; the
unlimited query is only the last growth step."""
from __future__ import annotations

import msgspec
import pytest

from billeting.placement.candidates import engine as candidates_engine
from billeting.scheduler import NoValidHost, SchedulerSettings, ServerGroup
from billeting.scheduler import sample
from billeting.scheduler.nova import Flavor, request_from_nova
from tests.scheduler.fleet import memory_catalog, new_uuids
from tests.scheduler.test_sample import counting  # noqa: F401 - the fixture: every query's limit

SMALL = Flavor(vcpus=2, memory_mb=2048, root_gb=10)
RACKS, PER_RACK = 4, 5




@pytest.fixture
def racks(fleet):
    """Four racks of five hosts, registered rack by rack (so a limited scan's
    consecutive providers lie in one or two racks)."""
    for r in range(RACKS):
        names = [f"r{r}h{i}" for i in range(PER_RACK)]
        for name in names:
            fleet.host(name, vcpus=4)
        fleet.domain("rack", f"r{r}", names)
    return fleet


@pytest.fixture
def from_the_first_host(monkeypatch):
    """Placement's limited scans start at the lowest provider id (not at a
    random one), so which hosts each query returns is known."""
    monkeypatch.setattr(candidates_engine, "_scan_start", lambda world: max(world.min_provider_id - 1, 0))


def rack_of(name: str) -> str:
    return name.split("h")[0]


def group_request(n: int, **group):
    g = ServerGroup(uuid=str(new_uuids(1)[0]), policy="anti-affinity", scope="rack", **group)
    return request_from_nova(SMALL, instance_uuids=new_uuids(n), project_id="p", user_id="u", server_group=g)


def test_group_sizes_end_on_every_candidate():
    g = ServerGroup(uuid="g", policy="anti-affinity", scope="rack")
    assert sample.needs_every(g, 3) and not sample.needs_every(g, 1) and not sample.needs_every(None, 3)
    assert sample.needs_every(ServerGroup(uuid="h", policy="affinity"), 1)  # host scope
    assert sample.sizes("adaptive", fleet=5000, wanted=5, cap=50, every=True) == (13, 50, sample.EVERY)
    # where nothing is sampled ("all", or up to 100 hosts) a group asks for everything at once, as before
    assert sample.sizes("adaptive", fleet=50, wanted=5, cap=50, every=True) == (sample.EVERY,)
    assert sample.sizes("all", fleet=5000, wanted=5, cap=50, every=True) == (sample.EVERY,)
    assert sample.domains_needed(g, 3) == 3 and sample.domains_needed(g, 1) == 1
    assert sample.domains_needed(g, 3, alternates=2) == 5  # alternates lie where no sibling is
    assert sample.domains_needed(msgspec.structs.replace(g, max_server_per_host=2), 5) == 3
    assert sample.domains_needed(msgspec.structs.replace(g, policy="soft-anti-affinity"), 4) == 4
    assert sample.domains_needed(msgspec.structs.replace(g, policy="affinity"), 3) == 1
    assert sample.domains_needed(ServerGroup(uuid="h", policy="anti-affinity"), 3) == 1
    # host-scoped anti-affinity: room for the hosts the members may fill
    many = ServerGroup(uuid="m", policy="anti-affinity", members=tuple(new_uuids(6)), max_server_per_host=2)
    assert sample.group_wanted(many, 2) == 3 and sample.group_wanted(g, 2) == 0


def test_three_instances_apart_per_rack_get_three_racks_from_three_small_queries(
        racks, make_scheduler, counting, from_the_first_host):
    scheduler = make_scheduler(SchedulerSettings(candidate_sample="2"), client=counting)
    lines = scheduler.select_destinations(group_request(3))
    chosen = [racks.name_of(line[0].compute_node_uuid) for line in lines]
    assert len({rack_of(name) for name in chosen}) == 3 and all(line[0].claimed for line in lines)
    # a sample of 3 per query: rack r0's first hosts, then r1's (r0 left out), then r2's
    assert counting.limits == [3, 3, 3]


def test_from_random_starts_every_group_gets_its_racks_from_at_most_three_queries(racks, make_scheduler,
                                                                                    counting):
    scheduler = make_scheduler(SchedulerSettings(candidate_sample="2"), client=counting)
    for _ in range(5):  # 5 groups × 3 instances: 15 of the 20 hosts' 40 slots
        counting.limits.clear()
        lines = scheduler.select_destinations(group_request(3))
        assert len({rack_of(racks.name_of(line[0].compute_node_uuid)) for line in lines}) == 3
        assert 1 <= len(counting.limits) <= 3 and None not in counting.limits


def test_racks_only_the_whole_fleet_shows_are_found_by_the_last_unlimited_query(
        racks, make_scheduler, counting, from_the_first_host):
    # Racks r1-r3 have one enabled host each, their last (the scheduler's
    # records say so; Placement cannot tell): limited scans from the first
    # host see only disabled hosts there, so the sample grows to the cap (4)
    # and then to no limit.
    catalog = memory_catalog(racks)
    for rec in catalog.all():
        if not rec.name.startswith("r0") and not rec.name.endswith(f"h{PER_RACK - 1}"):
            catalog.put(msgspec.structs.replace(rec, enabled=False))
    scheduler = make_scheduler(SchedulerSettings(candidate_sample="2", max_placement_results=4), client=counting,
                               catalog=catalog)
    lines = scheduler.select_destinations(group_request(3))
    chosen = [racks.name_of(line[0].compute_node_uuid) for line in lines]
    assert len({rack_of(name) for name in chosen}) == 3
    assert [name for name in chosen if not name.startswith("r0")] and all(
        name.endswith(f"h{PER_RACK - 1}") for name in chosen if not name.startswith("r0"))
    assert counting.limits == [3, 3, 3, 4, 4, 4, None]


def test_too_few_racks_end_in_no_valid_host_after_every_candidate_and_leave_nothing_claimed(
        fleet, make_scheduler, counting):
    for r in range(2):
        names = [f"r{r}h{i}" for i in range(PER_RACK)]
        for name in names:
            fleet.host(name, vcpus=4)
        fleet.domain("rack", f"r{r}", names)
    # samples of 3, then 4 (the cap), then no limit: each of the limited
    # answers was cut short, so only the whole fleet can tell
    scheduler = make_scheduler(SchedulerSettings(candidate_sample="2", max_placement_results=4),
                               client=counting)
    with pytest.raises(NoValidHost) as failed:
        scheduler.select_destinations(group_request(3))
    grown = counting.limits[:counting.limits.index(None) + 1]
    assert [n for n in grown if n is not None] and set(grown[:-1]) <= {3, 4} and len(grown) <= 3 + 3 + 1
    assert "anti-affinity" in str(failed.value)
    assert all(fleet.usage(name).get("VCPU", 0) == 0 for name in fleet.hosts)


def test_a_full_fleet_ends_in_no_valid_host_after_one_query(racks, make_scheduler, counting):
    scheduler = make_scheduler(SchedulerSettings(candidate_sample="2"))
    for _ in range(RACKS * PER_RACK * 2 // 4):  # 40 slots of 2 VCPU, 4 instances a request
        scheduler.select_destinations(request_from_nova(SMALL, instance_uuids=new_uuids(4), project_id="p",
                                                        user_id="u"))
    scheduler = make_scheduler(SchedulerSettings(candidate_sample="2"), client=counting)
    with pytest.raises(NoValidHost):
        scheduler.select_destinations(group_request(3))
    assert counting.limits == [3]  # Placement's answer was empty, so complete: nothing to grow


def test_alternates_come_from_a_rack_no_sibling_holds(racks, make_scheduler, counting, from_the_first_host):
    scheduler = make_scheduler(SchedulerSettings(candidate_sample="2"), client=counting)
    lines = scheduler.select_destinations(group_request(3), alternates=1)
    chosen = {rack_of(racks.name_of(line[0].compute_node_uuid)) for line in lines}
    assert len(chosen) == 3 and all(len(line) == 2 for line in lines)
    assert all(rack_of(racks.name_of(line[1].compute_node_uuid)) not in chosen for line in lines)
    assert counting.limits == [4, 4, 4, 4]  # a sample of 4 (3 instances + 1 alternate) from each of 4 racks
