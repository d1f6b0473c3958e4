"""The compute's part of moves: build the guest on the destination, finish
or roll back, drop guests a move left behind, and clean up after crashes
and evacuations when the compute starts (docs/design/moves.md).

Hooked into ``ComputeManager`` by three calls: its handlers include
``handlers()``, ``init_host`` runs ``recover()`` and keeps the guests
``guests_to_keep()`` names.

Destination side, per move (the conductor already wrote Placement):

* ``prep_resize``       resize_migrating → resize_finish, build the guest
  with the new flavor; success → migration ``finished``, instance
  ``resized`` on this host with the new flavor; failure → the migration's
  allocation goes back to the instance (one ``POST /allocations``, which
  drops ours), instance ``active`` on the source with a fault, migration
  ``error``.
* ``live_migration``    migration queued → running, build the guest;
  success → instance ``active`` here, the migration's (source) allocation
  deleted, migration ``completed``, the source drops its guest; failure →
  as for resize (migration ``failed``).
* ``rebuild_instance``  (evacuate) migration pre-migrating → running,
  build; success → instance ``active`` here, migration ``done`` (the source
  half is still held by the instance until the source starts again);
  failure → our half removed from the instance, ERROR with a fault.

Source side at start-up: evacuations of its instances that are ``done``
lose their guest and their allocation on this compute's providers, and
become ``completed``. Moves this compute was the destination of and that
a crash interrupted are rolled back as failures.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import msgspec

from billeting.cells import instances as inst
from billeting.cells import move_messages as mm
from billeting.cells import move_states
from billeting.cells import moves as migrations
from billeting.cells.instances import Fault, TaskState, VmState
from billeting.cells.messages import InstanceSpec, cast_handler
from billeting.compute.driver import BuildInterrupted
from billeting.placement_client import claims
from billeting.placement_client import moves as alloc
from billeting.placement_client.client import PlacementError
from billeting.placement_client.model import WriteOutcome, WriteResult
from billeting.scheduler.selection import Selection

if TYPE_CHECKING:
    from billeting.compute.manager import ComputeManager

LOG = logging.getLogger(__name__)

# Migration statuses (the conductor's, billeting.conductor.moves).
MIGRATING, FINISHED, ERROR = "migrating", "finished", "error"
QUEUED, RUNNING, COMPLETED, FAILED = "queued", "running", "completed", "failed"
PRE_MIGRATING, DONE = "pre-migrating", "done"


class MoveRecovery(msgspec.Struct, frozen=True, kw_only=True):
    evacuations_cleaned: tuple[str, ...] = ()   # instances evacuated away from this host
    rolled_back: tuple[str, ...] = ()           # moves here interrupted by a crash


class ComputeMoves:
    def __init__(self, manager: ComputeManager) -> None:
        self.manager = manager
        self.host = manager.host
        self.engine = manager.engine
        self.client = manager.client
        self.driver = manager.driver
        self.api = mm.ComputeMovesAPI(manager.bus)

    def handlers(self):
        return {
            "prep_resize": cast_handler(lambda p: self.prep_resize(mm.decode_resize(p))),
            "live_migration": cast_handler(lambda p: self.live_migration(mm.decode_live(p))),
            "rebuild_instance": cast_handler(lambda p: self.rebuild_instance(mm.decode_rebuild(p))),
            "drop_guest": cast_handler(lambda p: self.drop_guest(mm.decode_drop(p).instance_uuid)),
            "restore_guest": cast_handler(lambda p: self.restore_guest(mm.decode_restore(p).instance_uuid)),
        }

    # --- resize and cold migrate (destination) ---------------------------------------

    def prep_resize(self, msg: mm.ResizeInstance) -> str:
        uuid = msg.instance_uuid
        migration = migrations.get(self.engine, msg.migration_uuid)
        if migration is None or migration.status != MIGRATING or migration.dest_compute != self.host:
            return self._stale("prep_resize", uuid)
        if not move_states.step(self.engine, uuid, expect=TaskState.RESIZE_MIGRATING, to=TaskState.RESIZE_FINISH):
            return self._stale("prep_resize", uuid)
        outcome = self._spawn(uuid, msg.selection, msg.flavor)
        if outcome is not None:
            if outcome != "interrupted":
                self._roll_back(uuid, msg.migration_uuid, TaskState.RESIZE_FINISH, ERROR,
                                f"Resize of instance {uuid} failed on {self.host}: {outcome}")
            return "failed"
        if not (migrations.set_status(self.engine, msg.migration_uuid, FINISHED, expect=MIGRATING)
                and move_states.settle(self.engine, uuid, expect=TaskState.RESIZE_FINISH, vm_state=VmState.RESIZED,
                                       selection=msg.selection, flavor=msg.flavor)):
            # Deleted meanwhile: the delete freed both allocations.
            self.driver.destroy(uuid)
            return "stale"
        LOG.info("instance %s resized onto %s (migration %s); waiting for confirm or revert", uuid, self.host,
                 msg.migration_uuid)
        return "resized"

    # --- live migration (destination) ----------------------------------------------

    def live_migration(self, msg: mm.LiveMigrate) -> str:
        uuid = msg.instance_uuid
        record = inst.get(self.engine, uuid)
        if record is None or record.task_state is not TaskState.MIGRATING:
            return self._stale("live_migration", uuid)
        if not migrations.set_status(self.engine, msg.migration_uuid, RUNNING, expect=QUEUED):
            return self._stale("live_migration", uuid)
        outcome = self._spawn(uuid, msg.selection, record.flavor)
        if outcome is not None:
            if outcome != "interrupted":
                self._roll_back(uuid, msg.migration_uuid, TaskState.MIGRATING, FAILED,
                                f"Live migration of instance {uuid} to {self.host} failed: {outcome}")
            return "failed"
        # The guest runs here now: the source allocation goes first, so the
        # instance is never seen active here while the migration still holds it.
        self._free_migration(uuid, msg.migration_uuid, record)
        if not move_states.settle(self.engine, uuid, expect=TaskState.MIGRATING, vm_state=VmState.ACTIVE,
                                  selection=msg.selection):
            self.driver.destroy(uuid)  # deleted meanwhile: the delete frees the rest
            return "stale"
        migrations.set_status(self.engine, msg.migration_uuid, COMPLETED, expect=RUNNING)
        self._cast(lambda: self.api.drop_guest(msg.source_host, uuid, msg.migration_uuid))
        LOG.info("instance %s live-migrated %s → %s", uuid, msg.source_host, self.host)
        return "migrated"

    # --- evacuate (destination) ------------------------------------------------------

    def rebuild_instance(self, msg: mm.RebuildInstance) -> str:
        uuid = msg.instance_uuid
        record = inst.get(self.engine, uuid)
        if record is None or record.task_state is not TaskState.REBUILDING:
            return self._stale("rebuild_instance", uuid)
        if not migrations.set_status(self.engine, msg.migration_uuid, RUNNING, expect=PRE_MIGRATING):
            return self._stale("rebuild_instance", uuid)
        outcome = self._spawn(uuid, msg.selection, record.flavor)
        if outcome is not None:
            if outcome != "interrupted":
                self._fail_evacuation(uuid, msg.migration_uuid, msg.selection, record,
                                      f"Evacuation of instance {uuid} to {self.host} failed: {outcome}")
            return "failed"
        if not move_states.settle(self.engine, uuid, expect=TaskState.REBUILDING, vm_state=VmState.ACTIVE,
                                  selection=msg.selection):
            self.driver.destroy(uuid)
            return "stale"
        migrations.set_status(self.engine, msg.migration_uuid, DONE, expect=RUNNING)
        LOG.info("instance %s evacuated from %s to %s", uuid, msg.source_host, self.host)
        return "rebuilt"

    def _fail_evacuation(self, uuid: str, migration_uuid: str, selection: Selection,
                         record: inst.InstanceRecord, reason: str) -> None:
        self.driver.destroy(uuid)
        fault = Fault(code=inst.FAULT_CODE, message=reason[:255], details=reason, host=self.host)
        if not move_states.fail(self.engine, uuid, expect=TaskState.REBUILDING, fault=fault):
            return  # deleted meanwhile: the delete frees everything the instance holds
        migrations.set_status(self.engine, migration_uuid, FAILED)
        if selection.allocation_request is not None:
            try:
                alloc.remove_providers(self.client, uuid, selection.allocation_request.allocations.keys(),
                                       owner=_owner(record))
            except PlacementError as exc:
                LOG.error("could not remove %s's allocation on %s: %s (left to the audit)", uuid, self.host, exc)
        LOG.warning("%s", reason)

    # --- guests left behind -------------------------------------------------------------

    def drop_guest(self, uuid: str) -> bool:
        """The instance runs elsewhere now (or is gone): remove our guest."""
        record = inst.get(self.engine, uuid)
        if record is not None and record.host == self.host and record.vm_state is not VmState.DELETED:
            return False
        return self.driver.destroy(uuid)

    def restore_guest(self, uuid: str) -> bool:
        """Revert: the instance is back here; build the guest if a restart lost it."""
        record = inst.get(self.engine, uuid)
        if record is None or record.host != self.host or uuid in self.driver.guests():
            return False
        if record.vm_state is not VmState.ACTIVE or record.selection is None:
            return False
        return self._spawn(uuid, record.selection, record.flavor) is None

    def guests_to_keep(self) -> set[str]:
        """Guests a start-up must not destroy: resized instances here, and
        the source guest of a resize waiting for confirm or revert."""
        keep = {r.uuid for r in inst.on_host(self.engine, self.host, vm_states=(VmState.RESIZED,))}
        for m in migrations.involving(self.engine, self.host):
            if m.status == FINISHED and m.source_compute == self.host:
                keep.add(m.instance_uuid)
        return keep

    # --- start-up -----------------------------------------------------------------------

    def recover(self) -> MoveRecovery:
        cleaned, rolled_back = [], []
        mine: set[str] | None = None
        for m in migrations.involving(self.engine, self.host):
            if m.migration_type == "evacuation" and m.source_compute == self.host and m.status == DONE:
                if mine is None:
                    mine = set(self.manager.provider_uuids())
                if self._clean_evacuation(m, mine):
                    cleaned.append(m.instance_uuid)
            elif m.dest_compute == self.host and self._interrupted(m):
                rolled_back.append(m.instance_uuid)
        return MoveRecovery(evacuations_cleaned=tuple(cleaned), rolled_back=tuple(rolled_back))

    def _clean_evacuation(self, m: migrations.MigrationRecord, providers: set[str]) -> bool:
        record = inst.get(self.engine, m.instance_uuid)
        if record is not None and record.host != self.host:
            self.driver.destroy(m.instance_uuid)
        owner = _owner(record) if record is not None else alloc.Owner("", "")
        try:
            outcome = alloc.remove_providers(self.client, m.instance_uuid, providers, owner=owner)
        except PlacementError as exc:
            outcome = WriteOutcome(WriteResult.INVALID, str(exc))
        if not outcome.ok:
            LOG.error("could not remove evacuated instance %s's allocation on %s: %s", m.instance_uuid, self.host,
                      outcome.detail)
            return False
        migrations.set_status(self.engine, m.uuid, COMPLETED, expect=DONE)
        LOG.info("instance %s was evacuated from %s; its guest and allocation here are removed", m.instance_uuid,
                 self.host)
        return True

    def _interrupted(self, m: migrations.MigrationRecord) -> bool:
        """A move onto this compute that a crash interrupted: undo it."""
        record = inst.get(self.engine, m.instance_uuid)
        if record is None:
            return False
        reason = f"compute {self.host} stopped during the move"
        if m.migration_type in ("migration", "resize") and m.status == MIGRATING:
            for task in (TaskState.RESIZE_MIGRATING, TaskState.RESIZE_FINISH):
                if record.task_state is task:
                    self.driver.destroy(m.instance_uuid)
                    return self._roll_back(m.instance_uuid, m.uuid, task, ERROR, reason)
        elif m.migration_type == "live-migration" and m.status in (QUEUED, RUNNING) \
                and record.task_state is TaskState.MIGRATING:
            self.driver.destroy(m.instance_uuid)
            return self._roll_back(m.instance_uuid, m.uuid, TaskState.MIGRATING, FAILED, reason)
        elif m.migration_type == "evacuation" and m.status in (PRE_MIGRATING, RUNNING) \
                and record.task_state is TaskState.REBUILDING:
            providers = set(self.manager.provider_uuids())
            self.driver.destroy(m.instance_uuid)
            fault = Fault(code=inst.FAULT_CODE, message=reason, details=reason, host=self.host)
            if move_states.fail(self.engine, m.instance_uuid, expect=TaskState.REBUILDING, fault=fault):
                migrations.set_status(self.engine, m.uuid, FAILED)
                try:
                    alloc.remove_providers(self.client, m.instance_uuid, providers, owner=_owner(record))
                except PlacementError as exc:
                    LOG.error("could not remove %s's allocation here: %s", m.instance_uuid, exc)
                return True
        return False

    # --- shared ------------------------------------------------------------------------

    def _spawn(self, uuid: str, selection: Selection, flavor) -> str | None:
        """Build the guest on ``selection``'s node; None when it runs, else why not
        ("interrupted" when the compute is stopping: recovery handles it)."""
        record = inst.get(self.engine, uuid)
        if record is None:
            return "the instance record is gone"
        spec = InstanceSpec(uuid=uuid, name=record.name, flavor=flavor, image=record.image)
        try:
            self.driver.spawn(spec, selection.nodename, selection.allocation_request, self.manager._stop)
        except BuildInterrupted as exc:
            LOG.warning("%s; the move is recovered when the compute starts again", exc)
            return "interrupted"
        except Exception as exc:  # noqa: BLE001 - any driver failure fails the move
            self.driver.destroy(uuid)
            return f"{type(exc).__name__}: {exc}"
        return None

    def _roll_back(self, uuid: str, migration_uuid: str, task: TaskState, status: str, reason: str) -> bool:
        """The move onto this compute failed: the instance gets its source
        allocation back from the migration (dropping ours) and stays on the
        source, active, with a fault."""
        self.driver.destroy(uuid)
        record = inst.get(self.engine, uuid)
        if record is None or record.task_state is not task:
            return False  # deleted meanwhile: the delete frees both allocations
        try:
            outcome = alloc.move_back(self.client, migration_uuid=migration_uuid, instance_uuid=uuid,
                                      owner=_owner(record))
        except PlacementError as exc:
            outcome = WriteOutcome(WriteResult.INVALID, str(exc))
        if not outcome.ok:
            LOG.error("move of %s failed and its source allocation could not be given back from migration %s: "
                      "%s", uuid, migration_uuid, outcome.detail)
            return False
        migrations.set_status(self.engine, migration_uuid, status)
        fault = Fault(code=inst.FAULT_CODE, message=reason[:255], details=reason, host=self.host)
        move_states.fail(self.engine, uuid, expect=task, fault=fault, vm_state=VmState.ACTIVE)
        LOG.warning("%s; rolled back to %s", reason, record.host)
        return True

    def _free_migration(self, uuid: str, migration_uuid: str, record: inst.InstanceRecord) -> None:
        try:
            outcome = alloc.drop(self.client, migration_uuid, owner=_owner(record))
            if not outcome.ok:
                LOG.warning("generation-checked delete of migration %s refused (%s); force-deleting",
                            migration_uuid, outcome.detail)
                claims.unclaim(self.client, migration_uuid)
        except PlacementError as exc:
            LOG.error("could not free the source allocation of %s (migration %s): %s", uuid, migration_uuid, exc)

    def _stale(self, what: str, uuid: str) -> str:
        LOG.info("%s of %s on %s is not current any more; dropped", what, uuid, self.host)
        return "stale"

    @staticmethod
    def _cast(cast) -> None:
        try:
            cast()
        except Exception as exc:  # noqa: BLE001
            LOG.warning("could not cast a guest clean-up: %s", exc)


def _owner(record: inst.InstanceRecord) -> alloc.Owner:
    return alloc.Owner(record.request.project_id, record.request.user_id)
