"""The sample stage: a decision asks Placement for a few candidates first and
for more only when the filters leave too few; claims stay exact."""
from __future__ import annotations

import threading

import msgspec
import pytest

from billeting.placement_client.inprocess import InProcessPlacementClient
from billeting.scheduler import NoValidHost, SchedulerSettings
from billeting.scheduler import sample
from billeting.scheduler.nova import Flavor, request_from_nova
from tests.scheduler.fleet import memory_catalog, new_uuids

SMALL = Flavor(vcpus=2, memory_mb=2048, root_gb=10)


def req(n=1):
    return request_from_nova(SMALL, instance_uuids=new_uuids(n), project_id="proj", user_id="user")


class CountingClient(InProcessPlacementClient):
    """Records the limit of every candidates query."""

    def __init__(self, engine, settings):
        super().__init__(engine, settings)
        self.limits: list[int | None] = []

    def allocation_candidates(self, query):
        self.limits.append(query.limit)
        return super().allocation_candidates(query)


@pytest.fixture
def counting(engine, settings):
    return CountingClient(engine, settings)


def test_sizes_start_small_grow_eightfold_and_end_at_the_cap():
    assert sample.sizes("adaptive", fleet=5000, wanted=3, cap=1000) == (13, 104, 832, 1000)
    assert sample.sizes("adaptive", fleet=100_000, wanted=3, cap=1000) == (17, 136, 1000)
    # a request for many instances starts with room for twice as many hosts
    assert sample.sizes("adaptive", fleet=5000, wanted=52, cap=1000) == (104, 832, 1000)
    assert sample.sizes("adaptive", fleet=5000, wanted=1, cap=1000)[0] == 13
    assert sample.sizes("adaptive", fleet=200, wanted=1, cap=1000)[0] == sample.MIN_SAMPLE
    # small fleets, "all", and a cap below the first size: one query of the cap
    assert sample.sizes("adaptive", fleet=100, wanted=3, cap=1000) == (1000,)
    assert sample.sizes("all", fleet=5000, wanted=3, cap=1000) == (1000,)
    assert sample.sizes("adaptive", fleet=5000, wanted=3, cap=10) == (10,)
    assert sample.sizes("4", fleet=10, wanted=3, cap=1000) == (4, 32, 256, 1000)
    assert sample.sizes("4", fleet=10, wanted=6, cap=1000) == (6, 48, 384, 1000)


@pytest.mark.parametrize("bad", ["", "some", "0", "-3", "1.5"])
def test_a_bad_setting_is_refused(bad):
    with pytest.raises(ValueError, match="candidate_sample"):
        SchedulerSettings(candidate_sample=bad).check()


def test_a_sample_that_fits_costs_one_small_query(fleet, make_scheduler, counting):
    for i in range(12):
        fleet.host(f"h{i}")
    scheduler = make_scheduler(SchedulerSettings(candidate_sample="3"), client=counting)
    [[chosen, *alternates]] = scheduler.select_destinations(req(), alternates=2)
    assert counting.limits == [3]
    assert chosen.claimed and len(alternates) == 2


def test_filters_that_leave_too_few_hosts_grow_the_sample(fleet, make_scheduler, counting):
    # Only the last host is enabled, which Placement cannot see: samples of
    # 2 and 16 hosts may miss it, the full answer cannot.
    for i in range(40):
        fleet.host(f"h{i:02d}")
    catalog = memory_catalog(fleet)
    for rec in catalog.all():
        if rec.name != "h39":
            catalog.put(msgspec.structs.replace(rec, enabled=False))
    scheduler = make_scheduler(SchedulerSettings(candidate_sample="2"), client=counting, catalog=catalog)
    for _ in range(3):
        counting.limits.clear()
        [[chosen]] = scheduler.select_destinations(req())
        assert chosen.nodename == "h39" and chosen.claimed
        assert counting.limits[0] == 2 and counting.limits == [2, 16, 128, 1000][:len(counting.limits)]
        assert fleet.usage("h39")["VCPU"] >= 2


def test_no_valid_host_only_after_the_full_answer_and_nothing_left_claimed(fleet, make_scheduler, counting):
    for i in range(20):
        fleet.host(f"h{i:02d}")
    catalog = memory_catalog(fleet)
    for rec in catalog.all():
        catalog.put(msgspec.structs.replace(rec, enabled=False))
    scheduler = make_scheduler(SchedulerSettings(candidate_sample="2"), client=counting, catalog=catalog)
    with pytest.raises(NoValidHost) as caught:
        scheduler.select_destinations(req(3))
    # 3 instances: a sample of at least 3; then 24, which held all 20 hosts
    # (the answer was complete: no larger sample is asked for)
    assert counting.limits[:2] == [3, 24] and 192 not in counting.limits
    assert "20" in caught.value.explanation.message
    assert all(fleet.usage(f"h{i:02d}").get("VCPU", 0) == 0 for i in range(20))


def test_a_full_placement_answer_is_not_asked_again(fleet, make_scheduler, counting):
    # Two hosts with room for one instance each; the third request finds
    # fewer candidates than its limit: the answer was complete, no growth.
    fleet.host("a", vcpus=2)
    fleet.host("b", vcpus=2)
    scheduler = make_scheduler(SchedulerSettings(candidate_sample="8"), client=counting)
    scheduler.select_destinations(req())
    scheduler.select_destinations(req())
    counting.limits.clear()
    with pytest.raises(NoValidHost):
        scheduler.select_destinations(req())
    assert counting.limits[0] == 8 and 64 not in counting.limits


def test_many_instances_on_a_small_sample_all_or_nothing(fleet, make_scheduler, counting):
    # Each host takes 2 instances. 6 instances fit the first sample (6
    # hosts); 50 need more than one sample; 5 when 4 slots are left fail
    # at the cap and leave nothing behind.
    for i in range(30):
        fleet.host(f"h{i:02d}", vcpus=4)
    scheduler = make_scheduler(SchedulerSettings(candidate_sample="3"), client=counting)
    lines = scheduler.select_destinations(req(6))
    assert len(lines) == 6 and all(line[0].claimed for line in lines)
    used = sum(fleet.usage(f"h{i:02d}").get("VCPU", 0) for i in range(30))
    assert used == 12
    request = req(50)  # 30 hosts × 2 = 60 slots, 6 taken: 54 left
    lines = scheduler.select_destinations(request)
    assert len({line[0].consumer_uuid for line in lines}) == 50
    assert sum(fleet.usage(f"h{i:02d}").get("VCPU", 0) for i in range(30)) == 112
    with pytest.raises(NoValidHost):
        scheduler.select_destinations(req(5))  # 4 slots left: all or nothing
    assert sum(fleet.usage(f"h{i:02d}").get("VCPU", 0) for i in range(30)) == 112


def test_racing_schedulers_on_samples_never_overcommit(fleet, make_scheduler, engine, settings):
    # 12 slots (6 hosts × 2), 4 schedulers each with its own view and a
    # sample of 2, 20 requests: exactly 12 placed, no host over its VCPU.
    for i in range(6):
        fleet.host(f"h{i}", vcpus=4)
    schedulers = [make_scheduler(SchedulerSettings(candidate_sample="2"),
                                 client=InProcessPlacementClient(engine, settings), seed=s) for s in range(4)]
    placed, refused = [], []
    lock = threading.Lock()
    start = threading.Barrier(4)

    def run(scheduler):
        start.wait()
        for _ in range(5):
            try:
                [[chosen, *_]] = scheduler.select_destinations(req(), alternates=1)
                with lock:
                    placed.append(chosen.nodename)
            except NoValidHost:
                with lock:
                    refused.append(1)

    threads = [threading.Thread(target=run, args=(s,)) for s in schedulers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(placed) == 12 and len(refused) == 8
    assert all(fleet.usage(f"h{i}")["VCPU"] == 4 for i in range(6))
