"""The move tasks (docs/design/moves.md): resize and cold migrate, confirm and
revert, live migration, evacuation. The compute API calls them; they own
the scheduling of the destination, the allocation writes in Placement,
the migration record and the casts to the computes of the instance's cell.

How allocations move (the migration's uuid is a Placement consumer):

* resize / cold migrate / live migrate — the scheduler *ranks* without
  claiming (``claim=False``); then ONE ``POST /allocations`` gives the
  instance's current (source) allocation to the migration and the chosen
  destination to the instance. The instance is never without an allocation
  and never holds both; if the write is refused (the destination filled up
  meanwhile) the next ranked host is tried, and nothing needs undoing.
* confirm — the migration's allocation is deleted (generation-checked).
* revert, and any roll-back once the swap was made — ONE ``POST
  /allocations`` gives the migration's allocation back to the instance,
  replacing its destination.
* evacuate — no migration consumer: the instance's own allocation is
  doubled (source + destination, generation-checked); the source compute
  removes its half when it starts again (``compute.moves``).

Every step is guarded by a compare-and-set on the instance's task state
(``cells.move_states``) so a delete that comes in between wins; the delete
paths free the migration's allocation too (``cells.move_cleanup``).
"""
from __future__ import annotations

import logging
import uuid as uuidlib

import msgspec

from billeting.cells import instances as inst
from billeting.cells import move_states
from billeting.cells import moves as migrations
from billeting.cells import services
from billeting.cells.instances import InstanceRecord, TaskState, VmState
from billeting.cells.move_messages import ComputeMovesAPI, LiveMigrate, RebuildInstance, ResizeInstance
from billeting.conductor.move_protocols import CellHandle, MoveAccepted, MoveKind, MoveRefused, StoredRequestSpec
from billeting.conductor.wiring import CellTasks, TaskWiring
from billeting.placement_client import claims
from billeting.placement_client import moves as alloc
from billeting.placement_client.client import PlacementError
from billeting.placement_client.model import AllocationRequest, ProviderResources, WriteOutcome, WriteResult
from billeting.scheduler.errors import NoValidHost
from billeting.scheduler.nova import BadHint, Flavor, Unmodelled, domain_hints, request_from_nova
from billeting.scheduler.request import Destination
from billeting.scheduler.selection import Selection

LOG = logging.getLogger(__name__)

# Migration statuses used here (audit.MIGRATION_DONE lists the final ones).
PRE_MIGRATING, MIGRATING, FINISHED = "pre-migrating", "migrating", "finished"
CONFIRMED, REVERTED, ERROR = "confirmed", "reverted", "error"
QUEUED, RUNNING, COMPLETED, FAILED, DONE = "queued", "running", "completed", "failed", "done"
ACCEPTED = "accepted"


class ConductorMoveTasks(CellTasks):
    """``MoveTasks`` for cells reached directly (database + bus per cell)."""

    def __init__(self, wiring: TaskWiring, *, service_down_time_s: float = services.DEFAULT_DOWN_TIME_S) -> None:
        super().__init__(wiring)
        self.down_time_s = service_down_time_s

    # --- resize and cold migrate --------------------------------------------------------

    def resize(self, instance_uuid: str, *, flavor: Flavor | None = None, host: str | None = None,
               migration_uuid: str | None = None) -> MoveAccepted:
        cell, record = self._locate(instance_uuid)
        action = "resize" if flavor is not None else "migrate"
        kind = MoveKind.RESIZE if flavor is not None else MoveKind.MIGRATION
        if flavor is not None and _same_flavor(flavor, record.flavor):
            raise MoveRefused("When resizing, instances must change flavor!", status=400)
        self._check_idle(record, action)
        self._check_target(record, host)
        new_flavor = flavor if flavor is not None else record.flavor
        if not move_states.begin(cell.engine, instance_uuid, TaskState.RESIZE_PREP):
            raise self._state_conflict(cell, instance_uuid, action)
        migration_uuid = migration_uuid or str(uuidlib.uuid4())
        owner = _owner(record)
        try:
            migrations.create(cell.engine, uuid=migration_uuid, instance_uuid=instance_uuid,
                              migration_type=kind.value, source_compute=record.host, source_node=record.node,
                              old_flavor=record.flavor, new_flavor=new_flavor)
            chosen = self._place(cell, record, new_flavor, host, lambda sel: alloc.swap_to_migration(
                self.placement, instance_uuid=instance_uuid, migration_uuid=migration_uuid, owner=owner,
                destination=sel.allocation_request))
        except BaseException:
            # Nothing was written to Placement (the swap is all or nothing).
            migrations.set_status(cell.engine, migration_uuid, ERROR)
            move_states.step(cell.engine, instance_uuid, expect=TaskState.RESIZE_PREP, to=None)
            raise
        migrations.set_status(cell.engine, migration_uuid, MIGRATING, expect=PRE_MIGRATING,
                              dest_compute=chosen.service_host, dest_node=chosen.nodename)
        if not move_states.step(cell.engine, instance_uuid, expect=TaskState.RESIZE_PREP,
                                to=TaskState.RESIZE_MIGRATING):
            self._deleted_meanwhile(cell, instance_uuid, migration_uuid)
        message = ResizeInstance(instance_uuid=instance_uuid, migration_uuid=migration_uuid, selection=chosen,
                                 flavor=new_flavor)
        try:
            ComputeMovesAPI(cell.bus).prep_resize(chosen.service_host, message)
        except Exception as exc:  # noqa: BLE001 - the move is undone and refused
            self._undo_swap(cell, instance_uuid, migration_uuid, owner, TaskState.RESIZE_MIGRATING)
            raise MoveRefused(f"could not reach compute {chosen.service_host}: {exc}", status=409) from None
        LOG.info("%s of %s: %s → %s (migration %s)", action, instance_uuid, record.host, chosen.service_host,
                 migration_uuid)
        return MoveAccepted(instance_uuid=instance_uuid, migration_uuid=migration_uuid, kind=kind,
                            source_host=record.host or "", dest_host=chosen.service_host)

    def confirm_resize(self, instance_uuid: str) -> None:
        cell, record = self._locate(instance_uuid)
        migration = self._resized(cell, record, "confirmResize")
        if not move_states.begin(cell.engine, instance_uuid, TaskState.RESIZE_CONFIRMING,
                                 vm_states=(VmState.RESIZED,)):
            raise self._state_conflict(cell, instance_uuid, "confirmResize")
        outcome = self._placement(lambda: alloc.drop(self.placement, migration.uuid, owner=_owner(record)),
                                  cell, instance_uuid, TaskState.RESIZE_CONFIRMING)
        if not outcome.ok:
            move_states.step(cell.engine, instance_uuid, expect=TaskState.RESIZE_CONFIRMING, to=None)
            raise MoveRefused(f"could not free the source allocation of migration {migration.uuid}: "
                              f"{outcome.detail}", status=409)
        migrations.set_status(cell.engine, migration.uuid, CONFIRMED, expect=FINISHED)
        move_states.step(cell.engine, instance_uuid, expect=TaskState.RESIZE_CONFIRMING, to=None,
                         vm_state=VmState.ACTIVE)
        spec = self.specs.get(instance_uuid)
        if spec is not None and migration.new_flavor is not None:
            self.specs.save(msgspec.structs.replace(spec, flavor=migration.new_flavor))
        if migration.source_compute and migration.source_compute != record.host:
            self._cast_quietly(lambda: ComputeMovesAPI(cell.bus).drop_guest(
                migration.source_compute, instance_uuid, migration.uuid))
        LOG.info("resize of %s confirmed on %s (migration %s)", instance_uuid, record.host, migration.uuid)

    def revert_resize(self, instance_uuid: str) -> None:
        cell, record = self._locate(instance_uuid)
        migration = self._resized(cell, record, "revertResize")
        source = self._source_selection(cell, record, migration)
        if not move_states.begin(cell.engine, instance_uuid, TaskState.RESIZE_REVERTING,
                                 vm_states=(VmState.RESIZED,)):
            raise self._state_conflict(cell, instance_uuid, "revertResize")
        outcome = self._placement(lambda: alloc.move_back(
            self.placement, migration_uuid=migration.uuid, instance_uuid=instance_uuid, owner=_owner(record)),
            cell, instance_uuid, TaskState.RESIZE_REVERTING)
        if not outcome.ok:
            move_states.step(cell.engine, instance_uuid, expect=TaskState.RESIZE_REVERTING, to=None)
            raise MoveRefused(f"could not give the source allocation back: {outcome.detail}", status=409)
        migrations.set_status(cell.engine, migration.uuid, REVERTED, expect=FINISHED)
        move_states.settle(cell.engine, instance_uuid, expect=TaskState.RESIZE_REVERTING, vm_state=VmState.ACTIVE,
                           selection=source, flavor=migration.old_flavor)
        api = ComputeMovesAPI(cell.bus)
        if record.host and record.host != source.service_host:
            self._cast_quietly(lambda: api.drop_guest(record.host, instance_uuid, migration.uuid))
        self._cast_quietly(lambda: api.restore_guest(source.service_host, instance_uuid, migration.uuid))
        LOG.info("resize of %s reverted to %s (migration %s)", instance_uuid, source.service_host, migration.uuid)

    # --- live migration ----------------------------------------------------------------

    def live_migrate(self, instance_uuid: str, *, host: str | None = None,
                     migration_uuid: str | None = None) -> MoveAccepted:
        cell, record = self._locate(instance_uuid)
        self._check_idle(record, "os-migrateLive")
        self._check_target(record, host)
        if not self._up(cell, record.host):
            raise MoveRefused(f"Compute service of {record.host} is unavailable at this time.", status=409)
        if not move_states.begin(cell.engine, instance_uuid, TaskState.MIGRATING):
            raise self._state_conflict(cell, instance_uuid, "os-migrateLive")
        migration_uuid = migration_uuid or str(uuidlib.uuid4())
        owner = _owner(record)
        try:
            migrations.create(cell.engine, uuid=migration_uuid, instance_uuid=instance_uuid,
                              migration_type=MoveKind.LIVE_MIGRATION.value, source_compute=record.host,
                              source_node=record.node, status=ACCEPTED, old_flavor=record.flavor,
                              new_flavor=record.flavor)
            chosen = self._place(cell, record, record.flavor, host, lambda sel: alloc.swap_to_migration(
                self.placement, instance_uuid=instance_uuid, migration_uuid=migration_uuid, owner=owner,
                destination=sel.allocation_request))
        except BaseException:
            migrations.set_status(cell.engine, migration_uuid, ERROR)
            move_states.step(cell.engine, instance_uuid, expect=TaskState.MIGRATING, to=None)
            raise
        migrations.set_status(cell.engine, migration_uuid, QUEUED, expect=ACCEPTED,
                              dest_compute=chosen.service_host, dest_node=chosen.nodename)
        if inst.get(cell.engine, instance_uuid).task_state is not TaskState.MIGRATING:  # type: ignore[union-attr]
            self._deleted_meanwhile(cell, instance_uuid, migration_uuid)
        message = LiveMigrate(instance_uuid=instance_uuid, migration_uuid=migration_uuid, selection=chosen,
                              source_host=record.host or "")
        try:
            ComputeMovesAPI(cell.bus).live_migration(chosen.service_host, message)
        except Exception as exc:  # noqa: BLE001
            self._undo_swap(cell, instance_uuid, migration_uuid, owner, TaskState.MIGRATING)
            raise MoveRefused(f"could not reach compute {chosen.service_host}: {exc}", status=409) from None
        LOG.info("live migration of %s: %s → %s (migration %s)", instance_uuid, record.host,
                 chosen.service_host, migration_uuid)
        return MoveAccepted(instance_uuid=instance_uuid, migration_uuid=migration_uuid,
                            kind=MoveKind.LIVE_MIGRATION, source_host=record.host or "",
                            dest_host=chosen.service_host)

    # --- evacuate ----------------------------------------------------------------------

    def evacuate(self, instance_uuid: str, *, host: str | None = None,
                 migration_uuid: str | None = None) -> MoveAccepted:
        cell, record = self._locate(instance_uuid)
        if record.task_state is not None or record.vm_state not in move_states.EVACUABLE or record.host is None:
            raise MoveRefused(f"Cannot 'evacuate' instance {instance_uuid} while it is in vm_state "
                              f"{record.vm_state.value}, task_state {record.task_state}", status=409)
        self._check_target(record, host)
        if self._up(cell, record.host):
            raise MoveRefused(f"Compute service of {record.host} is still in use.", status=409)
        if not move_states.begin(cell.engine, instance_uuid, TaskState.REBUILDING, vm_states=move_states.EVACUABLE,
                                 host=record.host):
            raise self._state_conflict(cell, instance_uuid, "evacuate")
        migration_uuid = migration_uuid or str(uuidlib.uuid4())
        owner = _owner(record)
        try:
            migrations.create(cell.engine, uuid=migration_uuid, instance_uuid=instance_uuid,
                              migration_type=MoveKind.EVACUATION.value, source_compute=record.host,
                              source_node=record.node, status=ACCEPTED, old_flavor=record.flavor,
                              new_flavor=record.flavor)
            # No swap (6.4): the instance holds source + destination until the source comes back.
            chosen = self._place(cell, record, record.flavor, host, lambda sel: alloc.add(
                self.placement, instance_uuid, sel.allocation_request, owner=owner))
        except BaseException:
            migrations.set_status(cell.engine, migration_uuid, ERROR)
            move_states.step(cell.engine, instance_uuid, expect=TaskState.REBUILDING, to=None)
            raise
        migrations.set_status(cell.engine, migration_uuid, PRE_MIGRATING, expect=ACCEPTED,
                              dest_compute=chosen.service_host, dest_node=chosen.nodename)
        message = RebuildInstance(instance_uuid=instance_uuid, migration_uuid=migration_uuid, selection=chosen,
                                  source_host=record.host)
        try:
            ComputeMovesAPI(cell.bus).rebuild_instance(chosen.service_host, message)
        except Exception as exc:  # noqa: BLE001
            self._drop_destination(instance_uuid, chosen, owner)
            migrations.set_status(cell.engine, migration_uuid, ERROR)
            move_states.step(cell.engine, instance_uuid, expect=TaskState.REBUILDING, to=None)
            raise MoveRefused(f"could not reach compute {chosen.service_host}: {exc}", status=409) from None
        LOG.info("evacuation of %s: %s (down) → %s (migration %s)", instance_uuid, record.host,
                 chosen.service_host, migration_uuid)
        return MoveAccepted(instance_uuid=instance_uuid, migration_uuid=migration_uuid, kind=MoveKind.EVACUATION,
                            source_host=record.host, dest_host=chosen.service_host)

    # --- helpers -------------------------------------------------------------------------

    def _locate(self, instance_uuid: str) -> tuple[CellHandle, InstanceRecord]:
        name = self.cells.cell_of(instance_uuid)
        if name is None:
            raise MoveRefused(f"Instance {instance_uuid} could not be found.", status=404)
        cell = self.cells.cells().get(name)
        if cell is None:
            # cell0 (never got a host) or a cell this service does not reach.
            raise MoveRefused(f"Instance {instance_uuid} is not on any host and cannot be moved.", status=409)
        record = inst.get(cell.engine, instance_uuid)
        if record is None or record.vm_state is VmState.DELETED:
            raise MoveRefused(f"Instance {instance_uuid} could not be found.", status=404)
        return cell, record

    @staticmethod
    def _check_idle(record: InstanceRecord, action: str) -> None:
        if record.vm_state not in move_states.MOVABLE or record.task_state is not None or record.host is None:
            task = record.task_state.value if record.task_state else None
            raise MoveRefused(f"Cannot '{action}' instance {record.uuid} while it is in vm_state "
                              f"{record.vm_state.value}, task_state {task}", status=409)

    @staticmethod
    def _check_target(record: InstanceRecord, host: str | None) -> None:
        if host is not None and record.host is not None and host.lower() == record.host.lower():
            raise MoveRefused(f"The target host {host} is the instance's current host.", status=400)

    def _state_conflict(self, cell: CellHandle, instance_uuid: str, action: str) -> MoveRefused:
        now = inst.get(cell.engine, instance_uuid)
        if now is None or now.vm_state is VmState.DELETED:
            return MoveRefused(f"Instance {instance_uuid} could not be found.", status=404)
        task = now.task_state.value if now.task_state else None
        return MoveRefused(f"Cannot '{action}' instance {instance_uuid} while it is in vm_state "
                           f"{now.vm_state.value}, task_state {task}", status=409)

    def _resized(self, cell: CellHandle, record: InstanceRecord, action: str) -> migrations.MigrationRecord:
        if record.vm_state is not VmState.RESIZED or record.task_state is not None:
            task = record.task_state.value if record.task_state else None
            raise MoveRefused(f"Cannot '{action}' instance {record.uuid} while it is in vm_state "
                              f"{record.vm_state.value}, task_state {task}", status=409)
        found = [m for m in migrations.for_instance(cell.engine, record.uuid) if m.status == FINISHED]
        if not found:
            raise MoveRefused(f"Instance {record.uuid} has not been resized.", status=409)
        return found[-1]

    def _place(self, cell: CellHandle, record: InstanceRecord, flavor: Flavor, host: str | None,
               write) -> Selection:
        """Rank the destinations, then allocate the first one ``write`` can,
        under the server group's lock (as a member's build decides and
        claims): two members moved at once then each see where the other
        went, instead of both choosing the one host free of either."""
        spec = self._spec(record)
        with self._group_held(spec):
            return self._try_hosts(self._rank(cell, record, spec, flavor, host), write)

    def _rank(self, cell: CellHandle, record: InstanceRecord, spec: StoredRequestSpec, flavor: Flavor,
              host: str | None) -> list[Selection]:
        """The destinations in rank order (nothing claimed), in the instance's
        cell, never its current host. Raises MoveRefused (400) with the
        scheduler's explanation when there is none."""
        try:
            constraints, near = domain_hints(spec.hints, self.scheduler.directory, exclude=record.uuid)
        except BadHint as exc:  # (checked when the server was made; the topology may have changed since)
            raise MoveRefused(f"No valid host was found. {exc}", status=400) from None
        try:
            request = request_from_nova(
                flavor, spec.image, instance_uuids=[record.uuid], project_id=record.project_id,
                user_id=record.user_id, is_bfv=spec.is_bfv, availability_zone=spec.availability_zone,
                same_host=[u for u in spec.hints.get("same_host", ()) if u != record.uuid],
                different_host=[u for u in spec.hints.get("different_host", ()) if u != record.uuid],
                destination=Destination(host=host, cell=cell.name),
                ignore_hosts=[record.host] if record.host else [], domain_constraints=constraints, near=near)
        except Unmodelled as exc:  # a resize to such a flavor
            raise MoveRefused(f"No valid host was found. {exc}", status=400) from None
        lines = self._select(spec, request, claim=False,
                             no_host=lambda exc: move_refusal(exc, cell=cell.name, source=record.host))
        return [s for s in lines[0] if s.allocation_request is not None]

    def _try_hosts(self, line: list[Selection], write) -> Selection:
        """The first Selection of ``line`` that ``write`` manages to allocate,
        as a claimed Selection. Raises MoveRefused when none."""
        refused = []
        for selection in line:
            try:
                outcome: WriteOutcome = write(selection)
            except PlacementError as exc:
                raise MoveRefused(f"Placement could not take the move: {exc.detail or exc}", status=409) from None
            if outcome.ok:
                return msgspec.structs.replace(selection, claimed=True)
            if outcome.result is WriteResult.CONSUMER_CONFLICT:
                raise MoveRefused(f"the instance's allocations changed while it was being moved: "
                                  f"{outcome.detail}", status=409)
            refused.append(f"{selection.service_host}: {outcome.detail}")
            LOG.info("move onto %s refused by Placement (%s); trying the next host", selection.service_host,
                     outcome.detail)
        raise MoveRefused("No valid host was found. Placement refused the allocation on every host "
                          f"ranked for the move ({'; '.join(refused)})", status=400)

    def _placement(self, write, cell: CellHandle, instance_uuid: str, task: TaskState) -> WriteOutcome:
        try:
            return write()
        except PlacementError as exc:
            move_states.step(cell.engine, instance_uuid, expect=task, to=None)
            raise MoveRefused(f"Placement could not take the change: {exc.detail or exc}", status=409) from None

    def _undo_swap(self, cell: CellHandle, instance_uuid: str, migration_uuid: str, owner: alloc.Owner,
                   task: TaskState) -> None:
        """Roll a move back after the swap: the instance gets its source
        allocation back (dropping the destination), the migration is an error."""
        try:
            outcome = alloc.move_back(self.placement, migration_uuid=migration_uuid, instance_uuid=instance_uuid,
                                      owner=owner)
        except PlacementError as exc:
            outcome = WriteOutcome(WriteResult.INVALID, str(exc))
        if not outcome.ok:
            # Left as it is (migration not final): the audit keeps the migration's allocation.
            LOG.error("could not give %s its source allocation back from migration %s: %s", instance_uuid,
                      migration_uuid, outcome.detail)
            return
        migrations.set_status(cell.engine, migration_uuid, ERROR)
        move_states.step(cell.engine, instance_uuid, expect=task, to=None)

    def _deleted_meanwhile(self, cell: CellHandle, instance_uuid: str, migration_uuid: str) -> None:
        """The instance was deleted while its move started: whatever the swap
        wrote must not outlive it (the delete may have freed things before)."""
        for consumer in (instance_uuid, migration_uuid):
            try:
                claims.unclaim(self.placement, consumer)
            except PlacementError as exc:
                LOG.error("could not free %s after %s was deleted: %s (left to the audit)", consumer,
                          instance_uuid, exc)
        migrations.set_status(cell.engine, migration_uuid, "cancelled")
        raise MoveRefused(f"Instance {instance_uuid} was deleted while the move started.", status=409)

    def _drop_destination(self, instance_uuid: str, chosen: Selection, owner: alloc.Owner) -> None:
        if chosen.allocation_request is None:
            return
        try:
            alloc.remove_providers(self.placement, instance_uuid, chosen.allocation_request.allocations.keys(),
                                   owner=owner)
        except PlacementError as exc:
            LOG.error("could not remove the destination allocation of %s: %s", instance_uuid, exc)

    def _source_selection(self, cell: CellHandle, record: InstanceRecord,
                          migration: migrations.MigrationRecord) -> Selection:
        """The Selection the instance had on its source, rebuilt from the
        migration (host, node), the catalog (node uuid, zone) and what the
        migration holds in Placement."""
        held = self.placement.get_allocations(migration.uuid).as_resources()
        nodes = [n for n in services.nodes(cell.engine, migration.source_compute)
                 if n.nodename == migration.source_node]
        if not nodes or not migration.source_compute or not migration.source_node:
            raise MoveRefused(f"the source node {migration.source_node} of migration {migration.uuid} is gone",
                              status=409)
        node_uuid = nodes[0].uuid
        zone = None
        try:
            found = self.scheduler.catalog.records({node_uuid}).get(node_uuid)
            zone = found.availability_zone if found is not None else None
        except Exception:  # noqa: BLE001 - the zone is informative only
            LOG.warning("could not read the zone of node %s", migration.source_node)
        request = AllocationRequest(allocations={rp: ProviderResources(res) for rp, res in held.items()})
        return Selection(service_host=migration.source_compute, nodename=migration.source_node,
                         compute_node_uuid=node_uuid, cell_uuid=cell.name, consumer_uuid=record.uuid,
                         allocation_request=request, allocation_request_version=self.placement.version_text,
                         claimed=True, availability_zone=zone)

    def _up(self, cell: CellHandle, host: str | None) -> bool:
        return host is not None and services.is_up(cell.engine, host, down_time_s=self.down_time_s)

    @staticmethod
    def _cast_quietly(cast) -> None:
        try:
            cast()
        except Exception as exc:  # noqa: BLE001 - guest clean-up only; restarts clean up the rest
            LOG.warning("could not cast a guest clean-up: %s", exc)


def move_refusal(exc: NoValidHost, *, cell: str, source: str | None) -> str:
    """The scheduler's explanation, with what the move itself excluded named
    as such: the server's own host, and the other cells' hosts."""
    why = exc.explanation.message
    filters = {f.filter for f in exc.explanation.filters}
    if "IgnoreHostsFilter" in filters and source:
        why += f" (The host excluded is the server's own, {source}.)"
    if "DestinationFilter" in filters:
        why += f" A move stays in the server's cell ({cell}): other cells' hosts cannot take it."
    return why if why.startswith("No valid host was found") else f"No valid host was found. {why}"


def _owner(record: InstanceRecord) -> alloc.Owner:
    return alloc.Owner(record.request.project_id, record.request.user_id)


def _same_flavor(a: Flavor, b: Flavor) -> bool:
    return a == b
