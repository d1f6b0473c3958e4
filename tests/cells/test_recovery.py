"""Crash safety, one crash point at a time: each test leaves the cell
database and Placement exactly as a process killed at that point would,
then lets the survivors (a restarted compute, the conductor's sweep, a
redelivered message) finish the build truthfully — active on another host,
or ERROR with a fault — and checks no allocation is doubled or left."""
from __future__ import annotations

import uuid as uuidlib

from billeting.cells import handoff, services
from billeting.cells import instances as inst
from billeting.cells.messages import (
    BuildInstance,
    HostNode,
    InstanceSpec,
    RequestSummary,
    RescheduleBuild,
)
from billeting.compute.fake import FakeConfig
from billeting.conductor.cell import ConductorSettings
from billeting.placement_client import claims

from tests.cells.conftest import PROJECT, SMALL, USER
from tests.support.wait import wait_for

BIG = dict(vcpus=16, memory_mb=65536, disk_gb=500)
MEDIUM = dict(vcpus=16, memory_mb=32768, disk_gb=500)
LITTLE = dict(vcpus=16, memory_mb=16384, disk_gb=500)
# Sweep at once: every state counts as overdue.
EAGER = ConductorSettings(cast_timeout_s=0, reschedule_timeout_s=0, delete_timeout_s=0)


def three_hosts(deployment, *, big=None):
    deployment.compute("big", config=big or FakeConfig(**BIG))
    deployment.compute("medium", config=FakeConfig(**MEDIUM))
    deployment.compute("little", config=FakeConfig(**LITTLE))


def active(deployment, uuid):
    engine = deployment.cells["cell1"].engine
    return wait_for(lambda: (r := inst.get(engine, uuid)).vm_state is inst.VmState.ACTIVE and r,
                    what=f"{uuid} to become active")


def held(deployment, uuid):
    return deployment.placement.get_allocations(uuid).as_resources()


def test_a_compute_restarted_mid_build_reschedules_the_interrupted_build(deployment):
    three_hosts(deployment, big=FakeConfig(**BIG, build_time_s=60))
    deployment.conductor()
    line = deployment.schedule()[0]
    uuid = deployment.boot(selections=line)
    engine = deployment.cells["cell1"].engine
    wait_for(lambda: inst.get(engine, uuid).task_state is inst.TaskState.SPAWNING)
    big = deployment.computes["big"].manager("big")
    big.stop()  # the build is abandoned where it stands, as in a crash
    assert inst.get(engine, uuid).task_state is inst.TaskState.SPAWNING
    recovery = big.start()
    assert recovery.rescheduled == (uuid,)
    record = active(deployment, uuid)
    assert (record.host, record.num_attempts) == ("medium", 2)
    assert "stopped during the build" in record.last_failure
    assert held(deployment, uuid) == line[1].allocation_request.as_resources()


def _counted(name: str, **labels) -> float:
    from prometheus_client import REGISTRY

    return REGISTRY.get_sample_value(f"billeting_conductor_{name}_total", labels) or 0.0


def test_a_compute_that_stays_down_mid_build_is_swept_to_the_next_host(deployment):
    three_hosts(deployment, big=FakeConfig(**BIG, build_time_s=60))
    conductor = deployment.conductor(settings=EAGER)
    line = deployment.schedule()[0]
    uuid = deployment.boot(selections=line)
    engine = deployment.cells["cell1"].engine
    wait_for(lambda: inst.get(engine, uuid).task_state is inst.TaskState.SPAWNING)
    assert conductor.sweep().failed_attempts == ()  # big is up: a long build is not a failure
    deployment.computes["big"].stop()
    services.set_forced_down(engine, "big", True)  # its heartbeat has stopped
    failures, cast = _counted("build_failures", cell="cell1"), _counted("reschedules", cell="cell1", result="cast")
    assert conductor.sweep().failed_attempts == (uuid,)
    # The operator sees it: one lost attempt and one reschedule in cell1.
    assert _counted("build_failures", cell="cell1") == failures + 1
    assert _counted("reschedules", cell="cell1", result="cast") == cast + 1
    record = active(deployment, uuid)
    assert (record.host, record.num_attempts) == ("medium", 2)
    assert "went down during the build" in record.last_failure
    assert held(deployment, uuid) == line[1].allocation_request.as_resources()
    assert services.node(engine, line[0].compute_node_uuid).failed_builds == 1


def test_a_build_recorded_but_never_cast_is_cast_again(deployment):
    three_hosts(deployment)
    conductor = deployment.conductor(settings=EAGER)
    line = deployment.schedule()[0]
    deployment.record_only(line)
    uuid = line[0].consumer_uuid
    assert conductor.sweep().recast == (uuid,)
    record = active(deployment, uuid)
    assert (record.host, record.num_attempts) == ("big", 1)
    assert held(deployment, uuid) == line[0].allocation_request.as_resources()


def _scheduled_onto_a_down_big(deployment):
    """Three hosts, an eager conductor, a line whose chosen host ``big`` has
    then stopped and been forced down: (conductor, line, cell1's engine)."""
    three_hosts(deployment)
    conductor = deployment.conductor(settings=EAGER)
    line = deployment.schedule()[0]
    deployment.computes["big"].stop()
    engine = deployment.cells["cell1"].engine
    services.set_forced_down(engine, "big", True)
    return conductor, line, engine


def test_a_build_cast_to_a_compute_that_is_down_goes_to_the_next_host(deployment):
    conductor, line, engine = _scheduled_onto_a_down_big(deployment)
    uuid = deployment.boot(selections=line)
    assert conductor.sweep().failed_attempts == (uuid,)
    record = active(deployment, uuid)
    assert (record.host, record.num_attempts) == ("medium", 2)
    # big comes back and finds the old cast in its queue: it is dropped.
    services.set_forced_down(engine, "big", False)
    deployment.computes["big"].manager("big").start()
    wait_for(lambda: deployment.computes["big"].manager("big").builds_in_flight() == 0)
    assert deployment.computes["big"].manager("big").driver.guests() == {}
    assert held(deployment, uuid) == line[1].allocation_request.as_resources()


def test_a_compute_killed_before_unclaiming_leaves_an_allocation_the_conductor_deletes(deployment):
    three_hosts(deployment)
    conductor = deployment.conductor(settings=EAGER)
    line = deployment.schedule()[0]
    deployment.record_only(line)
    uuid = line[0].consumer_uuid
    engine = deployment.cells["cell1"].engine
    assert inst.start_spawn(engine, uuid, host="big", attempt=1)
    assert inst.begin_reschedule(engine, uuid, host="big", attempt=1, reason="BuildFailed: boom")
    # ... killed here: the failed host's allocation is still held, no cast was sent.
    assert conductor.sweep().rescheduled == (uuid,)
    record = active(deployment, uuid)
    assert (record.host, record.num_attempts) == ("medium", 2)
    assert held(deployment, uuid) == line[1].allocation_request.as_resources()


def test_a_conductor_killed_after_claiming_leaves_a_claim_the_next_one_adopts(deployment):
    three_hosts(deployment)
    conductor = deployment.conductor(settings=EAGER)
    line = deployment.schedule()[0]
    deployment.record_only(line)
    uuid = line[0].consumer_uuid
    engine = deployment.cells["cell1"].engine
    assert inst.start_spawn(engine, uuid, host="big", attempt=1)
    assert inst.begin_reschedule(engine, uuid, host="big", attempt=1, reason="BuildFailed: boom")
    claims.unclaim(deployment.placement, uuid)
    # A conductor claimed the first alternate, then died before recording it.
    assert claims.claim(deployment.placement, uuid, line[1].allocation_request, project_id=PROJECT,
                        user_id=USER).ok
    outcome = conductor.build_instances(RescheduleBuild(
        instance_uuid=uuid, attempt=1, failed=HostNode("big", "big"), reason="BuildFailed: boom",
        alternates=tuple(line[1:])))  # the redelivered message
    assert (outcome.result, outcome.host, outcome.refused) == ("cast", "medium", 0)
    record = active(deployment, uuid)
    assert (record.host, record.num_attempts, record.alternates) == ("medium", 2, (line[2],))
    assert held(deployment, uuid) == line[1].allocation_request.as_resources()


def test_a_conductor_killed_after_recording_the_next_host_is_recovered_by_a_recast(deployment):
    three_hosts(deployment)
    conductor = deployment.conductor(settings=EAGER)
    line = deployment.schedule()[0]
    deployment.record_only(line)
    uuid = line[0].consumer_uuid
    engine = deployment.cells["cell1"].engine
    assert inst.start_spawn(engine, uuid, host="big", attempt=1)
    assert inst.begin_reschedule(engine, uuid, host="big", attempt=1, reason="BuildFailed: boom")
    claims.unclaim(deployment.placement, uuid)
    assert claims.claim(deployment.placement, uuid, line[1].allocation_request, project_id=PROJECT,
                        user_id=USER).ok
    record = inst.get(engine, uuid)
    assert inst.advance(engine, uuid, attempt=1, selection=line[1], remaining=(line[2],),
                        hosts_tried=record.hosts_tried)
    # ... killed before the cast.
    assert conductor.sweep().recast == (uuid,)
    record = active(deployment, uuid)
    assert (record.host, record.num_attempts) == ("medium", 2)


def test_a_repeated_reschedule_message_is_dropped(deployment):
    three_hosts(deployment, big=FakeConfig(**BIG, failure_rate=1.0))
    conductor = deployment.conductor()
    line = deployment.schedule()[0]
    uuid = deployment.boot(selections=line)
    active(deployment, uuid)
    again = conductor.build_instances(RescheduleBuild(
        instance_uuid=uuid, attempt=1, failed=HostNode("big", "big"), reason="BuildFailed: boom",
        alternates=tuple(line[1:])))
    assert again.result == "stale"
    assert held(deployment, uuid) == line[1].allocation_request.as_resources()


def test_a_repeated_build_cast_builds_once(deployment):
    three_hosts(deployment)
    deployment.conductor()
    line = deployment.schedule()[0]
    build = deployment.record_only(line)
    big = deployment.computes["big"].manager("big")
    big.computes.build_and_run_instance("big", build)
    big.computes.build_and_run_instance("big", build)
    active(deployment, build.instance.uuid)
    wait_for(lambda: big.builds_in_flight() == 0)
    assert big.driver.guests() == {build.instance.uuid: "big"}
    assert services.node(deployment.cells["cell1"].engine, line[0].compute_node_uuid).failed_builds == 0


def test_a_delete_left_half_done_on_a_dead_compute_is_finished_by_the_sweep(deployment):
    three_hosts(deployment)
    conductor = deployment.conductor(settings=EAGER)
    uuid = deployment.boot()
    active(deployment, uuid)
    engine = deployment.cells["cell1"].engine
    deployment.computes["big"].stop()
    services.set_forced_down(engine, "big", True)
    assert inst.begin_delete(engine, uuid) is not None  # the API marked it, then died
    assert conductor.sweep().deleted == (uuid,)
    assert inst.get(engine, uuid).vm_state is inst.VmState.DELETED
    assert held(deployment, uuid) == {}


def test_an_interrupted_build_without_retry_ends_in_error_with_a_fault(deployment):
    three_hosts(deployment, big=FakeConfig(**BIG, build_time_s=60))
    deployment.conductor()
    uuid = deployment.boot(retry=False)
    engine = deployment.cells["cell1"].engine
    wait_for(lambda: inst.get(engine, uuid).task_state is inst.TaskState.SPAWNING)
    big = deployment.computes["big"].manager("big")
    big.stop()
    assert big.start().failed == (uuid,)
    record = inst.get(engine, uuid)
    assert (record.vm_state, record.host) == (inst.VmState.ERROR, None)
    assert "stopped during the build" in inst.latest_fault(engine, uuid).details
    assert held(deployment, uuid) == {}


def test_an_unshelve_cast_to_a_compute_that_is_down_without_retry_goes_back_offloaded(deployment):
    """The sweep ends the lost attempt as the compute would have: an
    unshelve's build goes back to SHELVED_OFFLOADED, its claim freed."""
    conductor, line, engine = _scheduled_onto_a_down_big(deployment)
    uuid = deployment.boot(selections=line, retry=False, unshelve=True)
    assert held(deployment, uuid) == line[0].allocation_request.as_resources()
    assert conductor.sweep().failed_attempts == (uuid,)
    record = inst.get(engine, uuid)
    assert (record.vm_state, record.task_state, record.host) == (inst.VmState.SHELVED_OFFLOADED, None, None)
    assert "never took the build" in inst.latest_fault(engine, uuid).details
    assert held(deployment, uuid) == {}


def test_a_build_for_an_instance_the_cell_does_not_know_frees_its_claim(deployment):
    three_hosts(deployment)
    line = deployment.schedule()[0]
    uuid = line[0].consumer_uuid
    build = BuildInstance(instance=InstanceSpec(uuid=uuid, flavor=SMALL),
                          request=RequestSummary(project_id=PROJECT, user_id=USER), selection=line[0],
                          alternates=(), attempt=1)
    deployment.computes["big"].manager("big").build_and_run_instance(build)
    assert held(deployment, uuid) == {}
    assert handoff.request_delete(deployment.cells["cell1"].engine, deployment.cells["cell1"].bus,
                                  str(uuidlib.uuid4())) is handoff.DeleteRoute.NOTHING
