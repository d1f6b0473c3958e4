"""Turn a finished ``Run`` and Placement's end state into a ``DesignResult``."""
from __future__ import annotations

from collections import Counter, defaultdict

from billeting.scheduler.nova import Flavor, resource_groups
from billeting.sim.checker import PlacementState, host_of
from billeting.sim.engine import Run
from billeting.sim.results import (DesignResult, Distribution, FillPoint, GroupRule, HostCapacity, Placement,
                                   ProviderCapacity, Violation)

SAMPLE = 2000
LEVELS = ("host", "rack", "row", "room", "cell")


def distribution(values: list[float]) -> Distribution:
    if not values:
        return Distribution(count=0, p50=0.0, p90=0.0, p99=0.0, mean=0.0, max=0.0, sample=[])
    ordered = sorted(values)
    n = len(ordered)

    def pct(q: float) -> float:
        return ordered[min(n - 1, int(round(q * (n - 1))))]
    step = max(1, n // SAMPLE)
    return Distribution(count=n, p50=pct(0.5), p90=pct(0.9), p99=pct(0.99), mean=sum(ordered) / n,
                        max=ordered[-1], sample=[round(v, 4) for v in values[::step][:SAMPLE]])


def _reason(text: str) -> str:
    return text if len(text) <= 80 else text[:77] + "..."


def flavor_demand(flavor) -> dict[str, int]:
    groups, _ = resource_groups(Flavor(vcpus=flavor.vcpus, memory_mb=flavor.memory_mb, root_gb=flavor.root_gb,
                                       ephemeral_gb=flavor.ephemeral_gb, extra_specs=flavor.extra_specs))
    demand: Counter[str] = Counter()
    for g in groups:
        demand.update(g.resources)
    return dict(demand)


def flavor_traits(flavor) -> tuple[frozenset[str], frozenset[str]]:
    """Required and forbidden traits of a scenario flavor, every request
    group's together (as the checker judges them)."""
    required = set(flavor.image_traits)
    forbidden = set()
    for key, value in flavor.extra_specs.items():
        if key.startswith("trait") and ":" in key:
            name = key.split(":", 1)[1]
            if value == "required":
                required.add(name)
            elif value == "forbidden":
                forbidden.add(name)
    return frozenset(required), frozenset(forbidden)


def flavor_pieces(flavor) -> list[dict[str, int]]:
    """What must come from a single provider: each class of the unnumbered
    request group on its own (Placement may take them from different
    providers of the tree), each numbered group whole."""
    groups, _ = resource_groups(Flavor(vcpus=flavor.vcpus, memory_mb=flavor.memory_mb, root_gb=flavor.root_gb,
                                       ephemeral_gb=flavor.ephemeral_gb, extra_specs=flavor.extra_specs))
    out: list[dict[str, int]] = []
    for g in groups:
        if g.suffix:
            out.append(dict(g.resources))
        else:
            out += [{rc: n} for rc, n in g.resources.items()]
    return [p for p in out if p]


def placements(run: Run, state: PlacementState) -> list[Placement]:
    out = []
    fleet = run.fleet
    pieces: dict[str, list[dict[str, int]]] = {}
    for consumer, held in sorted(state.consumers.items()):
        host = host_of(state, held)
        if host is None or host not in fleet.by_uuid:
            continue
        res: Counter[str] = Counter()
        alloc: dict[str, dict[str, int]] = {}
        for rp, amounts in held.items():
            if rp not in fleet.sharing:
                res.update(amounts)
                alloc[state.providers[rp].name] = dict(amounts)
        name = fleet.by_uuid[host].name
        if list(alloc) == [name]:
            alloc = {}   # all on the root: what an empty record means, and 1/3 of the file
        inst = run.instances.get(consumer)
        if inst is None:   # prefilled: written whole onto the root
            out.append(Placement(instance=consumer, host=name, resources=dict(res), allocations=alloc))
            continue
        f = inst.arrival.flavor
        if f.name not in pieces:
            pieces[f.name] = flavor_pieces(f)
        req, forb = flavor_traits(f)
        shared = {rc for rp in held if rp in fleet.sharing for rc in held[rp]}
        mine = [{rc: n for rc, n in p.items() if rc not in shared} for p in pieces[f.name]]
        mine = [p for p in mine if p]
        if all(len(p) == 1 for p in mine) and Counter({rc: n for p in mine for rc, n in p.items()}) == res:
            mine = []    # one piece per class of what it holds: what an empty list means
        out.append(Placement(instance=consumer, host=name, resources=dict(res), pieces=mine, allocations=alloc,
                             required=sorted(req), forbidden=sorted(forb), group=inst.group))
    return out


def host_capacities(run: Run, state: PlacementState) -> list[HostCapacity]:
    """Every host with its provider tree (capacity and traits per provider)
    and failure domains, read from Placement's end state."""
    out = []
    for h in run.fleet.hosts:
        provs = []
        for rp in h.providers:
            p = state.providers.get(rp)
            if p is None:
                continue
            cap = {rc: int((inv.total - inv.reserved) * inv.allocation_ratio) for rc, inv in p.inventories.items()}
            provs.append(ProviderCapacity(name=p.name, capacity=cap, traits=sorted(p.traits)))
        if len(provs) == 1 and not provs[0].traits and provs[0].capacity == h.capacity:
            provs = []   # a lone root without traits: what an empty tree means
        out.append(HostCapacity(host=h.name, cell=h.cell, capacity=dict(h.capacity), providers=provs,
                                domains={k: v for k, v in h.domains.items() if k != "cell"}))
    return out


def stranded(run: Run, placed: list[Placement]) -> dict[str, float]:
    """Share of each class left free on hosts where no flavor of the mix fits any more."""
    used: dict[str, Counter[str]] = defaultdict(Counter)
    for p in placed:
        used[p.host].update(p.resources)
    demands = [flavor_demand(f) for f in run.s.flavors]
    total: Counter[str] = Counter()
    lost: Counter[str] = Counter()
    for h in run.fleet.hosts:
        cap = h.capacity
        total.update(cap)
        free = {rc: cap[rc] - used[h.name].get(rc, 0) for rc in cap}
        usable = [d for d in demands if all(rc in cap or (rc == "DISK_GB" and h.shape.shared_disk) for rc in d)]
        if not usable:
            continue
        fits = any(all(free.get(rc, 1 << 60) >= n for rc, n in d.items() if rc in cap) for d in usable)
        if not fits:
            lost.update({rc: n for rc, n in free.items() if n > 0})
    return {rc: round(lost[rc] / total[rc], 4) for rc in sorted(total) if total[rc]}


def spread(run: Run) -> dict[str, float]:
    """Per level: mean over anti-affinity groups of distinct domains / members alive."""
    ratios: dict[str, list[float]] = defaultdict(list)
    for g in run.groups.values():
        if not g.policy.endswith("anti-affinity"):
            continue
        hosts = [run.instances[m].host for m in g.members
                 if run.instances[m].state == "active" and run.instances[m].host]
        if len(hosts) < 2:
            continue
        for level in LEVELS:
            doms = {h if level == "host" else run.fleet.by_uuid[h].domains[level] for h in hosts}
            ratios[level].append(len(doms) / len(hosts))
    return {level: round(sum(v) / len(v), 4) for level, v in ratios.items()}


def design_result(run: Run, state: PlacementState, violations: list[Violation]) -> DesignResult:
    insts = list(run.instances.values())
    succeeded = [i for i in insts if i.t_active is not None]
    errored = [i for i in insts if i.state == "error"]
    reasons = Counter(_reason(i.reason or "unknown") for i in errored)
    placed = placements(run, state)
    builds = len(insts)
    d = run.d
    return DesignResult(
        name=d.name, design=d.design, knobs=d.knobs(),
        requested=builds, succeeded=len(succeeded), errored=len(errored),
        error_reasons=dict(reasons.most_common()),
        attempts_per_build=distribution([float(i.attempts) for i in insts if i.attempts]),
        retries=sum(i.attempts - 1 for i in insts if i.attempts),
        never_built=sum(1 for i in insts if not i.attempts),
        upcalls=run.upcalls, claim_conflicts=run.client.conflicts,
        placement_requests=run.client.requests,
        placement_requests_per_build=round(run.client.requests / builds, 3) if builds else 0.0,
        scheduler_latency_ms=distribution(run.latencies_ms),
        time_to_active_s=distribution([i.t_active - i.arrival.at_s for i in succeeded]),
        violations=violations,
        fill=[FillPoint(t_s=round(t, 3), active=a, hosts_in_use=h, vcpu_fill=round(v, 4), memory_fill=round(m, 4))
              for t, a, h, v, m in run.fill],
        packing=None,
        stranded=stranded(run, placed),
        anti_affinity_spread=spread(run),
        wall_s=round(run.wall_s, 3),
        hosts=host_capacities(run, state),
        placements=placed,
        groups={g.uuid: GroupRule(policy=g.policy, scope=g.scope, max_server_per_host=g.max_server_per_host)
                for g in run.groups.values()},
    )
