"""The allocation audit: orphans are found and removed, allocations in use
are never touched, unknown consumers only after a grace period."""
from __future__ import annotations

import uuid as uuidlib

import pytest

from billeting.cells import audit, moves
from billeting.cells import instances as inst
from billeting.compute.driver import node_uuid
from billeting.compute.fake import FakeConfig
from billeting.compute.settings import ComputeSettings
from billeting.placement_client.model import AllocationWrite, ProviderResources

from tests.cells.conftest import PROJECT, SMALL, USER
from tests.support.wait import wait_for


def allocate(placement, consumer, rp, resources):
    write = AllocationWrite(allocations={rp: ProviderResources(resources)}, project_id=PROJECT, user_id=USER,
                            consumer_generation=None)
    assert placement.put_allocations(consumer, write).ok


def add_migration(engine, uuid, status):
    moves.create(engine, uuid=uuid, instance_uuid=str(uuidlib.uuid4()), migration_type="migration",
                 source_compute="h1", source_node="h1", status=status)


def test_the_compute_audit_removes_orphans_and_keeps_what_is_in_use(deployment):
    compute = deployment.compute("h1", config=FakeConfig(vcpus=64, memory_mb=65536, disk_gb=500),
                                 settings=ComputeSettings(orphan_grace_s=3600))
    deployment.conductor()
    engine = deployment.cells["cell1"].engine
    rp = node_uuid("h1")
    live = deployment.boot()
    doomed = deployment.boot()
    wait_for(lambda: all(inst.get(engine, u).vm_state is inst.VmState.ACTIVE for u in (live, doomed)))
    # A delete that marked the record but died before freeing the allocation.
    assert inst.begin_delete(engine, doomed) and inst.finish_delete(engine, doomed)
    moving, moved, stranger = (str(uuidlib.uuid4()) for _ in range(3))
    add_migration(engine, moving, "migrating")
    add_migration(engine, moved, "confirmed")
    for consumer in (moving, moved, stranger):
        allocate(deployment.placement, consumer, rp, {"VCPU": 1})

    report = compute.audit_allocations()
    verdicts = {f.consumer_uuid: (f.verdict, f.removed) for f in report.findings}
    assert verdicts == {doomed: (audit.Verdict.DELETED_INSTANCE, True),
                        moved: (audit.Verdict.FINISHED_MIGRATION, True),
                        stranger: (audit.Verdict.UNKNOWN, False)}
    assert report.consumers == 5
    held = set(deployment.placement.provider_allocations(rp).allocations)
    assert held == {live, moving, stranger}


def test_an_unknown_consumer_is_removed_once_its_grace_period_is_over(deployment):
    compute = deployment.compute("h1", settings=ComputeSettings(orphan_grace_s=0))
    stranger = str(uuidlib.uuid4())
    allocate(deployment.placement, stranger, node_uuid("h1"), {"MEMORY_MB": 128})
    report = compute.audit_allocations()
    assert [(f.consumer_uuid, f.verdict, f.removed) for f in report.findings] == [
        (stranger, audit.Verdict.UNKNOWN, True)]
    assert deployment.placement.get_allocations(stranger).allocations == {}


def test_a_failed_build_that_still_holds_an_allocation_is_an_orphan(deployment):
    deployment.compute("h1")
    engine = deployment.cells["cell1"].engine
    line = deployment.schedule(alternates=0)[0]
    uuid = line[0].consumer_uuid
    deployment.record_only(line)
    assert inst.start_spawn(engine, uuid, host="h1", attempt=1)
    # ERROR was recorded, then the process died before un-claiming.
    assert inst.fail_build(engine, uuid, attempt=1, from_states=(inst.TaskState.SPAWNING,),
                           fault=inst.Fault(code=500, message="boom"), host="h1")
    report = audit.audit(deployment.placement, [node_uuid("h1")], {"cell1": engine})
    assert [(f.verdict, f.removed) for f in report.findings] == [(audit.Verdict.FAILED_BUILD, True)]
    assert deployment.placement.get_allocations(uuid).allocations == {}


def test_dry_run_reports_without_removing(deployment):
    deployment.compute("h1")
    engine = deployment.cells["cell1"].engine
    stranger = str(uuidlib.uuid4())
    allocate(deployment.placement, stranger, node_uuid("h1"), {"VCPU": 1})
    report = audit.audit(deployment.placement, [node_uuid("h1")], {"cell1": engine}, remove=False,
                         remove_unknown=True)
    assert [(f.verdict, f.removed) for f in report.findings] == [(audit.Verdict.UNKNOWN, False)]
    assert deployment.placement.get_allocations(stranger).allocations != {}


def test_migration_records_change_status_by_compare_and_set(deployment):
    engine = deployment.cell("cell1").engine
    uuid, instance = str(uuidlib.uuid4()), str(uuidlib.uuid4())
    record = moves.create(engine, uuid=uuid, instance_uuid=instance, migration_type="resize",
                          source_compute="h1", source_node="h1", old_flavor=SMALL)
    assert (record.status, record.old_flavor, record.new_flavor) == ("pre-migrating", SMALL, None)
    with pytest.raises(moves.MigrationExists):
        moves.create(engine, uuid=uuid, instance_uuid=instance, migration_type="resize", source_compute="h1",
                     source_node="h1")
    assert moves.set_status(engine, uuid, "migrating", expect="pre-migrating", dest_compute="h2", dest_node="h2")
    assert not moves.set_status(engine, uuid, "error", expect="pre-migrating")
    assert [(m.status, m.dest_compute) for m in moves.for_instance(engine, instance)] == [("migrating", "h2")]
    assert audit.classify([uuid], {"cell1": engine})[uuid] == (audit.Verdict.IN_USE, "cell1")
    assert moves.set_status(engine, uuid, "confirmed")
    assert audit.classify([uuid], {"cell1": engine})[uuid] == (audit.Verdict.FINISHED_MIGRATION, "cell1")


def test_an_offloaded_server_holding_an_allocation_is_an_orphan_but_not_while_it_unshelves(deployment):
    from billeting.cells import lifecycle_states as states

    deployment.compute("h1")
    engine = deployment.cells["cell1"].engine
    line = deployment.schedule(alternates=0)[0]
    uuid = line[0].consumer_uuid
    deployment.record_only(line)
    assert inst.start_spawn(engine, uuid, host="h1", attempt=1)
    assert inst.finish_spawn(engine, uuid, host="h1", attempt=1)
    assert states.shelve(engine, uuid) and states.begin_offload(engine, uuid)
    # The offload left its host, then the process died before the allocation was freed.
    assert states.finish_offload(engine, uuid)
    assert states.begin_unshelve(engine, uuid)  # (claimed for a new host: in use)
    assert audit.audit(deployment.placement, [node_uuid("h1")], {"cell1": engine}).findings == ()
    assert states.abandon(engine, uuid, expect=inst.TaskState.UNSHELVING)
    report = audit.audit(deployment.placement, [node_uuid("h1")], {"cell1": engine})
    assert [(f.verdict, f.removed) for f in report.findings] == [(audit.Verdict.OFFLOADED_INSTANCE, True)]
    assert deployment.placement.get_allocations(uuid).allocations == {}
