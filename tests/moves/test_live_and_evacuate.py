"""Live migration (the migration holds the source while the guest moves;
success drops it, failure swaps back) and evacuation (the instance holds
source + destination until the source compute comes back and removes its
half)."""
from __future__ import annotations

import pytest

from billeting.cells import handoff
from billeting.cells import instances as inst
from billeting.cells.instances import TaskState, VmState
from billeting.conductor.move_protocols import MoveKind, MoveRefused

from tests.moves.conftest import SMALL
from tests.support.wait import wait_for


def test_live_migration_moves_the_allocation_and_drops_the_source(three):
    w = three
    uuid = w.boot()
    w.drivers["h2"].gate.clear()
    accepted = w.tasks.live_migrate(uuid)
    assert (accepted.kind, accepted.source_host, accepted.dest_host) == (MoveKind.LIVE_MIGRATION, "h1", "h2")
    wait_for(w.drivers["h2"].waiting.is_set, what="the destination to start")
    record = w.record(uuid)
    assert (record.vm_state, record.task_state, record.host) == (VmState.ACTIVE, TaskState.MIGRATING, "h1")
    assert w.migration(accepted.migration_uuid).status == "running"
    assert w.held(accepted.migration_uuid) == w.on("h1", SMALL)
    assert w.held(uuid) == w.on("h2", SMALL)
    w.drivers["h2"].gate.set()

    record = w.settled(uuid, VmState.ACTIVE)
    assert (record.host, record.compute_node_uuid) == ("h2", w.node("h2"))
    wait_for(lambda: w.migration(accepted.migration_uuid).status == "completed", what="the migration to complete")
    assert w.held(accepted.migration_uuid) == {}
    assert w.held(uuid) == w.on("h2", SMALL)
    wait_for(lambda: uuid not in w.drivers["h1"].guests(), what="the source guest to go")
    w.check_invariant()


def test_live_migration_to_a_named_host_goes_through_the_scheduler(three):
    w = three
    uuid = w.boot()
    accepted = w.tasks.live_migrate(uuid, host="h3")  # h2 would rank first
    assert accepted.dest_host == "h3"
    assert w.settled(uuid, VmState.ACTIVE).host == "h3"
    assert w.held(uuid) == w.on("h3", SMALL)
    w.check_invariant()
    with pytest.raises(MoveRefused) as refused:
        w.tasks.live_migrate(uuid, host="nowhere")
    assert refused.value.status == 400
    assert w.held(uuid) == w.on("h3", SMALL)
    assert w.record(uuid).task_state is None


def test_a_failed_live_migration_swaps_back(world):
    w = world
    w.compute("h1")
    w.compute("h2", failure_rate=1.0)
    w.d.conductor()
    uuid = w.boot()
    accepted = w.tasks.live_migrate(uuid)
    record = w.settled(uuid, VmState.ACTIVE)
    assert record.host == "h1"
    wait_for(lambda: w.migration(accepted.migration_uuid).status == "failed", what="the migration to fail")
    assert w.held(uuid) == w.on("h1", SMALL)
    assert w.held(accepted.migration_uuid) == {}
    assert "Live migration" in inst.latest_fault(w.engine, uuid).message
    w.check_invariant()


def test_live_migration_needs_a_live_source(three):
    w = three
    uuid = w.boot()
    w.down("h1")
    with pytest.raises(MoveRefused) as refused:
        w.tasks.live_migrate(uuid)
    assert refused.value.status == 409
    assert w.held(uuid) == w.on("h1", SMALL)


def test_evacuate_needs_the_source_down(three):
    w = three
    uuid = w.boot()
    with pytest.raises(MoveRefused) as refused:
        w.tasks.evacuate(uuid)
    assert refused.value.status == 409
    assert "still in use" in refused.value.message
    assert w.record(uuid).task_state is None
    w.check_invariant()


def test_evacuate_doubles_the_allocation_until_the_source_comes_back(three):
    w = three
    other = w.boot()
    uuid = w.boot()
    assert w.record(uuid).host == w.record(other).host == "h1"
    w.down("h1")
    accepted = w.tasks.evacuate(uuid)
    assert (accepted.kind, accepted.source_host, accepted.dest_host) == (MoveKind.EVACUATION, "h1", "h2")
    record = w.settled(uuid, VmState.ACTIVE)
    assert record.host == "h2"
    wait_for(lambda: w.migration(accepted.migration_uuid).status == "done", what="the evacuation to be done")
    assert w.held(uuid) == {**w.on("h1", SMALL), **w.on("h2", SMALL)}
    assert w.held(accepted.migration_uuid) == {}
    w.check_invariant(doubled=(uuid,))

    w.restart("h1")
    wait_for(lambda: w.migration(accepted.migration_uuid).status == "completed", what="the source clean-up")
    assert w.held(uuid) == w.on("h2", SMALL)
    assert uuid not in w.drivers["h1"].guests()
    assert other in w.drivers["h1"].guests() and w.held(other) == w.on("h1", SMALL)
    w.check_invariant()


def test_delete_of_an_instance_on_a_down_compute_frees_everything(three):
    w = three
    uuid = w.boot()
    w.down("h1")
    w.tasks.evacuate(uuid)
    w.settled(uuid, VmState.ACTIVE)
    w.down("h2")
    handoff.request_delete(w.engine, w.wiring.bus, uuid)  # the conductor deletes it
    w.settled(uuid, VmState.DELETED)
    assert w.held(uuid) == {}
    assert w.usages() == {}
