"""One design's run: the workload flows through the real scheduler and the
real Placement on the virtual clock, and everything that happens is recorded.

``Run`` owns the moving parts (clock, schedulers, catalog, the simulated
computes) and the primitives every design uses: ask the scheduler, cast,
build on a compute, finish an instance. The designs themselves — who claims
and how a failed build is retried — are in ``designs``.
"""
from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import msgspec

from billeting.scheduler.core import Scheduler
from billeting.scheduler.errors import NoValidHost, SchedulerError
from billeting.scheduler.nova import Flavor, Image, request_from_nova
from billeting.scheduler.request import ScheduleRequest, ServerGroup
from billeting.scheduler.selection import Selection
from billeting.scheduler.settings import SchedulerSettings
from billeting.sim.clock import Clock, Semaphore
from billeting.sim import outages
from billeting.sim.fleet import PROJECT, USER, FleetMap, sim_uuid
from billeting.sim.host_health import HostHealth
from billeting.sim.prefill import Prefilled
from billeting.sim.scenario import DesignSpec, Scenario
from billeting.sim.simclient import SimPlacement
from billeting.sim.workload import Arrival

LOG = logging.getLogger(__name__)

NO_VALID_HOST = "No valid host was found"
MAX_RETRIES = "Exceeded maximum number of retries"
CLAIMS_LOST = "No valid host: every ranked host's claim was lost"
_LIVE = frozenset({"active", "building"})   # states the fill-over-time count includes


@dataclass(slots=True)
class Instance:
    uuid: str
    arrival: Arrival
    key: str                         # "request/k": the draws of this instance, identical across designs
    lifetime: float | None
    group: str | None = None
    state: str = "pending"           # pending | building | active | error | deleted
    host: str | None = None          # host uuid holding its claim
    allocation: dict[str, dict[str, int]] | None = None
    attempts: int = 0
    t_active: float | None = None
    reason: str | None = None
    tried: list[str] = field(default_factory=list)   # service hosts tried (legacy's ignore list)


@dataclass(slots=True)
class GroupState:
    uuid: str
    key: str
    policy: str
    scope: str
    max_server_per_host: int
    members: list[str] = field(default_factory=list)


class Run:
    def __init__(self, scenario: Scenario, design: DesignSpec, client, fleet: FleetMap,
                 prefilled: dict[str, Prefilled], arrivals: list[Arrival],
                 progress: Callable[[int], None] | None = None) -> None:
        self.s = scenario
        self.d = design
        self.fleet = fleet
        self.clock = Clock()
        t = scenario.timing
        self.client = SimPlacement(client, self.clock, latency_s=t.placement_latency_ms / 1000,
                                   think_s=t.scheduler_think_ms / 1000)
        # Deletes of instances that end their life: not part of any build's cost.
        self.uncounted = SimPlacement(client, self.clock, latency_s=t.placement_latency_ms / 1000)
        self.uncounted.counting = False
        self.rpc_s = t.rpc_latency_ms / 1000
        self.catalog = fleet.catalog()
        sign = 1.0 if design.weigher == "spread" else -1.0
        settings = SchedulerSettings(max_placement_results=scenario.candidates_limit,
                                     host_subset_size=design.host_subset_size,
                                     alternates_from=design.effective_alternates_from(),
                                     candidate_sample=design.candidate_sample,
                                     topology_levels=fleet.directory.levels,
                                     # Requests here are greenlets on one thread: one waiting
                                     # for another's batch would block the thread, and with it
                                     # the clock that must resume the batch's leader.
                                     coalesce_requests=False)
        settings = settings.with_multipliers(ram_weight_multiplier=sign, cpu_weight_multiplier=sign,
                                             disk_weight_multiplier=sign, **design.multipliers)
        self.schedulers = [Scheduler(self.client, self.catalog, fleet.directory, settings,
                                     rng=random.Random(f"{scenario.seed}/scheduler/{i}"))
                           for i in range(design.schedulers)]
        self._next_scheduler = 0
        self.arrivals = arrivals
        self.progress = progress
        self.instances: dict[str, Instance] = {}
        self.groups: dict[str, GroupState] = {}
        self.prefilled = prefilled
        # Usage by host, from the simulator's own bookkeeping (fill over time).
        self.usage: dict[str, dict[str, int]] = {h.uuid: {} for h in fleet.hosts}
        self.consumers_on: dict[str, int] = {h.uuid: 0 for h in fleet.hosts}
        # Running totals of the above and of instance states, kept as they
        # change: summing them at every fill sample made a 50,000-request
        # run quadratic.
        self._hosts_in_use = 0
        self._used_total: dict[str, int] = {}
        self._live = len(prefilled)          # building or active, prefill included
        self._group_of: dict[str, GroupState] = {}   # group uuid -> its state
        for held in prefilled.values():
            self._add_usage(held.host, held.allocation)
        rng = random.Random(f"{scenario.seed}/bad-hosts")
        self.bad_hosts = {h.uuid for h in rng.sample(fleet.hosts, scenario.failures.bad_hosts)}
        self.down: set[str] = set()
        self.sharing_down: set[str] = set()
        self._outages_of: dict[str, int] = {}   # host -> outages it is in now
        self.health = HostHealth(self)
        # Metrics.
        self.upcalls = 0
        self.scheduler_calls = 0
        self.latencies_ms: list[float] = []
        self.fill: list[tuple[float, int, int, float, float]] = []
        self.done = 0
        self.wall_s = 0.0
        self.capacity_vcpu = sum(h.capacity.get("VCPU", 0) for h in fleet.hosts)
        self.capacity_ram = sum(h.capacity.get("MEMORY_MB", 0) for h in fleet.hosts)

    # --- the run ---------------------------------------------------------------------

    def run(self) -> None:
        from billeting.sim import designs

        self.flow = designs.FLOWS[self.d.design]
        started = time.perf_counter()
        # Placement's limited candidate scan starts at a random provider id
        # (module ``random``): seed it for the run so a seed reproduces the
        # run exactly, and leave the process's generator as it was after.
        saved = random.getstate()
        random.seed(f"{self.s.seed}/placement/{self.d.name}")
        self.sem = Semaphore(self.clock, self.s.arrivals.max_in_flight)
        for outage in outages.resolve(self.s.failures.down, self.fleet):
            self.clock.call_at(outage.at_s, self._went_down, outage, True)
            if outage.up_at_s is not None:
                self.clock.call_at(outage.up_at_s, self._went_down, outage, False)
        self.clock.call_at(0.0, self._sample)
        self.clock.call_at(0.0, lambda: self.clock.spawn(self._feed))
        if not self.arrivals:
            self.clock.call_at(0.0, self.clock.stop)
        try:
            self.clock.run()
        finally:
            random.setstate(saved)
        self._sample()
        self.wall_s = time.perf_counter() - started

    def _feed(self) -> None:
        for arrival in self.arrivals:
            if arrival.at_s > self.clock.now:
                self.clock.sleep(arrival.at_s - self.clock.now)
            self.sem.acquire()
            self.clock.spawn(self._handle, arrival)

    def _handle(self, arrival: Arrival) -> None:
        try:
            insts = self._admit(arrival)
            self.flow(self, insts, self._request(arrival, insts))
        finally:
            self.sem.release()
            self.done += 1
            if self.progress is not None:
                self.progress(1)
            if self.done == len(self.arrivals):
                self.clock.stop()

    def _admit(self, arrival: Arrival) -> list[Instance]:
        group = None
        if arrival.group is not None:
            g = arrival.group
            group = self.groups.get(g.key)
            if group is None:
                group = self.groups[g.key] = GroupState(uuid=sim_uuid(self.fleet.prefix, "group", g.key), key=g.key,
                                                        policy=g.spec.policy, scope=g.spec.scope,
                                                        max_server_per_host=g.spec.max_server_per_host)
                self._group_of[group.uuid] = group
        insts = []
        for k in range(arrival.count):
            key = f"{arrival.index}/{k}"
            inst = Instance(uuid=sim_uuid(self.fleet.prefix, "instance", key), arrival=arrival, key=key,
                            lifetime=arrival.lifetimes[k], group=group.uuid if group else None)
            self.instances[inst.uuid] = inst
            insts.append(inst)
        return insts

    def _server_group(self, insts: list[Instance]) -> ServerGroup | None:
        if insts[0].group is None:
            return None
        g = self._group_of[insts[0].group]
        mine = {i.uuid for i in insts}
        return ServerGroup(uuid=g.uuid, policy=g.policy, scope=g.scope,  # type: ignore[arg-type]
                           max_server_per_host=g.max_server_per_host,
                           members=tuple(m for m in g.members if m not in mine))

    def _request(self, arrival: Arrival, insts: list[Instance], ignore_hosts: tuple[str, ...] = ()) -> ScheduleRequest:
        f = arrival.flavor
        group = self._server_group(insts)
        if group is not None:
            g = self._group_of[group.uuid]
            for i in insts:
                if i.uuid not in g.members:
                    g.members.append(i.uuid)
        image = Image(properties={f"trait:{t}": "required" for t in f.image_traits}) if f.image_traits else None
        return request_from_nova(Flavor(vcpus=f.vcpus, memory_mb=f.memory_mb, root_gb=f.root_gb,
                                        ephemeral_gb=f.ephemeral_gb, name=f.name, extra_specs=f.extra_specs),
                                 image, instance_uuids=[i.uuid for i in insts], project_id=PROJECT, user_id=USER,
                                 server_group=group, ignore_hosts=ignore_hosts)

    def request_for(self, insts: list[Instance], ignore_hosts: tuple[str, ...] = ()) -> ScheduleRequest:
        return self._request(insts[0].arrival, insts, ignore_hosts)

    # --- primitives the designs use -----------------------------------------------------

    def select(self, request: ScheduleRequest, alternates: int, claim: bool) -> list[list[Selection]] | str:
        """Ask a scheduler (after an RPC hop). The selections, or why none."""
        self.clock.sleep(self.rpc_s)
        scheduler = self.schedulers[self._next_scheduler]
        self._next_scheduler = (self._next_scheduler + 1) % len(self.schedulers)
        task = self.clock_task()
        suspended = task.suspended_s
        started = time.perf_counter()
        try:
            return scheduler.select_destinations(request, alternates, claim=claim)
        except NoValidHost:
            return NO_VALID_HOST
        except SchedulerError as exc:
            return f"Scheduler error: {exc.message}"
        finally:
            real = time.perf_counter() - started - (task.suspended_s - suspended)
            self.latencies_ms.append(real * 1000)
            self.scheduler_calls += 1
            self.clock.sleep(self.rpc_s)   # the answer travels back

    def clock_task(self):
        from greenlet import getcurrent
        return getcurrent()

    def claimed(self, inst: Instance, sel: Selection) -> None:
        """``inst`` now holds ``sel``'s allocation in Placement."""
        alloc = {rp: dict(part.resources) for rp, part in sel.allocation_request.allocations.items()}
        inst.host, inst.allocation = sel.compute_node_uuid, alloc
        self.catalog.place(inst.uuid, sel.compute_node_uuid)
        self._add_usage(sel.compute_node_uuid, alloc)

    def unclaim(self, inst: Instance) -> None:
        """Force-delete the instance's allocation (as the failed compute does)."""
        self.client.delete_allocations(inst.uuid)
        self.released(inst)

    def released(self, inst: Instance) -> None:
        if inst.host is not None and inst.allocation is not None:
            self._add_usage(inst.host, inst.allocation, -1)
        inst.host, inst.allocation = None, None
        self.catalog.place(inst.uuid, None)

    def _add_usage(self, host: str, alloc: dict[str, dict[str, int]], sign: int = 1) -> None:
        use = self.usage.get(host)
        if use is None:
            return
        total = self._used_total
        for rp, res in alloc.items():
            if rp in self.fleet.sharing:
                continue
            for rc, n in res.items():
                use[rc] = use.get(rc, 0) + sign * n
                total[rc] = total.get(rc, 0) + sign * n
        before = self.consumers_on[host]
        self.consumers_on[host] = before + sign
        if (before > 0) != (before + sign > 0):
            self._hosts_in_use += sign

    def _to(self, inst: Instance, state: str) -> None:
        """Move ``inst`` to ``state``, keeping the count of live instances."""
        was = inst.state in _LIVE
        inst.state = state
        if was != (state in _LIVE):
            self._live += 1 if not was else -1

    def cast(self) -> None:
        self.clock.sleep(self.rpc_s)

    def build(self, inst: Instance, host_uuid: str) -> str | None:
        """Build on the compute; None on success, else why it failed (the
        compute then reschedules). Counts one attempt."""
        inst.attempts += 1
        self._to(inst, "building")
        rng = random.Random(f"{self.s.seed}/build/{inst.key}/{inst.attempts}")
        t = self.s.timing
        fail_draw = rng.random()
        mean_s = t.build_s_by_kind.get(self.fleet.by_uuid[host_uuid].shape.kind, t.build_s)
        duration = mean_s * rng.uniform(1 - t.build_jitter, 1 + t.build_jitter)
        if host_uuid in self.down:
            return "compute is down"
        late = self._late_group_check(inst, host_uuid)
        if late:
            return late
        self.clock.sleep(duration)
        if host_uuid in self.down:
            failed = "compute went down during the build"
        elif inst.allocation is not None and not self.sharing_down.isdisjoint(inst.allocation):
            failed = "build failed (its shared storage is down)"
        elif host_uuid in self.bad_hosts:
            failed = "build failed (bad host)"
        elif fail_draw * 100 < self.s.failures.build_failure_pct:
            failed = "build failed (injected)"
        else:
            failed = None
        self._count_build(host_uuid, failed is None)
        return failed

    def would_fail(self, host_uuid: str) -> bool:
        """Would a build there fail now for a reason of the host's own (a health check's answer)?"""
        if host_uuid in self.down or host_uuid in self.bad_hosts:
            return True
        host = self.fleet.by_uuid[host_uuid]
        if not host.shape.shared_disk or not self.sharing_down:
            return False
        # Its disk comes from its cell's sharing providers: it fails when none is up.
        mine = {sim_uuid(self.fleet.prefix, "sharing", sp.name) for sp in self.s.fleet.sharing
                if f"cell{sp.cell}" == host.cell}
        return mine <= self.sharing_down

    def _count_build(self, host_uuid: str, ok: bool) -> None:
        self.health.build_finished(host_uuid, ok)
        rec = self.catalog.records([host_uuid]).get(host_uuid)
        if rec is None:
            return
        n = 0 if ok else rec.failed_builds + 1
        if n != rec.failed_builds:
            self.catalog.put(msgspec.structs.replace(rec, failed_builds=n))

    def _late_group_check(self, inst: Instance, host_uuid: str) -> str | None:
        """The compute's late check of a hard group policy (Nova does it too):
        concurrent requests of one group can both pass the scheduler."""
        if inst.group is None:
            return None
        g = self._group_of[inst.group]
        if g.policy not in ("affinity", "anti-affinity"):
            return None
        level = g.scope

        def dom(h: str) -> str:
            return h if level == "host" else self.fleet.by_uuid[h].domains[level]

        mine = dom(host_uuid)
        others = [self.instances[m].host for m in g.members
                  if m != inst.uuid and m in self.instances and self.instances[m].host is not None]
        if g.policy == "anti-affinity":
            if sum(1 for h in others if dom(h) == mine) + 1 > g.max_server_per_host:
                return "late server group check: anti-affinity violated"
        elif others and any(dom(h) != mine for h in others):
            return "late server group check: affinity violated"
        return None

    def active(self, inst: Instance) -> None:
        self._to(inst, "active")
        inst.t_active = self.clock.now
        if inst.lifetime is not None:
            self.clock.call_later(inst.lifetime, lambda: self.clock.spawn(self._depart, inst))

    def _depart(self, inst: Instance) -> None:
        if inst.state != "active":
            return
        self.uncounted.delete_allocations(inst.uuid)
        self.released(inst)
        self._to(inst, "deleted")
        self._leave_group(inst)

    def error(self, inst: Instance, reason: str) -> None:
        self._to(inst, "error")
        inst.reason = reason
        self._leave_group(inst)

    def _leave_group(self, inst: Instance) -> None:
        if inst.group is None:
            return
        g = self._group_of[inst.group]
        if inst.uuid in g.members:
            g.members.remove(inst.uuid)

    def parallel(self, fn: Callable, items: list) -> None:
        """Run ``fn(item)`` for every item concurrently; return when all have."""
        if len(items) == 1:
            fn(items[0])
            return
        me = self.clock_task()
        left = [len(items)]

        def one(item) -> None:
            try:
                fn(item)
            finally:
                left[0] -= 1
                if left[0] == 0:
                    self.clock.wake(me)
        for item in items:
            self.clock.spawn(one, item)
        self.clock.park()

    # --- observation ----------------------------------------------------------------

    def _went_down(self, outage: outages.Outage, down: bool) -> None:
        """An outage begins (``down``) or ends."""
        if outage.kind == "sharing":
            (self.sharing_down.update if down else self.sharing_down.difference_update)(outage.uuids)
            return
        for host_uuid in outage.uuids:
            # A host in a rack that is down and named on its own as well is up
            # again only when both outages are over.
            n = self._outages_of.get(host_uuid, 0) + (1 if down else -1)
            self._outages_of[host_uuid] = n
            (self.down.add if n > 0 else self.down.discard)(host_uuid)
            rec = self.catalog.records([host_uuid]).get(host_uuid)
            if rec is not None:
                self.catalog.put(msgspec.structs.replace(rec, up=n <= 0))

    def _sample(self) -> None:
        active, in_use = self._live, self._hosts_in_use
        vcpu, ram = self._used_total.get("VCPU", 0), self._used_total.get("MEMORY_MB", 0)
        self.fill.append((self.clock.now, active, in_use, vcpu / self.capacity_vcpu if self.capacity_vcpu else 0.0,
                          ram / self.capacity_ram if self.capacity_ram else 0.0))
        if self.clock._loop is not None:
            self.clock.call_later(self.s.timing.fill_sample_s, self._sample)
