"""Builds end to end in one process: the real scheduler claims, the cell
records and casts, fake computes build, the cell conductor walks the
alternates; deletes free what the instance held."""
from __future__ import annotations

import uuid as uuidlib

from billeting.cells import handoff, services
from billeting.cells import instances as inst
from billeting.cells.handoff import DeleteRoute
from billeting.cells.hosts import host_reports
from billeting.cells.messages import HostNode
from billeting.compute.fake import FakeConfig
from billeting.conductor.reschedule import EXHAUSTED
from billeting.placement_client.model import AllocationWrite, ProviderResources

from tests.cells.conftest import PROJECT, USER
from tests.support.wait import wait_for

# Sizes chosen so the RAM weigher ranks big > medium > little: the test knows
# which host is chosen and in which order the alternates come.
BIG = dict(vcpus=16, memory_mb=65536, disk_gb=500)
MEDIUM = dict(vcpus=16, memory_mb=32768, disk_gb=500)
LITTLE = dict(vcpus=16, memory_mb=16384, disk_gb=500)


def settled(deployment, uuid, cell="cell1"):
    """The record once the build left the building state."""
    engine = deployment.cells[cell].engine
    return wait_for(lambda: (r := inst.get(engine, uuid)) is not None and r.vm_state is not inst.VmState.BUILDING
                    and r, what=f"instance {uuid} to finish building")


def held(deployment, uuid):
    return deployment.placement.get_allocations(uuid).as_resources()


def test_a_build_lands_on_the_chosen_host_and_holds_its_claim(deployment):
    big = deployment.compute("big", config=FakeConfig(**BIG))
    deployment.compute("medium", config=FakeConfig(**MEDIUM))
    deployment.conductor()
    line = deployment.schedule(alternates=1)[0]
    assert [s.service_host for s in line] == ["big", "medium"]
    uuid = deployment.boot(selections=line)
    record = settled(deployment, uuid)
    assert (record.vm_state, record.task_state, record.host, record.num_attempts) == (
        inst.VmState.ACTIVE, None, "big", 1)
    assert record.hosts_tried == (HostNode("big", "big"),)
    assert held(deployment, uuid) == line[0].allocation_request.as_resources()
    assert big.driver.guests() == {uuid: "big"}
    report = host_reports(deployment.cells["cell1"].engine, cell="cell1")["big"]
    assert (report.num_instances, report.failed_builds, report.up, report.enabled) == (1, 0, True, True)


def test_a_failed_build_is_unclaimed_and_rescheduled_on_the_first_alternate(deployment):
    deployment.compute("big", config=FakeConfig(**BIG, failure_rate=1.0))
    medium = deployment.compute("medium", config=FakeConfig(**MEDIUM))
    deployment.compute("little", config=FakeConfig(**LITTLE))
    deployment.conductor()
    line = deployment.schedule()[0]
    assert [s.service_host for s in line] == ["big", "medium", "little"]
    uuid = deployment.boot(selections=line)
    record = settled(deployment, uuid)
    assert (record.vm_state, record.host, record.num_attempts) == (inst.VmState.ACTIVE, "medium", 2)
    assert [h.host for h in record.hosts_tried] == ["big", "medium"]
    assert "spawn of" in record.last_failure
    assert record.alternates == (line[2],)
    # Only the alternate's allocation: the failed host's was deleted first.
    assert held(deployment, uuid) == line[1].allocation_request.as_resources()
    assert medium.driver.guests() == {uuid: "medium"}
    reports = host_reports(deployment.cells["cell1"].engine, cell="cell1")
    assert (reports["big"].failed_builds, reports["medium"].failed_builds) == (1, 0)


def test_when_every_host_fails_the_instance_ends_in_error_with_the_exhausted_fault(deployment):
    for host, size in (("big", BIG), ("medium", MEDIUM), ("little", LITTLE)):
        deployment.compute(host, config=FakeConfig(**size, failure_rate=1.0))
    deployment.conductor()
    uuid = deployment.boot()
    record = settled(deployment, uuid)
    assert (record.vm_state, record.task_state, record.host, record.num_attempts) == (
        inst.VmState.ERROR, None, None, 3)
    fault = inst.latest_fault(deployment.cells["cell1"].engine, uuid)
    assert fault.message == EXHAUSTED
    assert "3 of max_attempts=3" in fault.details
    assert held(deployment, uuid) == {}


def test_an_alternate_that_no_longer_fits_is_skipped_without_counting_an_attempt(deployment):
    deployment.compute("big", config=FakeConfig(**BIG, failure_rate=1.0))
    deployment.compute("medium", config=FakeConfig(**MEDIUM))
    deployment.compute("little", config=FakeConfig(**LITTLE))
    deployment.conductor()
    line = deployment.schedule()[0]
    medium_rp = line[1].compute_node_uuid
    # Someone else takes all of medium's memory before the reschedule.
    filler = AllocationWrite(allocations={medium_rp: ProviderResources({"MEMORY_MB": 32768 - 512})},
                             project_id=PROJECT, user_id=USER, consumer_generation=None)
    assert deployment.placement.put_allocations(str(uuidlib.uuid4()), filler).ok
    uuid = deployment.boot(selections=line)
    record = settled(deployment, uuid)
    assert (record.vm_state, record.host, record.num_attempts) == (inst.VmState.ACTIVE, "little", 2)
    assert [h.host for h in record.hosts_tried] == ["big", "little"]
    assert held(deployment, uuid) == line[2].allocation_request.as_resources()


def test_without_retry_a_failed_build_goes_to_error_on_the_compute(deployment):
    deployment.compute("big", config=FakeConfig(**BIG, failure_rate=1.0))
    deployment.compute("medium", config=FakeConfig(**MEDIUM))
    deployment.conductor()
    uuid = deployment.boot(retry=False)
    record = settled(deployment, uuid)
    assert (record.vm_state, record.host, record.num_attempts) == (inst.VmState.ERROR, None, 1)
    fault = inst.latest_fault(deployment.cells["cell1"].engine, uuid)
    assert fault.message.startswith(f"Build of instance {uuid} failed") and fault.host == "big"
    wait_for(lambda: held(deployment, uuid) == {}, what="the compute to free the allocation after ERROR")


def _offloaded_again(deployment, uuid, *, fault_host=None):
    """An unshelve's build that failed for good: offloaded, nothing held, a fault."""
    engine = deployment.cells["cell1"].engine
    # (it passes through shelving_offloading while its claim is freed)
    record = wait_for(lambda: (r := inst.get(engine, uuid)).vm_state is not inst.VmState.BUILDING
                      and r.task_state is not inst.TaskState.SHELVING_OFFLOADING and r,
                      what=f"instance {uuid} to settle")
    assert (record.vm_state, record.task_state, record.host, record.node, record.selection) == (
        inst.VmState.SHELVED_OFFLOADED, None, None, None, None)
    assert held(deployment, uuid) == {}
    fault = inst.latest_fault(engine, uuid)
    assert fault.host == fault_host
    return fault


def test_when_every_host_fails_an_unshelve_goes_back_offloaded_with_the_exhausted_fault(deployment):
    for host, size in (("big", BIG), ("medium", MEDIUM), ("little", LITTLE)):
        deployment.compute(host, config=FakeConfig(**size, failure_rate=1.0))
    deployment.conductor()
    uuid = deployment.boot(unshelve=True)
    fault = _offloaded_again(deployment, uuid)
    assert fault.message == EXHAUSTED and "3 of max_attempts=3" in fault.details


def test_without_retry_a_failed_unshelve_goes_back_offloaded_on_the_compute(deployment):
    deployment.compute("big", config=FakeConfig(**BIG, failure_rate=1.0))
    deployment.compute("medium", config=FakeConfig(**MEDIUM))
    deployment.conductor()
    uuid = deployment.boot(retry=False, unshelve=True)
    fault = _offloaded_again(deployment, uuid, fault_host="big")
    assert fault.message.startswith(f"Build of instance {uuid} failed")


def test_an_aborted_build_is_not_rescheduled(deployment):
    deployment.compute("big", config=FakeConfig(**BIG, failure_rate=1.0, abort_builds=True))
    deployment.compute("medium", config=FakeConfig(**MEDIUM))
    deployment.conductor()
    uuid = deployment.boot()
    record = settled(deployment, uuid)
    assert (record.vm_state, record.num_attempts) == (inst.VmState.ERROR, 1)
    assert "BuildAborted" in inst.latest_fault(deployment.cells["cell1"].engine, uuid).details
    wait_for(lambda: held(deployment, uuid) == {}, what="the compute to free the allocation after ERROR")


def test_delete_through_the_compute_frees_the_guest_and_the_allocation(deployment):
    big = deployment.compute("big", config=FakeConfig(**BIG))
    deployment.conductor()
    uuid = deployment.boot()
    settled(deployment, uuid)
    wiring = deployment.cells["cell1"]
    assert handoff.request_delete(wiring.engine, wiring.bus, uuid) is DeleteRoute.COMPUTE
    record = wait_for(lambda: (r := inst.get(wiring.engine, uuid)).vm_state is inst.VmState.DELETED and r)
    assert record.deleted_at is not None
    assert held(deployment, uuid) == {} and big.driver.guests() == {}
    assert handoff.request_delete(wiring.engine, wiring.bus, uuid) is DeleteRoute.NOTHING


def test_delete_while_the_compute_is_down_is_done_by_the_cell_conductor(deployment):
    big = deployment.compute("big", config=FakeConfig(**BIG))
    deployment.conductor()
    uuid = deployment.boot()
    settled(deployment, uuid)
    deployment.computes["big"].stop()
    wiring = deployment.cells["cell1"]
    assert services.set_forced_down(wiring.engine, "big", True)
    assert handoff.request_delete(wiring.engine, wiring.bus, uuid) is DeleteRoute.CONDUCTOR
    wait_for(lambda: inst.get(wiring.engine, uuid).vm_state is inst.VmState.DELETED)
    assert held(deployment, uuid) == {}
    # The guest is still on the stopped compute; starting again removes it.
    assert big.driver.guests() == {uuid: "big"}
    assert services.set_forced_down(wiring.engine, "big", False)
    assert big.start().guests_destroyed == (uuid,)
    assert big.driver.guests() == {}


def test_a_delete_during_the_build_leaves_nothing_behind(deployment):
    slow = deployment.compute("big", config=FakeConfig(**BIG, build_time_s=1.0))
    deployment.conductor()
    uuid = deployment.boot()
    wiring = deployment.cells["cell1"]
    wait_for(lambda: inst.get(wiring.engine, uuid).task_state is inst.TaskState.SPAWNING)
    assert handoff.request_delete(wiring.engine, wiring.bus, uuid) is DeleteRoute.COMPUTE
    wait_for(lambda: inst.get(wiring.engine, uuid).vm_state is inst.VmState.DELETED)
    # The build finishes after the delete: it must not resurrect anything.
    wait_for(lambda: slow.builds_in_flight() == 0, what="the build to end")
    assert inst.get(wiring.engine, uuid).vm_state is inst.VmState.DELETED
    assert held(deployment, uuid) == {} and slow.driver.guests() == {}
