"""The cell conductor: reschedules failed builds on their alternates,
deletes instances whose compute is down, and sweeps up after crashes.

It holds its cell's database, its cell's bus and a Placement client —
nothing of the API level — so it can never ask the scheduler for a new
host: when the alternates run out, the build ends in ERROR with the fault
"Exhausted all hosts available for retrying build failures" (the build of
an unshelve goes back to SHELVED_OFFLOADED with that fault instead, holding
nothing, so it can be unshelved again).

Reschedule (``build_instances``, attempt n failed, state ``rescheduling``):

1. settle what the instance holds in Placement: nothing (the compute
   un-claimed, the normal case); an alternate's allocation (a conductor
   handling the same reschedule claimed it and died, or is racing us:
   adopt it); anything else (the failed host's allocation, left by a
   compute that died before un-claiming: delete it);
2. stop with ERROR when attempt n reached ``max_attempts``;
3. claim the next alternate (``reschedule.claim_next_alternate``: one
   whose claim is refused is skipped without counting an attempt; hosts
   this conductor saw fail a build within ``recent_failure_window_s`` are
   tried last, see ``recent_failures``); ERROR when none could be claimed;
4. record attempt n+1 on the claimed host (compare-and-set on attempt n;
   losing it to a racing handler that recorded the same host is fine,
   losing it to a delete means our claim is freed again);
5. cast ``build_and_run_instance`` to that host.

Messages are acknowledged only after their handler returns (at least
once): a conductor killed mid-reschedule leaves the message to another
conductor, and the steps above are safe to repeat. The periodic sweep
covers what no message will ever redo:

* ``scheduling`` longer than ``cast_timeout_s``: the compute is up → cast
  again (a duplicate is dropped); down → the attempt failed;
* ``spawning`` on a compute that is down (or longer than
  ``build_timeout_s``, when set) → the attempt failed;
* ``rescheduling`` longer than ``reschedule_timeout_s`` → reschedule here;
* ``deleting`` longer than ``delete_timeout_s`` → cast the delete again,
  or delete here when the compute is down.

"The attempt failed" is what a compute does on a failed build, done here
for a compute that cannot: spawning/scheduling → rescheduling, un-claim,
reschedule (or ERROR with a fault when retrying is off).
"""
from __future__ import annotations

import logging
import os
import socket
import threading
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal

import msgspec

from billeting.cells import instances as inst
from billeting.cells import lifecycle_states as states
from billeting.cells import messages as msgs
from billeting.cells import services
from billeting.cells.handoff import build_message
from billeting.cells.move_cleanup import free_migrations
from billeting.cells.periodic import Periodic
from billeting.cells.rpc import ComputeAPI
from billeting.cells.wiring import CellWiring
from billeting.conductor import metrics
from billeting.conductor.recent_failures import DEFAULT_MAX_HOSTS, DEFAULT_WINDOW_S, RecentFailures
from billeting.conductor.reschedule import EXHAUSTED, ConsumerHoldsAllocations, NextHost, claim_next_alternate
from billeting.messaging import Bus
from billeting.messaging.bus import Server
from billeting.placement_client import claims
from billeting.placement_client.client import PlacementError
from billeting.scheduler.selection import Selection

LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class ConductorSettings:
    # [scheduler]max_attempts: builds tried per instance, the first included.
    max_attempts: int = 3
    service_down_time_s: float = services.DEFAULT_DOWN_TIME_S
    report_interval_s: float = 10.0
    sweep_interval_s: float = 30.0
    cast_timeout_s: float = 120.0
    reschedule_timeout_s: float = 60.0
    delete_timeout_s: float = 60.0
    build_timeout_s: float = 0.0  # 0: a build on a live compute may take as long as it takes
    # Alternates on hosts that failed a build this long ago or less go last (0: off).
    recent_failure_window_s: float = DEFAULT_WINDOW_S
    recent_failure_hosts: int = DEFAULT_MAX_HOSTS  # how many such hosts are remembered

    def check(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        for name in ("service_down_time_s", "report_interval_s", "cast_timeout_s", "reschedule_timeout_s",
                     "delete_timeout_s", "build_timeout_s", "recent_failure_window_s"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative")
        if self.recent_failure_hosts < 1:
            raise ValueError("recent_failure_hosts must be at least 1")


class Outcome(msgspec.Struct, frozen=True, kw_only=True):
    """What one reschedule did."""

    instance_uuid: str
    # cast: built on the next host; error: ERROR with a fault; stale: the
    # instance had moved on; raced: another handler of the same reschedule won
    result: Literal["cast", "error", "stale", "raced"]
    host: str | None = None
    attempt: int = 0
    refused: int = 0                # alternates whose claim Placement refused
    deferred: int = 0               # alternates tried last: their host failed a build just now


class SweepReport(msgspec.Struct, frozen=True, kw_only=True):
    recast: tuple[str, ...] = ()
    failed_attempts: tuple[str, ...] = ()
    rescheduled: tuple[str, ...] = ()
    deletes_recast: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()


class CellConductor:
    def __init__(self, wiring: CellWiring, settings: ConductorSettings | None = None, *,
                 name: str | None = None) -> None:
        self.wiring = wiring
        self.settings = settings or ConductorSettings()
        self.settings.check()
        self.name = name or f"{socket.gethostname()}-{os.getpid()}"
        self.engine = wiring.engine
        self.client = wiring.placement
        self.bus: Bus = wiring.require_bus()
        self.computes = ComputeAPI(self.bus)
        self._server: Server | None = None
        self._periodic: Periodic | None = None
        self._sweep_lock = threading.Lock()
        self.recent_failures = RecentFailures(self.settings.recent_failure_window_s,
                                              self.settings.recent_failure_hosts)

    # --- life cycle ---------------------------------------------------------------------

    def start(self, *, periodic: bool = True) -> None:
        """Serve the cell's conductor topic; with ``periodic``, also heartbeat
        and sweep on a thread of its own."""
        services.heartbeat(self.engine, self.name, services.CONDUCTOR)
        self._server = self.bus.serve(msgs.CONDUCTOR_TOPIC, self.handlers(), ack_early=False)
        if periodic:
            self._periodic = Periodic(f"conductor-{self.wiring.name}")
            self._periodic.add("heartbeat", self.settings.report_interval_s, self.heartbeat)
            self._periodic.add("sweep", self.settings.sweep_interval_s, self.sweep)
            self._periodic.start()
        LOG.info("cell conductor %s serving cell %s on %s", self.name, self.wiring.name, self.bus.url_shown)

    def request_stop(self) -> None:
        """Begin ``stop`` without waiting (a process stopping several asks all first)."""
        if self._periodic is not None:
            self._periodic.request_stop()
        if self._server is not None:
            self._server.request_stop()

    def stop(self) -> None:
        if self._periodic is not None:
            self._periodic.stop()
            self._periodic = None
        if self._server is not None:
            self._server.stop()
            self._server = None

    def heartbeat(self) -> None:
        services.heartbeat(self.engine, self.name, services.CONDUCTOR)

    def handlers(self):
        return {
            "build_instances": msgs.cast_handler(lambda p: self.build_instances(msgs.decode_reschedule(p))),
            "delete_instance": msgs.cast_handler(lambda p: self.delete_instance(msgs.decode_delete(p).instance_uuid)),
        }

    # --- reschedules -------------------------------------------------------------------

    def build_instances(self, request: msgs.RescheduleBuild) -> Outcome:
        record = inst.get(self.engine, request.instance_uuid)
        if (record is None or record.vm_state is not inst.VmState.BUILDING
                or record.task_state is not inst.TaskState.RESCHEDULING or record.num_attempts != request.attempt):
            LOG.info("reschedule of %s (attempt %d) is not current any more; dropped", request.instance_uuid,
                     request.attempt)
            return Outcome(instance_uuid=request.instance_uuid, result="stale", attempt=request.attempt)
        self.recent_failures.failed(request.failed.host if request.failed else None)
        return self.reschedule(record, request.alternates)

    def reschedule(self, record: inst.InstanceRecord, alternates: tuple[Selection, ...]) -> Outcome:
        outcome = self._reschedule(record, alternates)
        metrics.observe_reschedule(self.wiring.name, outcome.result)
        return outcome

    def _reschedule(self, record: inst.InstanceRecord, alternates: tuple[Selection, ...]) -> Outcome:
        uuid, attempt = record.uuid, record.num_attempts
        adopted, alternates = self._settle_holdings(record, alternates)
        if adopted is not None:
            next_host = NextHost(adopted, alternates, 0)
        else:
            if attempt >= self.settings.max_attempts:
                return self._exhausted(record, f"{attempt} of max_attempts={self.settings.max_attempts} "
                                               "builds were tried")
            try:
                next_host = claim_next_alternate(
                    self.client, uuid, alternates, project_id=record.request.project_id,
                    user_id=record.request.user_id, consumer_type=record.request.consumer_type,
                    avoid=self.recent_failures.hosts())
            except ConsumerHoldsAllocations:
                # Another handler of this reschedule claimed first: take its claim.
                adopted, alternates = self._settle_holdings(record, alternates, delete_stale=False)
                if adopted is None:
                    return Outcome(instance_uuid=uuid, result="raced", attempt=attempt)
                next_host = NextHost(adopted, alternates, 0)
            if next_host.exhausted:
                detail = ("no alternate hosts were left" if not alternates else
                          f"none of the {len(alternates)} alternate host(s) could be claimed")
                return self._exhausted(record, detail, refused=next_host.refused)
        chosen = next_host.selection
        assert chosen is not None
        if not inst.advance(self.engine, uuid, attempt=attempt, selection=chosen, remaining=next_host.remaining,
                            hosts_tried=record.hosts_tried):
            now = inst.get(self.engine, uuid)
            if now is not None and now.num_attempts == attempt + 1 and now.compute_node_uuid == chosen.compute_node_uuid:
                return Outcome(instance_uuid=uuid, result="raced", host=chosen.service_host, attempt=attempt + 1)
            # Deleted (or failed) meanwhile: our claim must not outlive it.
            self._unclaim(uuid)
            return Outcome(instance_uuid=uuid, result="stale", attempt=attempt)
        build = msgs.BuildInstance(instance=record.spec, request=record.request, selection=chosen,
                                   alternates=next_host.remaining, attempt=attempt + 1)
        try:
            self.computes.build_and_run_instance(chosen.service_host, build)
        except Exception as exc:  # noqa: BLE001 - recorded already; the sweep casts it again
            LOG.error("could not cast the build of %s to %s: %s", uuid, chosen.service_host, exc)
        LOG.info("instance %s rescheduled to %s (%s), attempt %d (%d alternate(s) refused)", uuid,
                 chosen.service_host, chosen.nodename, attempt + 1, next_host.refused)
        return Outcome(instance_uuid=uuid, result="cast", host=chosen.service_host, attempt=attempt + 1,
                       refused=next_host.refused, deferred=next_host.deferred)

    def _settle_holdings(self, record: inst.InstanceRecord, alternates: tuple[Selection, ...], *,
                         delete_stale: bool = True) -> tuple[Selection | None, tuple[Selection, ...]]:
        """(an alternate the instance already holds, the alternates after it),
        or (None, alternates) once it holds nothing."""
        held = self.client.get_allocations(record.uuid).as_resources()
        if not held:
            return None, alternates
        for i, alt in enumerate(alternates):
            if alt.allocation_request is not None and alt.allocation_request.as_resources() == held:
                return msgspec.structs.replace(alt, claimed=True), alternates[i + 1:]
        if delete_stale:
            LOG.warning("instance %s still holds %s after its build failed; deleting it before rescheduling",
                        record.uuid, held)
            claims.unclaim(self.client, record.uuid)
        return None, alternates

    def _exhausted(self, record: inst.InstanceRecord, detail: str, *, refused: int = 0) -> Outcome:
        details = f"{detail}; last failure: {record.last_failure or 'unknown'}"
        fault = inst.Fault(code=inst.FAULT_CODE, message=EXHAUSTED, details=details)
        if self._fail(record, (inst.TaskState.RESCHEDULING,), fault):
            LOG.warning("instance %s is in %s: %s (%s)", record.uuid,
                        "SHELVED_OFFLOADED" if record.request.unshelve else "ERROR", EXHAUSTED, details)
            return Outcome(instance_uuid=record.uuid, result="error", attempt=record.num_attempts, refused=refused)
        return Outcome(instance_uuid=record.uuid, result="stale", attempt=record.num_attempts, refused=refused)

    def _fail(self, record: inst.InstanceRecord, from_states: tuple[inst.TaskState, ...], fault: inst.Fault, *,
              host: str | None = None) -> bool:
        """End a build for good: ERROR, or for an unshelve shelved_offloaded
        again (``lifecycle_states.fail_unshelve``), holding nothing either way.
        ``host``: the attempt on it was lost while it still held its claim."""
        if record.request.unshelve:
            return states.fail_unshelve(self.engine, record.uuid, attempt=record.num_attempts,
                                        from_states=from_states, fault=fault, host=host,
                                        unclaim=lambda: self._unclaim(record.uuid))
        if not inst.fail_build(self.engine, record.uuid, attempt=record.num_attempts, from_states=from_states,
                               fault=fault, host=host):
            return False
        if host is not None:
            self._unclaim(record.uuid)
        return True

    def _unclaim(self, uuid: str) -> bool:
        try:
            claims.unclaim(self.client, uuid)
            return True
        except PlacementError as exc:
            LOG.error("could not delete the allocations of %s: %s (left to the audit)", uuid, exc)
            return False

    # --- a failed attempt the compute cannot report ------------------------------------

    def fail_attempt(self, record: inst.InstanceRecord, reason: str) -> Outcome | None:
        """The build attempt on ``record.host`` is lost (the compute is down or
        never took it): hand it on as the compute would have."""
        from_states = (inst.TaskState.SCHEDULING, inst.TaskState.SPAWNING)
        if not record.request.retry:
            fault = inst.Fault(code=inst.FAULT_CODE, message=f"Build of instance {record.uuid} failed: {reason}"[:255],
                               details=reason, host=record.host)
            if self._fail(record, from_states, fault, host=record.host):
                self._count_failure(record)
                return Outcome(instance_uuid=record.uuid, result="error", attempt=record.num_attempts)
            return None
        if not inst.begin_reschedule(self.engine, record.uuid, host=record.host or "", attempt=record.num_attempts,
                                     reason=reason, from_states=from_states):
            return None
        self._count_failure(record)
        if not self._unclaim(record.uuid):
            return None  # the next sweep finds it in rescheduling and settles the allocation
        current = inst.get(self.engine, record.uuid)
        if current is None or current.task_state is not inst.TaskState.RESCHEDULING:
            return None
        return self.reschedule(current, current.alternates)

    def _count_failure(self, record: inst.InstanceRecord) -> None:
        metrics.observe_build_failure(self.wiring.name)
        self.recent_failures.failed(record.host)
        if record.selection is not None:
            services.record_build(self.engine, record.selection.compute_node_uuid, succeeded=False)

    # --- deletes ---------------------------------------------------------------------

    def delete_instance(self, uuid: str) -> str:
        """Delete through the compute when it is up; otherwise here: free the
        allocation and mark the record deleted (the compute destroys a guest
        it still has when it starts again)."""
        before = inst.begin_delete(self.engine, uuid)
        if before is None:
            return "nothing"
        if before.host is not None and self._up(before.host):
            self.computes.terminate_instance(before.host, uuid)
            return "compute"
        self.local_delete(uuid)
        return "local"

    def local_delete(self, uuid: str) -> bool:
        if inst.begin_delete(self.engine, uuid) is None:
            return False
        if not self._unclaim(uuid):
            return False
        try:
            # A move in progress holds the source under the migration's uuid.
            free_migrations(self.engine, self.client, uuid)
        except PlacementError as exc:
            LOG.error("delete of %s: could not free its migration's allocations (%s); the sweep retries", uuid, exc)
            return False
        inst.finish_delete(self.engine, uuid)
        LOG.info("instance %s deleted by the cell conductor (its compute is down)", uuid)
        return True

    def _up(self, host: str) -> bool:
        return services.is_up(self.engine, host, down_time_s=self.settings.service_down_time_s)

    # --- the sweep -------------------------------------------------------------------

    def sweep(self) -> SweepReport:
        with self._sweep_lock:
            return self._sweep()

    def _sweep(self) -> SweepReport:
        s = self.settings
        now = inst.utcnow()
        up: dict[str, bool] = {}

        def is_up(host: str | None) -> bool:
            if host is None:
                return False
            if host not in up:
                up[host] = self._up(host)
            return up[host]

        recast, failed, rescheduled, deletes_recast, deleted = [], [], [], [], []

        def scheduling(record: inst.InstanceRecord) -> None:
            if is_up(record.host):
                if inst.touch(self.engine, record.uuid, attempt=record.num_attempts,
                              task_state=inst.TaskState.SCHEDULING):
                    self.computes.build_and_run_instance(record.host, build_message(record))  # type: ignore[arg-type]
                    recast.append(record.uuid)
            elif self.fail_attempt(record, f"compute {record.host} is down and never took the build") is not None:
                failed.append(record.uuid)

        def spawning(record: inst.InstanceRecord) -> None:
            if not is_up(record.host):
                reason = f"compute {record.host} went down during the build"
            elif s.build_timeout_s and inst.age(record, now) > timedelta(seconds=s.build_timeout_s):
                reason = f"the build on {record.host} took longer than {s.build_timeout_s:g} s"
            else:
                return
            if self.fail_attempt(record, reason) is not None:
                failed.append(record.uuid)

        def rescheduling(record: inst.InstanceRecord) -> None:
            if self.reschedule(record, record.alternates).result in ("cast", "error"):
                rescheduled.append(record.uuid)

        def deleting(record: inst.InstanceRecord) -> None:
            if is_up(record.host):
                if inst.touch(self.engine, record.uuid, attempt=record.num_attempts,
                              task_state=inst.TaskState.DELETING):
                    self.computes.terminate_instance(record.host, record.uuid)  # type: ignore[arg-type]
                    deletes_recast.append(record.uuid)
            elif self.local_delete(record.uuid):
                deleted.append(record.uuid)

        for state, overdue, handle in (
                (inst.TaskState.SCHEDULING, s.cast_timeout_s, scheduling),
                (inst.TaskState.SPAWNING, None, spawning),
                (inst.TaskState.RESCHEDULING, s.reschedule_timeout_s, rescheduling),
                (inst.TaskState.DELETING, s.delete_timeout_s, deleting)):
            older_than = None if overdue is None else now - timedelta(seconds=overdue)
            for record in inst.in_task_state(self.engine, state, older_than=older_than):
                try:
                    handle(record)
                except Exception:  # noqa: BLE001 - one instance must not stop the sweep of the others
                    LOG.exception("sweep of %s (%s) failed; trying again next time", record.uuid, state.value)
        report = SweepReport(recast=tuple(recast), failed_attempts=tuple(failed), rescheduled=tuple(rescheduled),
                             deletes_recast=tuple(deletes_recast), deleted=tuple(deleted))
        if any(msgspec.structs.astuple(report)):
            LOG.warning("cell %s sweep: %s", self.wiring.name, report)
        return report
