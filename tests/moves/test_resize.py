"""Cold migrate and resize, confirm and revert: who holds what in Placement
before, during and after (the migration holds the source, the instance the
destination), the states, the migration record, and the roll-backs."""
from __future__ import annotations

import pytest

from billeting.cells import handoff
from billeting.cells.instances import TaskState, VmState
from billeting.conductor.move_protocols import MoveKind, MoveRefused
from billeting.scheduler.nova import Flavor

from tests.moves.conftest import LARGE, SMALL
from tests.support.wait import wait_for


def test_cold_migrate_holds_the_source_under_the_migration_until_confirmed(three):
    w = three
    uuid = w.boot()
    assert w.record(uuid).host == "h1"
    assert w.held(uuid) == w.on("h1", SMALL)
    w.check_invariant()

    w.drivers["h2"].gate.clear()  # hold the destination's build to look at the move in flight
    accepted = w.tasks.resize(uuid)
    assert (accepted.kind, accepted.source_host, accepted.dest_host) == (MoveKind.MIGRATION, "h1", "h2")
    wait_for(w.drivers["h2"].waiting.is_set, what="the destination to start building")
    assert w.record(uuid).task_state is TaskState.RESIZE_FINISH
    assert w.held(accepted.migration_uuid) == w.on("h1", SMALL)
    assert w.held(uuid) == w.on("h2", SMALL)
    assert w.usages() == {"VCPU": 4, "MEMORY_MB": 4096, "DISK_GB": 40}
    w.drivers["h2"].gate.set()

    record = w.settled(uuid, VmState.RESIZED)
    assert (record.host, record.node, record.flavor) == ("h2", "h2", SMALL)
    migration = w.migration(accepted.migration_uuid)
    assert (migration.status, migration.migration_type, migration.source_compute, migration.dest_compute) == (
        "finished", "migration", "h1", "h2")
    assert w.held(accepted.migration_uuid) == w.on("h1", SMALL)
    assert w.held(uuid) == w.on("h2", SMALL)
    assert uuid in w.drivers["h1"].guests() and uuid in w.drivers["h2"].guests()
    w.check_invariant()

    w.tasks.confirm_resize(uuid)
    record = w.record(uuid)
    assert (record.vm_state, record.task_state, record.host) == (VmState.ACTIVE, None, "h2")
    assert w.migration(accepted.migration_uuid).status == "confirmed"
    assert w.held(accepted.migration_uuid) == {}
    assert w.held(uuid) == w.on("h2", SMALL)
    wait_for(lambda: uuid not in w.drivers["h1"].guests(), what="the source guest to be dropped")
    assert uuid in w.drivers["h2"].guests()
    w.check_invariant()


def test_resize_confirm_stores_the_new_flavor(three):
    w = three
    uuid = w.boot()
    accepted = w.tasks.resize(uuid, flavor=LARGE)
    assert accepted.kind is MoveKind.RESIZE
    record = w.settled(uuid, VmState.RESIZED)
    assert record.flavor == LARGE
    assert w.migration(accepted.migration_uuid).new_flavor == LARGE
    assert w.held(uuid) == w.on("h2", LARGE)
    assert w.held(accepted.migration_uuid) == w.on("h1", SMALL)
    w.check_invariant()
    w.tasks.confirm_resize(uuid)
    assert w.record(uuid).flavor == LARGE
    assert w.specs.get(uuid).flavor == LARGE
    assert w.usages() == {"VCPU": 4, "MEMORY_MB": 4096, "DISK_GB": 40}
    w.check_invariant()


def test_revert_gives_the_instance_its_source_allocation_back(three):
    w = three
    uuid = w.boot()
    accepted = w.tasks.resize(uuid, flavor=LARGE)
    w.settled(uuid, VmState.RESIZED)
    w.tasks.revert_resize(uuid)
    record = w.record(uuid)
    assert (record.vm_state, record.task_state, record.host, record.node, record.flavor) == (
        VmState.ACTIVE, None, "h1", "h1", SMALL)
    assert record.compute_node_uuid == w.node("h1")
    assert record.selection.allocation_request.as_resources() == w.on("h1", SMALL)
    assert w.migration(accepted.migration_uuid).status == "reverted"
    assert w.held(uuid) == w.on("h1", SMALL)
    assert w.held(accepted.migration_uuid) == {}
    wait_for(lambda: uuid not in w.drivers["h2"].guests(), what="the destination guest to be dropped")
    assert uuid in w.drivers["h1"].guests()
    assert w.specs.get(uuid).flavor == SMALL
    w.check_invariant()
    # Moved again after a revert: a fresh migration, same rules.
    again = w.tasks.resize(uuid)
    w.settled(uuid, VmState.RESIZED)
    assert w.held(again.migration_uuid) == w.on("h1", SMALL)
    w.check_invariant()


def test_no_valid_host_refuses_with_the_schedulers_explanation_and_changes_nothing(three):
    w = three
    uuid = w.boot()
    huge = Flavor(vcpus=2, memory_mb=60000, root_gb=20, name="huge")  # only h1 could, and it is the source
    with pytest.raises(MoveRefused) as refused:
        w.tasks.resize(uuid, flavor=huge)
    assert refused.value.status == 400
    assert "No valid host" in refused.value.message
    record = w.record(uuid)
    assert (record.vm_state, record.task_state, record.host, record.flavor) == (VmState.ACTIVE, None, "h1", SMALL)
    assert w.held(uuid) == w.on("h1", SMALL)
    from billeting.cells import moves as migrations
    assert [m.status for m in migrations.for_instance(w.engine, uuid)] == ["error"]
    w.check_invariant()


def test_a_failed_destination_build_is_rolled_back(world):
    w = world
    w.compute("h1")
    w.compute("h2", failure_rate=1.0)
    w.d.conductor()
    uuid = w.boot()
    accepted = w.tasks.resize(uuid, flavor=LARGE)
    record = w.settled(uuid, VmState.ACTIVE)
    assert (record.host, record.flavor) == ("h1", SMALL)
    assert w.migration(accepted.migration_uuid).status == "error"
    assert w.held(uuid) == w.on("h1", SMALL)
    assert w.held(accepted.migration_uuid) == {}
    from billeting.cells import instances as inst
    assert "Resize of instance" in inst.latest_fault(w.engine, uuid).message
    assert uuid not in w.drivers["h2"].guests()
    w.check_invariant()


def test_wrong_states_are_409(three):
    w = three
    uuid = w.boot()
    with pytest.raises(MoveRefused) as refused:
        w.tasks.confirm_resize(uuid)
    assert refused.value.status == 409
    with pytest.raises(MoveRefused) as refused:
        w.tasks.resize(uuid, flavor=SMALL)
    assert refused.value.status == 400  # same flavor
    w.drivers["h2"].gate.clear()
    w.tasks.resize(uuid)
    for move in (lambda: w.tasks.resize(uuid), lambda: w.tasks.live_migrate(uuid),
                 lambda: w.tasks.revert_resize(uuid)):
        with pytest.raises(MoveRefused) as refused:
            move()
        assert refused.value.status == 409
    w.drivers["h2"].gate.set()
    w.settled(uuid, VmState.RESIZED)
    with pytest.raises(MoveRefused) as refused:
        w.tasks.resize(uuid)
    assert refused.value.status == 409
    with pytest.raises(MoveRefused) as refused:
        w.tasks.resize("00000000-0000-4000-8000-000000000000")
    assert refused.value.status == 404
    w.check_invariant()


def test_delete_in_verify_resize_frees_both_allocations(three):
    w = three
    keep = w.boot()
    uuid = w.boot()
    accepted = w.tasks.resize(uuid, flavor=LARGE)
    w.settled(uuid, VmState.RESIZED)
    handoff.request_delete(w.engine, w.wiring.bus, uuid)
    w.settled(uuid, VmState.DELETED)
    assert w.held(uuid) == {} and w.held(accepted.migration_uuid) == {}
    assert w.migration(accepted.migration_uuid).status == "cancelled"
    wait_for(lambda: all(uuid not in d.guests() for d in w.drivers.values()), what="every guest to go")
    assert w.held(keep) != {}
    w.check_invariant()


def test_delete_in_verify_resize_with_the_destination_down_frees_both_allocations(three):
    w = three
    uuid = w.boot()
    accepted = w.tasks.resize(uuid)
    w.settled(uuid, VmState.RESIZED)
    w.down("h2")
    handoff.request_delete(w.engine, w.wiring.bus, uuid)  # the cell conductor deletes it
    w.settled(uuid, VmState.DELETED)
    assert w.held(uuid) == {} and w.held(accepted.migration_uuid) == {}
    assert w.usages() == {}


def test_delete_while_the_resize_is_in_flight_frees_both_allocations(three):
    w = three
    uuid = w.boot()
    w.drivers["h2"].gate.clear()
    accepted = w.tasks.resize(uuid, flavor=LARGE)
    wait_for(w.drivers["h2"].waiting.is_set, what="the destination to start building")
    handoff.request_delete(w.engine, w.wiring.bus, uuid)
    w.settled(uuid, VmState.DELETED)
    w.drivers["h2"].gate.set()
    wait_for(lambda: uuid not in w.drivers["h2"].guests() and uuid not in w.drivers["h1"].guests(),
             what="the guests to go")
    assert w.held(uuid) == {} and w.held(accepted.migration_uuid) == {}
    assert w.usages() == {}


def test_the_audit_leaves_a_resize_waiting_for_confirm_alone(three):
    from billeting.cells import audit

    w = three
    uuid = w.boot()
    accepted = w.tasks.resize(uuid)
    w.settled(uuid, VmState.RESIZED)
    providers = [w.node(h) for h in w.drivers]
    report = audit.audit(w.placement, providers, {"cell1": w.engine}, remove_unknown=True)
    assert report.findings == ()
    assert w.held(accepted.migration_uuid) == w.on("h1", SMALL)


def test_a_destination_killed_mid_resize_rolls_back_when_it_starts_again(three):
    w = three
    uuid = w.boot()
    w.drivers["h2"].gate.clear()
    accepted = w.tasks.resize(uuid, flavor=LARGE)
    wait_for(w.drivers["h2"].waiting.is_set, what="the destination to start building")
    w.d.computes["h2"].stop()  # the build is interrupted, as in a crash
    assert w.record(uuid).task_state is TaskState.RESIZE_FINISH
    w.restart("h2")
    record = w.settled(uuid, VmState.ACTIVE)
    assert (record.host, record.flavor) == ("h1", SMALL)
    assert w.held(uuid) == w.on("h1", SMALL) and w.held(accepted.migration_uuid) == {}
    assert w.migration(accepted.migration_uuid).status == "error"
    assert uuid not in w.drivers["h2"].guests()
    w.check_invariant()
