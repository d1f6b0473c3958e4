"""The compute agent of one service host: builds and deletes guests,
reports its nodes, heartbeats, and audits allocations on its providers.

It serves ``compute.<host>`` on its cell's bus and talks to nothing but
its cell (database, bus, cell conductor) and Placement. Builds follow the
state machine in ``billeting.cells.instances``:

* ``build_and_run_instance`` takes attempt n (scheduling → spawning; a
  message for any other attempt or state is a duplicate and is dropped),
  runs the driver, and ends in ``active``; if the instance was deleted or
  taken away meanwhile, the guest is destroyed instead.
* A failed build counts against the node's ``failed_builds`` and the
  compute's own run of consecutive failures (``build_health``: enough of them
  and the compute disables itself); the guest is
  removed; then either (retry allowed, driver said the failure is
  host-specific) spawning → rescheduling, the allocation is force-deleted
  and ``build_instances`` goes to the cell conductor with the alternates —
  in that order, so the conductor never claims on top of it — or the
  instance goes to ERROR with a fault and its allocation is deleted.
* At start-up, before serving, the compute recovers what a crash left:
  builds it was spawning are treated as failed (rescheduled or ERROR),
  builds cast to it but not taken are re-cast to itself (the duplicate is
  dropped), unfinished deletes are finished, guests no record wants are
  destroyed.

Builds run on the bus server's worker threads and messages are taken off
the queue when they start (at most once): the instance record, not the
message, is what recovery works from.
"""
from __future__ import annotations

import logging
import threading
import time

import msgspec

from billeting.cells import audit as audit_mod
from billeting.cells import instances as inst
from billeting.cells import lifecycle_states as states
from billeting.cells import messages as msgs
from billeting.cells import services
from billeting.cells.handoff import build_message
from billeting.cells.rpc import CellConductorAPI, ComputeAPI
from billeting.cells.wiring import CellWiring
from billeting.cells.move_cleanup import free_migrations
from billeting.compute.build_health import BuildHealth
from billeting.compute.driver import BuildAborted, BuildFailed, BuildInterrupted, VirtDriver
from billeting.compute.lifecycle import ComputeLifecycle
from billeting.compute.moves import ComputeMoves, MoveRecovery
from billeting.compute.reporting import TreeReporter
from billeting.compute.resource_tracker import NodeReport, ResourceTracker
from billeting.compute.settings import ComputeSettings
from billeting.messaging import Bus
from billeting.messaging.bus import Server
from billeting.placement_client import claims
from billeting.placement_client.client import PlacementError

LOG = logging.getLogger(__name__)


class Recovery(msgspec.Struct, frozen=True, kw_only=True):
    """What a start-up found and did."""

    rescheduled: tuple[str, ...] = ()   # builds interrupted while spawning, handed on
    failed: tuple[str, ...] = ()        # interrupted builds that may not be retried
    recast: tuple[str, ...] = ()        # builds cast here but never taken
    deleted: tuple[str, ...] = ()       # deletes finished
    guests_destroyed: tuple[str, ...] = ()
    moves: MoveRecovery = MoveRecovery()


class ComputeManager:
    def __init__(self, host: str, driver: VirtDriver, wiring: CellWiring, settings: ComputeSettings | None = None,
                 *, reporter: TreeReporter | None = None) -> None:
        self.host = host
        self.driver = driver
        self.wiring = wiring
        self.settings = settings or ComputeSettings()
        self.settings.check()
        self.engine = wiring.engine
        self.client = wiring.placement
        self.bus: Bus = wiring.require_bus()
        self.conductor = CellConductorAPI(self.bus)
        self.computes = ComputeAPI(self.bus)
        self.reporter = reporter or TreeReporter(self.client, refresh_s=self.settings.association_refresh_s)
        self.tracker = ResourceTracker(host, driver, self.engine, self.reporter, self.settings)
        self.health = BuildHealth(host, self.engine, self.settings.consecutive_build_service_disable_threshold,
                                  self.tracker.set_disabled)
        self._stop = threading.Event()
        self._server: Server | None = None
        self._unknown_since: dict[str, float] = {}
        self._lock = threading.Lock()
        self._in_flight = 0
        self.moves = ComputeMoves(self)
        self.lifecycle = ComputeLifecycle(self)

    # --- life cycle ---------------------------------------------------------------------

    def start(self) -> Recovery:
        """Register, report the nodes, recover, then serve."""
        self._stop.clear()
        record = services.heartbeat(self.engine, self.host, services.COMPUTE)
        self.tracker.disabled = record.disabled
        self.tracker.update_available_resource()
        recovery = self.init_host()
        self._server = self.bus.serve(msgs.COMPUTE_TOPIC, self.handlers(), server=self.host,
                                      threads=self.settings.build_threads, ack_early=True)
        LOG.info("compute %s serving on %s (cell %s, driver %s, %d node(s))", self.host, self.bus.url_shown,
                 self.wiring.name, self.driver.name, len(self.driver.node_names()))
        return recovery

    def request_stop(self) -> None:
        """Begin ``stop`` without waiting, so many hosts stop together."""
        self._stop.set()
        if self._server is not None:
            self._server.request_stop()

    def stop(self) -> None:
        """Stop serving; builds in flight are left for recovery, as after a crash."""
        self._stop.set()
        if self._server is not None:
            self._server.stop()
            self._server = None

    def handlers(self):
        return {
            "build_and_run_instance": msgs.cast_handler(lambda p: self.build_and_run_instance(msgs.decode_build(p))),
            "terminate_instance": msgs.cast_handler(
                lambda p: self.terminate_instance(msgs.decode_terminate(p).instance_uuid)),
            "refresh_service": msgs.cast_handler(lambda p: self.refresh_service()),
            **self.moves.handlers(),
            **self.lifecycle.handlers(),
        }

    # --- periodic work -------------------------------------------------------------------

    def heartbeat(self) -> services.ServiceRecord:
        record = services.heartbeat(self.engine, self.host, services.COMPUTE)
        if record.report_count == 1 and not self._stop.is_set():
            # The service was registered again: an operator deleted it while this
            # compute ran (DELETE /os-services), which also took its nodes out of
            # Placement and the cell. Report them again now, not when the
            # provider cache next expires (minutes).
            LOG.warning("compute %s: its service record was deleted while it ran; registering it and its "
                        "nodes again", self.host)
            for root in self.tracker.node_uuids().values():
                self.reporter.drop(root)
            self.tracker.update_available_resource()
        if record.disabled != self.tracker.disabled:
            self._disabled_changed(record.disabled)
        return record

    def refresh_service(self) -> list[NodeReport]:
        record = services.get(self.engine, self.host, services.COMPUTE)
        return self._disabled_changed(bool(record and record.disabled))

    def _disabled_changed(self, disabled: bool) -> list[NodeReport]:
        if not disabled and self.tracker.disabled:
            self.health.enabled_again()  # an operator enabled it: count failures afresh
        return self.tracker.set_disabled(disabled)

    def health_check(self) -> bool:
        """Enable the service again when the compute disabled it itself and
        the driver's health check passes (a driver without one never does)."""
        check = getattr(self.driver, "health_check", None)
        return check is not None and self.health.health_check(check)

    def update_available_resource(self) -> list[NodeReport]:
        return self.tracker.update_available_resource()

    def provider_uuids(self) -> list[str]:
        found = []
        for root in self.tracker.node_uuids().values():
            found.extend(self.reporter.current(root))
        return found

    def audit_allocations(self) -> audit_mod.AuditReport:
        """Remove allocations on this compute's providers that no instance or
        move of the cell explains (unknown ones after ``orphan_grace_s``)."""
        now = time.monotonic()

        def expired(consumer: str) -> bool:
            return now - self._unknown_since.setdefault(consumer, now) >= self.settings.orphan_grace_s

        report = audit_mod.audit(self.client, self.provider_uuids(), {self.wiring.name: self.engine},
                                 remove=True, remove_unknown=expired)
        still = {f.consumer_uuid for f in report.findings if f.verdict is audit_mod.Verdict.UNKNOWN and not f.removed}
        self._unknown_since = {k: v for k, v in self._unknown_since.items() if k in still}
        return report

    # --- builds ---------------------------------------------------------------------------

    def builds_in_flight(self) -> int:
        with self._lock:
            return self._in_flight

    def build_and_run_instance(self, build: msgs.BuildInstance) -> None:
        with self._lock:
            self._in_flight += 1
        try:
            self._build(build)
        finally:
            with self._lock:
                self._in_flight -= 1

    def _build(self, build: msgs.BuildInstance) -> None:
        uuid = build.instance.uuid
        if inst.get(self.engine, uuid) is None:
            # Nothing in this cell will ever build it: free what was claimed for it.
            LOG.error("build of %s cast to %s but the cell has no record of it; un-claiming", uuid, self.host)
            self._unclaim(uuid)
            return
        if not inst.start_spawn(self.engine, uuid, host=self.host, attempt=build.attempt):
            LOG.info("build of %s (attempt %d) on %s is not current any more; dropped", uuid, build.attempt,
                     self.host)
            return
        sel = build.selection
        try:
            self.driver.spawn(build.instance, sel.nodename, sel.allocation_request, self._stop)
        except BuildInterrupted as exc:
            LOG.warning("%s; it is recovered when the compute starts again", exc)
            return
        except BuildAborted as exc:
            self._build_failed(build, exc, reschedule=False)
            return
        except BuildFailed as exc:
            self._build_failed(build, exc, reschedule=build.request.retry)
            self.health.failed()  # (after the hand-off: disabling writes to Placement)
            return
        except Exception as exc:  # noqa: BLE001 - any driver failure is a failed build on this host
            LOG.exception("unexpected failure building %s on %s", uuid, self.host)
            self._build_failed(build, exc, reschedule=build.request.retry)
            self.health.failed()
            return
        self.health.succeeded()
        if inst.finish_spawn(self.engine, uuid, host=self.host, attempt=build.attempt):
            services.record_build(self.engine, sel.compute_node_uuid, succeeded=True)
            LOG.info("instance %s is active on %s (%s), attempt %d", uuid, self.host, sel.nodename, build.attempt)
        else:
            # Deleted, or given to another host by a sweep, while we built.
            self.driver.destroy(uuid)
            LOG.info("instance %s changed while it was built on %s; guest removed", uuid, self.host)

    def _build_failed(self, build: msgs.BuildInstance, exc: BaseException, *, reschedule: bool) -> bool:
        """False when the record had moved on (deleted, or taken over by a sweep)."""
        uuid = build.instance.uuid
        sel = build.selection
        reason = f"{type(exc).__name__}: {exc}"
        services.record_build(self.engine, sel.compute_node_uuid, succeeded=False)
        self.driver.destroy(uuid)
        if reschedule:
            if not inst.begin_reschedule(self.engine, uuid, host=self.host, attempt=build.attempt, reason=reason):
                return False  # deleted meanwhile: the delete frees the allocation
            LOG.info("build of %s failed on %s (%s); asking the cell conductor for the next host", uuid,
                     self.host, reason)
            # Un-claim BEFORE asking for the next host: claiming on top would
            # double the allocation. If this fails, the conductor finds the
            # stale allocation and deletes it.
            self._unclaim(uuid)
            try:
                self.conductor.build_instances(msgs.RescheduleBuild(
                    instance_uuid=uuid, attempt=build.attempt, failed=msgs.HostNode(self.host, sel.nodename),
                    reason=reason, alternates=build.alternates))
            except Exception as cast_exc:  # noqa: BLE001 - the conductor's sweep picks it up
                LOG.error("could not ask the cell conductor to reschedule %s: %s", uuid, cast_exc)
            return True
        fault = inst.Fault(code=inst.FAULT_CODE, message=f"Build of instance {uuid} failed: {exc}"[:255],
                           details=reason, host=self.host)
        if build.request.unshelve:  # back to shelved_offloaded, to be unshelved again
            if states.fail_unshelve(self.engine, uuid, attempt=build.attempt, from_states=(inst.TaskState.SPAWNING,),
                                    fault=fault, host=self.host, unclaim=lambda: self._unclaim(uuid)):
                LOG.info("unshelve of %s failed on %s without retry: %s", uuid, self.host, reason)
                return True
            return False
        if inst.fail_build(self.engine, uuid, attempt=build.attempt, from_states=(inst.TaskState.SPAWNING,),
                           fault=fault, host=self.host):
            LOG.info("build of %s failed on %s without retry: %s", uuid, self.host, reason)
            self._unclaim(uuid)
            return True
        return False

    def _unclaim(self, uuid: str) -> None:
        try:
            claims.unclaim(self.client, uuid)
        except PlacementError as exc:
            LOG.error("could not delete the allocations of %s: %s (left to the audit)", uuid, exc)

    # --- deletes -----------------------------------------------------------------------------

    def terminate_instance(self, uuid: str) -> bool:
        """Destroy the guest, free the allocation, mark the record deleted."""
        before = inst.begin_delete(self.engine, uuid)
        self.driver.destroy(uuid)
        if before is None:
            return False
        try:
            claims.unclaim(self.client, uuid)
            # A move in progress holds the source under the migration's uuid.
            left_behind = free_migrations(self.engine, self.client, uuid)
        except PlacementError as exc:
            LOG.error("delete of %s: could not free its allocations (%s); the sweep retries", uuid, exc)
            return False
        inst.finish_delete(self.engine, uuid)
        for m in left_behind:
            for other in {m.source_compute, m.dest_compute} - {self.host, None}:
                self.moves.api.drop_guest(other, uuid, m.uuid)
        LOG.info("instance %s deleted on %s", uuid, self.host)
        return True

    # --- recovery ---------------------------------------------------------------------------

    def init_host(self) -> Recovery:
        mine = inst.on_host(self.engine, self.host)
        rescheduled, failed, recast, deleted = [], [], [], []
        for record in mine:
            if record.task_state is inst.TaskState.DELETING:
                if self.terminate_instance(record.uuid):
                    deleted.append(record.uuid)
            elif record.vm_state is inst.VmState.BUILDING and record.task_state is inst.TaskState.SPAWNING:
                build = build_message(record)
                interrupted = BuildFailed(f"compute {self.host} stopped during the build")
                if self._build_failed(build, interrupted, reschedule=record.request.retry):
                    (rescheduled if record.request.retry else failed).append(record.uuid)
            elif record.vm_state is inst.VmState.BUILDING and record.task_state is inst.TaskState.SCHEDULING:
                self.computes.build_and_run_instance(self.host, build_message(record))
                recast.append(record.uuid)
        moves = self.moves.recover()
        self.lifecycle.recover()
        # (stopped and shelved instances keep their guest too)
        wanted = {r.uuid for r in inst.get_many(self.engine, self.driver.guests()).values()
                  if r.host == self.host and self.lifecycle.keeps_guest(r)}
        wanted |= self.moves.guests_to_keep()
        destroyed = [uuid for uuid in self.driver.guests() if uuid not in wanted and self.driver.destroy(uuid)]
        recovery = Recovery(rescheduled=tuple(rescheduled), failed=tuple(failed), recast=tuple(recast),
                            deleted=tuple(deleted), guests_destroyed=tuple(destroyed), moves=moves)
        if any(msgspec.structs.astuple(recovery)[:-1]) or any(msgspec.structs.astuple(moves)):
            LOG.warning("compute %s recovered after a restart: %s", self.host, recovery)
        return recovery
