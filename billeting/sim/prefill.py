"""Start the fleet partly filled: long-lived instances of the scenario's
flavors, written straight into Placement before the run.

Every host kind is filled the way Placement itself would have placed the
flavor there: a flat host from its root; a NUMA host's VCPU and memory from
its NUMA children; a vGPU or SR-IOV flavor's numbered groups each from one
child holding all of its resources and traits (``group_policy = isolate``:
distinct children); a shared-disk host's DISK_GB, and any class only a
sharing pool of its has, from that pool; an Ironic node whole.

Each host is filled to its own target (``arrivals.prefill``, drawn in
+-``prefill_spread``) of every class of its tree: flavors that fit the host
kind are drawn at random and kept while every class they use stays within
the target, until five draws in a row do not fit. An Ironic node (one unit
of its class) is taken whole with the target as probability. A sharing
pool is filled to the fleet's target, whichever hosts draw from it.

Nothing here uses the scheduler's code: a scheduler bug must not shape the
state it is then measured on.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field

from billeting.placement_client.client import PlacementClient
from billeting.placement_client.model import AllocationWrite, ProviderResources, RequestGroup
from billeting.scheduler.nova import Flavor, Image, resource_groups
from billeting.sim.fleet import PROJECT, USER, FleetMap, Host, ProviderSpec, sim_uuid, tree_of
from billeting.sim.scenario import FlavorSpec, Scenario

# Draws in a row that did not fit before a host counts as full.
MISSES = 5
# Consumers per POST /allocations.
BATCH = 500


@dataclass(frozen=True, slots=True)
class Prefilled:
    """One prefill consumer: its host and what it holds, by provider."""
    host: str
    allocation: dict[str, dict[str, int]]


@dataclass(frozen=True, slots=True)
class _Shape:
    """A flavor as Placement sees it: its request groups and policy."""
    flavor: FlavorSpec
    groups: tuple[RequestGroup, ...]
    isolate: bool


@dataclass(slots=True)
class _Provider:
    spec: ProviderSpec
    free: dict[str, int] = field(default_factory=dict)


def _shape(f: FlavorSpec) -> _Shape:
    image = Image(properties={f"trait:{t}": "required" for t in f.image_traits}) if f.image_traits else None
    groups, policy = resource_groups(Flavor(vcpus=f.vcpus, memory_mb=f.memory_mb, root_gb=f.root_gb,
                                            ephemeral_gb=f.ephemeral_gb, name=f.name,
                                            extra_specs=f.extra_specs), image)
    return _Shape(f, groups, policy == "isolate")


def _traits_ok(group: RequestGroup, traits: frozenset[str]) -> bool:
    return all(any_of & traits for any_of in group.required) and not (group.forbidden & traits)


def _has_room(p: _Provider, want: dict[str, int]) -> bool:
    return all(p.free.get(rc, 0) >= n for rc, n in want.items())


def _place(shape: _Shape, tree: list[_Provider], pools: list[_Provider]) -> dict[str, dict[str, int]] | None:
    """Providers and amounts for one instance of ``shape`` on this host, or
    None when it does not fit. Conservative about traits: every provider a
    group takes from must carry the group's required traits."""
    taken: dict[str, dict[str, int]] = {}
    used_by_numbered: set[str] = set()

    def take(p: _Provider, want: dict[str, int]) -> None:
        mine = taken.setdefault(p.spec.uuid, {})
        for rc, n in want.items():
            mine[rc] = mine.get(rc, 0) + n
            p.free[rc] -= n

    def undo() -> None:
        by_uuid = {p.spec.uuid: p for p in (*tree, *pools)}
        for uuid, res in taken.items():
            for rc, n in res.items():
                by_uuid[uuid].free[rc] += n

    for group in shape.groups:
        if not group.resources:
            continue
        ok = [p for p in tree if _traits_ok(group, p.spec.traits)]
        if group.suffix:
            if shape.isolate:
                ok = [p for p in ok if p.spec.uuid not in used_by_numbered]
            one = next((p for p in ok if _has_room(p, group.resources)), None)
            if one is None:
                undo()
                return None
            take(one, group.resources)
            used_by_numbered.add(one.spec.uuid)
            continue
        # The unnumbered group: one provider of the tree when one holds it
        # all, else class by class from the tree, then from the host's pools.
        one = next((p for p in ok if _has_room(p, group.resources)), None)
        if one is not None:
            take(one, group.resources)
            continue
        ok += [p for p in pools if _traits_ok(group, p.spec.traits)]
        for rc, n in group.resources.items():
            src = next((p for p in ok if p.free.get(rc, 0) >= n), None)
            if src is None:
                undo()
                return None
            take(src, {rc: n})
    return taken


def _could_fit(shape: _Shape, tree: list[ProviderSpec], pools: list[ProviderSpec]) -> bool:
    """Would one instance fit on the empty host? (Which flavors a host kind draws from.)"""
    fresh = [_Provider(p, dict(p.capacity)) for p in tree]
    shared = [_Provider(p, dict(p.capacity)) for p in pools]
    return _place(shape, fresh, shared) is not None


def prefill(client: PlacementClient, scenario: Scenario, fleet: FleetMap) -> dict[str, Prefilled]:
    """Fill the fleet as the scenario says; consumer uuid -> what it holds."""
    target = scenario.arrivals.prefill
    if target <= 0:
        return {}
    shapes = [_shape(f) for f in scenario.flavors]
    rng = random.Random(f"{scenario.seed}/prefill")
    spread = scenario.arrivals.prefill_spread
    pools = {uuid: _Provider(spec, dict(spec.capacity)) for uuid, spec in fleet.pools.items()}
    # A pool is filled to the fleet's target, never beyond.
    pool_floor = {uuid: {rc: cap - int(target * cap) for rc, cap in p.spec.capacity.items()}
                  for uuid, p in pools.items()}
    eligible_of: dict[tuple[int, tuple[str, ...]], list[_Shape]] = {}
    placed: dict[str, Prefilled] = {}
    batch: dict[str, AllocationWrite] = {}
    for h in fleet.hosts:
        specs = tree_of(h, fleet.prefix)
        mine = [pools[u] for u in fleet.pools_of.get(h.uuid, ())]
        key = (id(h.shape), tuple(p.spec.uuid for p in mine))  # shapes live as long as the scenario
        eligible = eligible_of.get(key)
        if eligible is None:
            eligible = eligible_of[key] = [s for s in shapes if _could_fit(s, specs, [p.spec for p in mine])]
        if not eligible:
            continue
        goal = target + rng.uniform(-spread, spread) if spread else target
        tree = [_Provider(p, dict(p.capacity)) for p in specs]
        for n, one in enumerate(_fill(h, goal, eligible, tree, mine, pool_floor, rng)):
            consumer = sim_uuid(fleet.prefix, "prefill", h.name, n)
            batch[consumer] = AllocationWrite(
                allocations={rp: ProviderResources(resources=res) for rp, res in one.items()},
                project_id=PROJECT, user_id=USER, consumer_generation=None)
            placed[consumer] = Prefilled(h.uuid, one)
        if len(batch) >= BATCH:
            _flush(client, batch)
    _flush(client, batch)
    return placed


def _fill(h: Host, goal: float, eligible: list[_Shape], tree: list[_Provider], pools: list[_Provider],
          pool_floor: dict[str, dict[str, int]], rng: random.Random):
    """The allocations of the instances prefilled on one host, in order."""
    if h.shape.kind == "ironic":
        if rng.random() < goal:
            one = _place(rng.choice(eligible), tree, pools)
            if one is not None:
                yield one
        return
    cap = h.capacity
    tree_ids = {p.spec.uuid for p in tree}
    used: dict[str, int] = {}
    misses = 0
    while misses < MISSES:
        shape = rng.choice(eligible)
        one = _place(shape, tree, pools)
        if one is not None and _within(one, tree_ids, used, cap, goal, pools, pool_floor):
            for rp, res in one.items():
                if rp in tree_ids:
                    for rc, n in res.items():
                        used[rc] = used.get(rc, 0) + n
            yield one
            continue
        if one is not None:  # it fit the host but not the target: give it back
            by_uuid = {p.spec.uuid: p for p in (*tree, *pools)}
            for rp, res in one.items():
                for rc, n in res.items():
                    by_uuid[rp].free[rc] += n
        misses += 1


def _within(one: dict[str, dict[str, int]], tree_ids: set[str], used: dict[str, int], cap: dict[str, int],
            goal: float, pools: list[_Provider], pool_floor: dict[str, dict[str, int]]) -> bool:
    """Does the host stay within its target in every class it uses, and
    every pool above what the fleet's target leaves free? (``one`` is
    already taken from the providers' free amounts.)"""
    want: dict[str, int] = {}
    for rp, res in one.items():
        if rp in tree_ids:
            for rc, n in res.items():
                want[rc] = want.get(rc, 0) + n
    if not all(used.get(rc, 0) + n <= goal * cap.get(rc, 0) for rc, n in want.items()):
        return False
    for p in pools:
        if p.spec.uuid in one and any(p.free[rc] < pool_floor[p.spec.uuid].get(rc, 0)
                                      for rc in one[p.spec.uuid]):
            return False
    return True


def _flush(client: PlacementClient, batch: dict[str, AllocationWrite]) -> None:
    if batch:
        outcome = client.post_allocations(batch)
        if not outcome.ok:
            raise RuntimeError(f"prefill refused by Placement: {outcome.detail}")
        batch.clear()
