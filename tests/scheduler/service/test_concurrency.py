"""What concurrency must not break: Placement aggregate updates that race
another writer, and concurrent requests of one server group."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from billeting.placement_client.inprocess import InProcessPlacementClient
from billeting.scheduler.service import groups, sync, topology
from billeting.scheduler.service.runtime import SchedulerService
from billeting.scheduler.settings import SchedulerSettings
from tests.scheduler.service.conftest import Fleet, new_uuid


class _Interfering(InProcessPlacementClient):
    """After each of its first ``times`` reads of a provider's aggregates,
    another writer adds an aggregate of its own (bumping the generation)."""

    def __init__(self, engine, settings, times: int) -> None:
        super().__init__(engine, settings)
        self.times = times
        self.foreign: list[str] = []

    def get_aggregates(self, provider_uuid):
        seen = super().get_aggregates(provider_uuid)
        if self.times > 0:
            self.times -= 1
            other = new_uuid()
            self.foreign.append(other)
            assert super().put_aggregates(provider_uuid, [*seen.aggregates, other],
                                          seen.resource_provider_generation).ok
        return seen


def test_generation_conflicts_are_retried_and_foreign_aggregates_kept(engine, settings, apidb):
    client = _Interfering(engine, settings, times=0)
    fleet = Fleet(client)
    fleet.add("h1")
    service = SchedulerService(client, apidb, SchedulerSettings())
    client.times = 2
    view, _ = topology.define(service, "rack", "r1", hosts=["h1"])
    assert len(client.foreign) == 2
    assert fleet.aggregates("h1") == {view.aggregate, *client.foreign}
    report = sync.converge(client, {view.aggregate: set()})
    assert report.changed and fleet.aggregates("h1") == set(client.foreign)


def test_concurrent_requests_of_one_anti_affinity_group_never_share_a_host(service, fleet):
    for i in range(6):
        fleet.add(f"h{i}", vcpu=16)
    group = groups.create(service, groups.GroupSpec(name="g", policy="anti-affinity", project_id="p", user_id="u"))
    from billeting.placement_client.model import RequestGroup
    from billeting.scheduler import NoValidHost, ScheduleRequest

    def one(_):
        request = ScheduleRequest(instance_uuids=(new_uuid(),), project_id="p", user_id="u",
                                  groups=(RequestGroup(resources={"VCPU": 1}),))
        try:
            return service.select(request, group=group.uuid)[0][0].nodename
        except NoValidHost:
            return None

    with ThreadPoolExecutor(8) as pool:
        landed = list(pool.map(one, range(8)))
    hosts = [h for h in landed if h is not None]
    assert sorted(hosts) == [f"h{i}" for i in range(6)] and landed.count(None) == 2
    assert len(groups.get(service, group.uuid).members) == 6
