"""The scheduler over kombu: calls, typed failures, and several servers on
one queue, on the memory transport and on RabbitMQ."""
from __future__ import annotations

import pytest

from billeting.messaging import Bus
from billeting.placement_client.model import RequestGroup
from billeting.scheduler import InvalidRequest, NoValidHost, ScheduleRequest
from billeting.scheduler.rpc import SchedulerClient, serve
from billeting.scheduler.service import groups
from tests.scheduler.service.conftest import new_uuid


def _request(*instances, vcpu=1) -> ScheduleRequest:
    return ScheduleRequest(instance_uuids=instances or (new_uuid(),), project_id="p", user_id="u",
                           groups=(RequestGroup(resources={"VCPU": vcpu, "MEMORY_MB": 256}),))


@pytest.fixture
def rpc(bus_url, service):
    made = []

    def bus():
        b = Bus(bus_url)
        made.append(b)
        return b

    serve(bus(), service, threads=2)
    serve(bus(), service, threads=2)  # a second server on the same queue
    yield SchedulerClient(bus())
    for b in made:
        b.close()


def test_select_destinations_over_the_bus(rpc, fleet, placement):
    fleet.add("h1", vcpu=8)
    fleet.add("h2", vcpu=8)
    instances = [new_uuid() for _ in range(6)]
    for inst in instances:
        (line,) = rpc.select_destinations(_request(inst), alternates=1, timeout=30)
        assert line[0].claimed and line[0].consumer_uuid == inst and len(line) == 2
        assert placement.get_allocations(inst).allocations
    assert rpc.dry_run(_request(), timeout=30)[0].host in ("h1", "h2")


def test_failures_come_back_typed(rpc, fleet):
    fleet.add("h1", vcpu=2)
    with pytest.raises(NoValidHost) as nvh:
        rpc.select_destinations(_request(vcpu=16), timeout=30)
    assert nvh.value.explanation.hosts_total == 1 and "16 vCPUs" in nvh.value.explanation.message
    with pytest.raises(InvalidRequest, match="distinct"):
        inst = new_uuid()
        rpc.select_destinations(_request(inst, inst), timeout=30)


def test_a_stored_group_is_loaded_and_its_members_recorded(rpc, fleet, service):
    fleet.add("h1", vcpu=8)
    fleet.add("h2", vcpu=8)
    group = groups.create(service, groups.GroupSpec(name="g", policy="anti-affinity", project_id="p",
                                                    user_id="u"))
    a, b = new_uuid(), new_uuid()
    (first,) = rpc.select_destinations(_request(a), group=group.uuid, timeout=30)
    (second,) = rpc.select_destinations(_request(b), group=group.uuid, timeout=30)
    assert first[0].nodename != second[0].nodename
    assert set(groups.get(service, group.uuid).members) == {a, b}
    with pytest.raises(NoValidHost):
        rpc.select_destinations(_request(), group=group.uuid, timeout=30)
