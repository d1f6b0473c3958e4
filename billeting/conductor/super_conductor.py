"""The super conductor: the only caller of the scheduler for new builds.

For one server-create request (one or several instances sharing a shape):

    scheduler.select(request, alternates = build_attempts - 1)   one call, all instances
      ├─ NoValidHost / refusal ─▶ every instance buried in cell0, ERROR, the explanation as fault
      └─ per instance [chosen, alt, ...]:
           record + cast the build in the chosen host's cell (handoff.start_build)
           instance mapping → that cell; build request deleted
           (the user deleted it meanwhile: the build is deleted again in the cell)
           the chosen cell's database does not answer:
             claim released, scheduled again without that cell's hosts
             (another cell's host), or buried in cell0 with the reason as fault

It holds the API database, every cell's database and bus, and the scheduler;
a cell holds none of these (``cells.wiring``). The API reaches it by a cast
on the API bus (``SuperConductorAPI``) or, in tests, by calling
``schedule_and_build`` directly.
"""
from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

import msgspec
from sqlalchemy import Engine

from billeting import typeinfo
from billeting.apidb import build_requests, cell_mappings, instance_actions, instance_mappings
from billeting.apidb.build_requests import BuildRequest
from billeting.apidb.cell_directory import CellCatalog
from billeting.apidb.cell_mappings import CELL0
from billeting.cells import handoff
from billeting.cells.health import CellUnavailable
from billeting.cells.messages import InstanceSpec, RequestSummary
from billeting.messaging import Bus
from billeting.scheduler.errors import NoValidHost, SchedulerError
from billeting.scheduler.nova import Flavor, Image, Unmodelled, request_from_nova
from billeting.scheduler.request import Destination, DomainConstraint, Nearness, ScheduleRequest
from billeting.scheduler.selection import Selection

LOG = logging.getLogger(__name__)

TOPIC = "super_conductor"
DEFAULT_BUILD_ATTEMPTS = 3


class Selector(Protocol):
    """``SchedulerService.select``: with ``group`` the server group is loaded
    into the request and the new members recorded."""

    def select(self, request: ScheduleRequest, alternates: int = 0, *,
               group: str | None = None) -> list[list[Selection]]: ...


class ConductorSettings(msgspec.Struct, frozen=True, kw_only=True):
    # ``[conductor] build_attempts``: hosts tried per instance, so
    # build_attempts - 1 alternates are asked for.
    build_attempts: int = DEFAULT_BUILD_ATTEMPTS

    def check(self) -> None:
        if self.build_attempts < 1:
            raise ValueError("build_attempts must be at least 1")


class BuildPlan(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One server-create request as the API recorded it."""

    request_id: str
    instance_uuids: tuple[str, ...]
    names: tuple[str, ...]
    project_id: str
    user_id: str
    flavor: Flavor
    image: Image | None = None
    # Booted from a volume: the root disk is not the host's (no DISK_GB for it).
    is_bfv: bool = False
    availability_zone: str | None = None
    # The host and/or node an admin asked for (2.74's host/hypervisor_hostname, or "zone:host:node").
    destination: Destination | None = None
    server_group: str | None = None
    same_host: tuple[str, ...] = ()
    different_host: tuple[str, ...] = ()
    # Failure-domain hints (same_rack, different_row, near_rack, ...), read by the API.
    domain_constraints: tuple[DomainConstraint, ...] = ()
    near: Nearness | None = None


class BuildOutcome(msgspec.Struct, frozen=True, kw_only=True):
    instance_uuid: str
    cell: str | None          # None: deleted by the user before it got a cell
    host: str | None
    fault: str | None = None


class SuperConductor:
    def __init__(self, *, api_engine: Engine, cells: CellCatalog, scheduler: Selector,
                 settings: ConductorSettings | None = None) -> None:
        self.api_engine = api_engine
        self.cells = cells
        self.scheduler = scheduler
        self.settings = settings or ConductorSettings()
        self.settings.check()

    def schedule_and_build(self, plan: BuildPlan, *, resumed: bool = False) -> list[BuildOutcome]:
        """``resumed``: the plan was delivered before to a super conductor that
        died before finishing it (the API bus redelivers what was not
        acknowledged). What that one handed over stays; the rest is
        scheduled again, after freeing whatever it had claimed for them."""
        if resumed:
            done, plan = self._resume(plan)
            if not plan.instance_uuids:
                return done
            return done + self._schedule_and_build(plan)
        return self._schedule_and_build(plan)

    def _resume(self, plan: BuildPlan) -> tuple[list[BuildOutcome], BuildPlan]:
        done: list[BuildOutcome] = []
        left: list[tuple[str, str]] = []
        engines = {h.name: h.engine for h in self.cells.cells().values()}
        if self.cells.cell0 is not None:
            engines[CELL0] = self.cells.cell0
        for uuid, name in zip(plan.instance_uuids, plan.names, strict=True):
            mapping = instance_mappings.get(self.api_engine, uuid)
            if mapping is not None and mapping.cell is not None:
                done.append(BuildOutcome(instance_uuid=uuid, cell=mapping.cell, host=None))
                continue
            # Recorded in a cell but not yet mapped: the hand-over stopped in between.
            cell = next((c for c, e in engines.items() if self._holds(c, e, uuid)), None)
            if cell is not None:
                instance_mappings.set_cell(self.api_engine, uuid, cell)
                if not build_requests.remove(self.api_engine, uuid) and cell != CELL0:
                    handoff.request_delete(self.cells.cells_by_name()[cell].engine,
                                           self.cells.cells_by_name()[cell].bus, uuid)
                done.append(BuildOutcome(instance_uuid=uuid, cell=cell, host=None))
                continue
            if build_requests.get(self.api_engine, uuid) is None:
                instance_mappings.remove(self.api_engine, uuid)  # deleted by the user meanwhile
                done.append(BuildOutcome(instance_uuid=uuid, cell=None, host=None))
                continue
            left.append((uuid, name))
        client = getattr(self.scheduler, "client", None)
        for uuid, _ in left:
            # A claim the dead conductor's scheduler call made and nobody built on.
            if client is not None:
                client.delete_allocations(uuid)
        LOG.warning("request %s redelivered: %d instance(s) already handed over, %d to schedule again",
                    plan.request_id, len(done), len(left))
        return done, msgspec.structs.replace(plan, instance_uuids=tuple(u for u, _ in left),
                                             names=tuple(n for _, n in left))

    def _request(self, plan: BuildPlan, instance_uuids: tuple[str, ...],
                 ignore_hosts: tuple[str, ...] = ()) -> ScheduleRequest:
        return request_from_nova(
            plan.flavor, plan.image, instance_uuids=instance_uuids, project_id=plan.project_id,
            user_id=plan.user_id, is_bfv=plan.is_bfv, availability_zone=plan.availability_zone,
            destination=plan.destination, same_host=plan.same_host, different_host=plan.different_host,
            domain_constraints=plan.domain_constraints, near=plan.near, ignore_hosts=ignore_hosts)

    def _holds(self, cell: str, engine: Engine, uuid: str) -> bool:
        """Whether ``cell`` records ``uuid``. A cell that does not answer is
        taken as not holding it: the instance is scheduled again rather than
        left in BUILD (should it have reached that cell after all, that cell
        keeps a copy no mapping points to: a known gap, rare)."""
        from billeting.cells import instances as inst

        try:
            return self.cells.read(cell, lambda: inst.get(engine, uuid)) is not None
        except CellUnavailable:
            return False

    def _schedule_and_build(self, plan: BuildPlan) -> list[BuildOutcome]:
        summary = RequestSummary(project_id=plan.project_id, user_id=plan.user_id,
                                 availability_zone=plan.availability_zone, server_group=plan.server_group,
                                 retry=self.settings.build_attempts > 1)
        try:  # the compute API refuses such flavors; one changed since the server was asked for lands here
            request = self._request(plan, plan.instance_uuids)
        except Unmodelled as exc:
            return self._bury_all(plan, summary, f"No valid host was found. {exc}")
        try:
            lines = self.scheduler.select(request, self.settings.build_attempts - 1, group=plan.server_group)
        except NoValidHost as exc:
            return self._bury_all(plan, summary, exc.explanation.message)
        except SchedulerError as exc:
            return self._bury_all(plan, summary, f"No valid host was found. {exc.detail or exc}")
        return [self._hand_over(plan, summary, name, line)
                for name, line in zip(plan.names, lines, strict=True)]

    # --- per instance ----------------------------------------------------------------

    def _spec(self, plan: BuildPlan, uuid: str, name: str, build: BuildRequest | None) -> InstanceSpec:
        return InstanceSpec(uuid=uuid, name=name, flavor=plan.flavor, image=plan.image,
                            created_at=build.created_at if build is not None else None)

    def _hand_over(self, plan: BuildPlan, summary: RequestSummary, name: str,
                   line: Sequence[Selection]) -> BuildOutcome:
        """Hand one instance to its chosen host's cell. A cell whose database
        does not answer gets nothing: the claim is released and the instance
        scheduled again without that cell's hosts, until a cell takes it or
        none is left (cell0, with the reason as fault). Never a claim left
        behind, never an instance left in BUILD."""
        uuid = line[0].consumer_uuid
        unreachable: dict[str, str] = {}   # cell -> why
        while True:
            chosen = line[0]
            handle = self.cells.cells().get(chosen.cell_uuid)
            if handle is None:
                # A host the API level has no cell for: nothing can build it there.
                LOG.error("instance %s: host %s is in unknown cell %s", uuid, chosen.service_host, chosen.cell_uuid)
                self._unclaim(uuid, chosen)
                return self._bury(plan, summary, uuid, name,
                                  f"No valid host was found. Host {chosen.service_host} is in unknown cell "
                                  f"{chosen.cell_uuid}.")
            build = build_requests.get(self.api_engine, uuid)
            if build is None:
                # Deleted by the user while it was being scheduled: give the claim back.
                self._unclaim(uuid, chosen)
                instance_mappings.remove(self.api_engine, uuid)
                return BuildOutcome(instance_uuid=uuid, cell=None, host=None)
            try:
                self.cells.read(handle.name, lambda: handoff.start_build(
                    handle.engine, handle.bus, instance=self._spec(plan, uuid, name, build), request=summary,
                    selections=line), deadline=False)
            except CellUnavailable as exc:
                LOG.warning("instance %s: cell %s of host %s is unavailable (%s); its claim is released and it "
                            "is scheduled again without that cell", uuid, handle.name, chosen.service_host, exc.reason)
                self._unclaim(uuid, chosen)
                unreachable[handle.name] = exc.reason
                line = self._reselect(plan, uuid, unreachable)
                if line is None:
                    cells = ", ".join(f"{c} ({why})" for c, why in sorted(unreachable.items()))
                    return self._bury(plan, summary, uuid, name,
                                      f"No valid host was found. Unavailable cells were skipped: {cells}.")
                continue
            instance_mappings.set_cell(self.api_engine, uuid, handle.name)
            if not build_requests.remove(self.api_engine, uuid):
                # The user's delete raced the hand-over: finish it in the cell.
                handoff.request_delete(handle.engine, handle.bus, uuid)
            return BuildOutcome(instance_uuid=uuid, cell=handle.name, host=chosen.service_host)

    def _reselect(self, plan: BuildPlan, uuid: str, unreachable: dict[str, str]) -> Sequence[Selection] | None:
        """A new line (claimed host first, alternates) for ``uuid`` on a host of
        none of the ``unreachable`` cells; None when the scheduler finds none."""
        ignore = {host for host, cell in cell_mappings.host_cells(self.api_engine).items() if cell in unreachable}
        for _ in range(3):  # (a host of such a cell that no host mapping names yet is added and skipped)
            try:
                lines = self.scheduler.select(self._request(plan, (uuid,), tuple(sorted(ignore))),
                                              self.settings.build_attempts - 1, group=plan.server_group)
            except SchedulerError as exc:  # NoValidHost among them
                LOG.info("instance %s: no host outside the unavailable cells: %s", uuid, exc)
                return None
            line = lines[0] if lines else ()
            if not line:
                return None
            if line[0].cell_uuid not in unreachable:
                return line
            self._unclaim(uuid, line[0])
            ignore.add(line[0].service_host)
        return None

    def _unclaim(self, uuid: str, chosen: Selection) -> None:
        client = getattr(self.scheduler, "client", None)
        if client is None:
            return
        try:
            client.delete_allocations(uuid)
        except Exception:  # noqa: BLE001 - the audit removes what is left
            LOG.exception("could not delete the allocation of %s", uuid)

    def _bury_all(self, plan: BuildPlan, summary: RequestSummary, reason: str) -> list[BuildOutcome]:
        LOG.info("request %s: %s", plan.request_id, reason)
        return [self._bury(plan, summary, uuid, name, reason)
                for uuid, name in zip(plan.instance_uuids, plan.names, strict=True)]

    def _bury(self, plan: BuildPlan, summary: RequestSummary, uuid: str, name: str, reason: str) -> BuildOutcome:
        if self.cells.cell0 is None:
            raise RuntimeError("no cell0 mapping: unschedulable instances have nowhere to go")
        build = build_requests.get(self.api_engine, uuid)
        handoff.bury_in_cell0(self.cells.cell0, instance=self._spec(plan, uuid, name, build), request=summary,
                              reason=reason)
        instance_mappings.set_cell(self.api_engine, uuid, CELL0)
        build_requests.remove(self.api_engine, uuid)
        instance_actions.finish(self.api_engine, uuid, "create", message="Error")
        return BuildOutcome(instance_uuid=uuid, cell=CELL0, host=None, fault=reason)


# --- the API bus -------------------------------------------------------------------------

_encode = msgspec.json.Encoder().encode
_decode_plan = typeinfo.decoder(BuildPlan).decode


class SuperConductorAPI:
    """What the compute API casts on the API bus."""

    def __init__(self, bus: Bus) -> None:
        self.bus = bus

    def schedule_and_build_instances(self, plan: BuildPlan) -> None:
        self.bus.cast(TOPIC, "schedule_and_build_instances", _encode(plan))


def serve(bus: Bus, conductor: SuperConductor, *, threads: int = 4):
    """Handle casts of ``TOPIC`` on the API bus until the returned server stops.

    A cast is acknowledged once handled: a super conductor killed in the
    middle of a request leaves it on the queue, and the next super conductor
    (another one, or this one restarted) resumes it instead of leaving the
    instances in BUILD for ever. ``threads`` requests at a time; the
    acknowledgements go out from the bus's listener, which keeps answering
    the broker's heartbeats while a scheduler call takes minutes."""
    from billeting.messaging.bus import redelivered

    def handle(payload: bytes) -> None:
        plan = _decode_plan(payload)
        try:
            conductor.schedule_and_build(plan, resumed=redelivered())
        except Exception:  # noqa: BLE001 - logged; the instances stay in BUILD for the operator to see
            LOG.exception("request %s: scheduling and handing over failed", plan.request_id)

    return bus.serve(TOPIC, {"schedule_and_build_instances": handle}, threads=threads, ack_early=False)
