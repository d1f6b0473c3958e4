"""The lifecycle actions (``cells.lifecycle_states``): stop and start, shelve,
offload and unshelve, rebuild, lock and unlock. The compute API calls them,
like the move tasks; they own the instance's state changes, the Placement
writes that go with them and the casts to the instance's compute.

What Placement holds after each (the instance's uuid is the consumer):

* stop, start, shelve, lock, unlock, unshelve of a shelved (not offloaded)
  server — nothing changes: the server still occupies its host.
* offload — the allocation is deleted BEFORE the record leaves its host, so
  a crash in between leaves a shelved server whose allocation the audit
  sees as an orphan of an offloaded one at worst, never a leak.
* unshelve of an offloaded server — scheduled again like a build, in its
  own cell (a server never changes cells): the scheduler claims the chosen
  host; the record then becomes a build on it with the alternates, so a
  failed spawn is retried by the cell conductor as any build is. When every
  host failed, the server is offloaded again (no host, no allocation) with
  a fault saying why, as in Nova, rather than in ERROR. A member of a
  server group is scheduled and claimed under the group's lock, the one
  its builds take, so two members unshelved at once see each other.
* rebuild — the same host and the same allocation; with a new image the
  host must still satisfy the traits the image requires (read from
  Placement, on every provider the instance's allocation uses).
"""
from __future__ import annotations

import logging

import msgspec

from billeting.cells import instances as inst
from billeting.cells import lifecycle_states as states
from billeting.cells.instances import InstanceRecord, VmState
from billeting.cells.lifecycle_messages import ComputeLifecycleAPI
from billeting.cells.rpc import ComputeAPI
from billeting.conductor.move_protocols import CellHandle, MoveRefused
from billeting.conductor.wiring import CellTasks, TaskWiring
from billeting.placement_client import claims
from billeting.placement_client.client import PlacementError
from billeting.scheduler.errors import NoValidHost
from billeting.scheduler.nova import BadHint, Flavor, Image, Unmodelled, domain_hints, request_from_nova
from billeting.scheduler.request import Destination

LOG = logging.getLogger(__name__)

# Nova's answer when a rebuild's new image asks for traits the server's host lacks.
IMAGE_TRAITS_MISMATCH = ("No valid host was found. Image traits cannot be satisfied by the current resource "
                         "providers. Either specify a different image during rebuild or create a new server "
                         "with the specified image.")


class _Keep:
    """The unshelve argument left out (the stored zone is kept)."""


KEEP_ZONE = _Keep()


def conflict(action: str, record: InstanceRecord) -> MoveRefused:
    """Nova's 409 for an action the instance's state does not allow."""
    if record.task_state is not None:
        return MoveRefused(f"Cannot '{action}' instance {record.uuid} while it is in task_state "
                           f"{record.task_state.value}", status=409)
    return MoveRefused(f"Cannot '{action}' instance {record.uuid} while it is in vm_state {record.vm_state.value}",
                       status=409)


def required_traits(flavor: Flavor, image: Image | None, *, project_id: str = "-", user_id: str = "-") -> set[str]:
    """Every trait a host must have for ``flavor`` with ``image`` (any-of
    sets count with their first member only when they have one). Raises
    ``Unmodelled``."""
    request = request_from_nova(flavor, image, instance_uuids=["-"], project_id=project_id, user_id=user_id)
    found = set(request.root_required)
    for group in request.groups:
        found.update(next(iter(any_of)) for any_of in group.required if len(any_of) == 1)
    return found


class LifecycleTasks(CellTasks):
    def __init__(self, wiring: TaskWiring, *, offload_at_once: bool = True) -> None:
        super().__init__(wiring)
        # Nova's shelved_offload_time 0 (its default): a shelve offloads at once.
        self.offload_at_once = offload_at_once

    # --- power ---------------------------------------------------------------------------

    def stop(self, instance_uuid: str) -> None:
        cell, _ = self._locate(instance_uuid)
        if not states.stop(cell.engine, instance_uuid):
            raise conflict("stop", self._again(cell, instance_uuid))

    def start(self, instance_uuid: str) -> None:
        cell, _ = self._locate(instance_uuid)
        if not states.start(cell.engine, instance_uuid):
            raise conflict("start", self._again(cell, instance_uuid))

    # --- shelve --------------------------------------------------------------------------

    def shelve(self, instance_uuid: str) -> None:
        cell, record = self._locate(instance_uuid)
        if not states.shelve(cell.engine, instance_uuid):
            raise conflict("shelve", self._again(cell, instance_uuid))
        if self.offload_at_once:
            self._offload(cell, record, "shelve")

    def shelve_offload(self, instance_uuid: str) -> None:
        cell, record = self._locate(instance_uuid)
        self._offload(cell, record, "shelveOffload")

    def _offload(self, cell: CellHandle, record: InstanceRecord, action: str) -> None:
        uuid = record.uuid
        if not states.begin_offload(cell.engine, uuid):
            raise conflict(action, self._again(cell, uuid))
        try:
            claims.unclaim(self.placement, uuid)
        except PlacementError as exc:
            states.abandon(cell.engine, uuid, expect=inst.TaskState.SHELVING_OFFLOADING)
            raise MoveRefused(f"Placement could not free the allocation of {uuid}: {exc.detail or exc}",
                              status=409) from None
        if not states.finish_offload(cell.engine, uuid):
            return  # deleted meanwhile: the delete finishes what is left
        if record.host:
            try:
                ComputeLifecycleAPI(cell.bus).offload_guest(record.host, uuid)
            except Exception as exc:  # noqa: BLE001 - the guest is removed when the compute restarts
                LOG.warning("could not ask %s to remove the guest of %s: %s", record.host, uuid, exc)
        LOG.info("instance %s offloaded from %s", uuid, record.host)

    def unshelve(self, instance_uuid: str, *, availability_zone: str | None | _Keep = KEEP_ZONE,
                 host: str | None = None) -> None:
        """``availability_zone`` None unpins the server from its zone (2.91);
        ``host``: the one host to unshelve on (admins, 2.91). Both are for
        offloaded servers only, as in Nova."""
        cell, record = self._locate(instance_uuid)
        if record.vm_state is VmState.SHELVED and record.task_state is None:
            if host is not None or availability_zone is not KEEP_ZONE:
                raise MoveRefused(f"The unshelve action on instance {instance_uuid} can only take an "
                                  "availability_zone or a host when the instance is SHELVED_OFFLOADED.",
                                  status=409)
            if not states.unshelve_in_place(cell.engine, instance_uuid):
                raise conflict("unshelve", self._again(cell, instance_uuid))
            return
        if not states.begin_unshelve(cell.engine, instance_uuid):
            raise conflict("unshelve", self._again(cell, instance_uuid))
        try:
            spec = self._spec(record)
            zone = spec.availability_zone if isinstance(availability_zone, _Keep) else availability_zone
            lines = self._schedule(cell, record, zone, host)
        except BaseException:
            states.abandon(cell.engine, instance_uuid, expect=inst.TaskState.UNSHELVING)
            raise
        # unshelve=True: a build that fails on every host leaves the server offloaded, not in ERROR.
        summary = msgspec.structs.replace(record.request, availability_zone=zone, unshelve=True)
        build = states.unshelve_build(record, lines, summary)
        if not states.hand_to_build(cell.engine, build):
            claims.unclaim(self.placement, instance_uuid)
            raise MoveRefused(f"Instance {instance_uuid} was deleted while it was unshelved.", status=409)
        if zone != spec.availability_zone:
            self.specs.save(msgspec.structs.replace(spec, availability_zone=zone))
        try:
            ComputeAPI(cell.bus).build_and_run_instance(build.selection.service_host, build)
        except Exception as exc:  # noqa: BLE001 - recorded: the cell conductor's sweep casts it again
            LOG.warning("unshelve of %s: could not cast the build to %s (%s); left to the sweep", instance_uuid,
                        build.selection.service_host, exc)
        LOG.info("unshelve of %s: building on %s", instance_uuid, build.selection.service_host)

    def _schedule(self, cell: CellHandle, record: InstanceRecord, zone: str | None, host: str | None):
        """The chosen host (claimed) then the alternates, in the instance's cell."""
        spec = self._spec(record)
        try:
            constraints, near = domain_hints(spec.hints, self.scheduler.directory, exclude=record.uuid)
            request = request_from_nova(
                record.flavor, record.image, instance_uuids=[record.uuid], project_id=record.project_id,
                user_id=record.user_id, is_bfv=spec.is_bfv, availability_zone=zone,
                same_host=[u for u in spec.hints.get("same_host", ()) if u != record.uuid],
                different_host=[u for u in spec.hints.get("different_host", ()) if u != record.uuid],
                destination=Destination(host=host, cell=cell.name), domain_constraints=constraints, near=near)
        except (BadHint, Unmodelled) as exc:
            raise MoveRefused(f"No valid host was found. {exc}", status=400) from None
        # Under the group's lock until the claim is written, as a member's build.
        with self._group_held(spec):
            return self._select(spec, request, claim=True,
                                no_host=lambda exc: _unshelve_refusal(exc, cell.name))[0]

    # --- rebuild -------------------------------------------------------------------------

    def rebuild(self, instance_uuid: str, *, image: Image, name: str | None = None) -> InstanceRecord:
        """Respawn on the same host with ``image`` (renamed when ``name``);
        returns the record as the rebuild left it (REBUILD until the compute
        has respawned it)."""
        cell, record = self._locate(instance_uuid)
        if record.vm_state not in states.REBUILDABLE or record.task_state is not None:
            raise conflict("rebuild", record)
        if record.host is None:
            raise MoveRefused(f"Instance {instance_uuid} is not on any host and cannot be rebuilt.", status=409)
        new_image = image.id != (record.image.id if record.image is not None else None)
        if new_image:
            self._check_fit(record, image)
        if not states.begin_rebuild(cell.engine, instance_uuid, image=image if new_image else None,
                                    name=name):
            raise conflict("rebuild", self._again(cell, instance_uuid))
        if new_image:
            spec = self.specs.get(instance_uuid)
            if spec is not None:
                self.specs.save(msgspec.structs.replace(spec, image=image))
        ends = VmState.STOPPED if record.vm_state is VmState.STOPPED else VmState.ACTIVE
        try:
            ComputeLifecycleAPI(cell.bus).rebuild_server(record.host, instance_uuid, ends)
        except Exception as exc:  # noqa: BLE001 - the compute finishes it when it starts again
            LOG.warning("rebuild of %s: could not cast to %s (%s)", instance_uuid, record.host, exc)
        return inst.get(cell.engine, instance_uuid) or record

    def _check_fit(self, record: InstanceRecord, image: Image) -> None:
        """The host's providers must still have every trait the new image adds."""
        try:
            wanted = required_traits(record.flavor, image) - required_traits(record.flavor, None)
        except Unmodelled as exc:
            raise MoveRefused(str(exc), status=400) from None
        if not wanted:
            return
        try:
            held = self.placement.get_allocations(record.uuid).as_resources()
            have = set()
            for provider in held:
                have.update(self.placement.get_traits(provider).traits)
        except PlacementError as exc:
            raise MoveRefused(f"Placement could not answer: {exc.detail or exc}", status=409) from None
        if wanted - have:
            LOG.info("rebuild of %s refused: its host lacks %s", record.uuid, sorted(wanted - have))
            raise MoveRefused(IMAGE_TRAITS_MISMATCH, status=400)

    # --- lock ----------------------------------------------------------------------------

    def lock(self, instance_uuid: str, *, by: str, reason: str | None) -> None:
        cell, _ = self._locate(instance_uuid)
        if not states.lock(cell.engine, instance_uuid, by=by, reason=reason):
            raise MoveRefused(f"Instance {instance_uuid} could not be found.", status=404)

    def unlock(self, instance_uuid: str) -> None:
        cell, _ = self._locate(instance_uuid)
        if not states.unlock(cell.engine, instance_uuid):
            raise MoveRefused(f"Instance {instance_uuid} could not be found.", status=404)

    # --- helpers -------------------------------------------------------------------------

    def _locate(self, instance_uuid: str) -> tuple[CellHandle, InstanceRecord]:
        name = self.cells.cell_of(instance_uuid)
        if name is None:
            raise MoveRefused(f"Instance {instance_uuid} could not be found.", status=404)
        cell = self.cells.cells().get(name)
        record = inst.get(cell.engine, instance_uuid) if cell is not None else None
        if cell is None or record is None:
            # cell0: it never got a host, nothing to act on but a delete.
            raise MoveRefused(f"Cannot act on instance {instance_uuid}: it never got a host (vm_state error).",
                              status=409)
        if record.vm_state is VmState.DELETED:
            raise MoveRefused(f"Instance {instance_uuid} could not be found.", status=404)
        return cell, record

    @staticmethod
    def _again(cell: CellHandle, instance_uuid: str) -> InstanceRecord:
        now = inst.get(cell.engine, instance_uuid)
        if now is None or now.vm_state is VmState.DELETED:
            raise MoveRefused(f"Instance {instance_uuid} could not be found.", status=404)
        return now


def _unshelve_refusal(exc: NoValidHost, cell: str) -> str:
    why = exc.explanation.message
    if any(f.filter == "DestinationFilter" for f in exc.explanation.filters):
        why += f" An unshelved server stays in its cell ({cell}): other cells' hosts cannot take it."
    return why if why.startswith("No valid host was found") else f"No valid host was found. {why}"
