"""An independent checker: is the end state of a run legal?

It reads what Placement holds at the end (providers, inventories, traits,
every consumer's allocations: through the public API, or for an in-process
run from Placement's tables, ``sim/snapshot.py``) and the simulator's own
record of what each
instance asked for (traits, server group). It uses none of the scheduler's
code: capacity is re-added from raw allocations, domains come from the
simulator's layout, and group rules are checked from their definitions. So
a scheduler bug cannot hide behind the code that made it.

Rules:
  capacity       per provider and class: sum of allocations <= (total - reserved) * ratio
  trait          an instance's required traits are on a provider it allocates from;
                 its forbidden traits on none of them
  affinity       a hard-affinity group's members share one domain at its scope level
  anti-affinity  a hard anti-affinity group has at most max_server_per_host members
                 per domain at its scope level (host, rack, row, room, cell)
"""
from __future__ import annotations

from collections import Counter, defaultdict

import msgspec

from billeting.placement_client.client import PlacementClient
from billeting.placement_client.model import Inventory
from billeting.sim.results import Violation

SHARING = "MISC_SHARES_VIA_AGGREGATE"


class ProviderState(msgspec.Struct, frozen=True, kw_only=True):
    uuid: str
    name: str
    root: str
    inventories: dict[str, Inventory] = {}
    traits: frozenset[str] = frozenset()


class PlacementState(msgspec.Struct, frozen=True, kw_only=True):
    providers: dict[str, ProviderState]
    consumers: dict[str, dict[str, dict[str, int]]]   # consumer -> provider -> class -> amount


class InstanceExpect(msgspec.Struct, frozen=True, kw_only=True):
    uuid: str
    required: frozenset[str] = frozenset()
    forbidden: frozenset[str] = frozenset()
    group: str | None = None


class GroupExpect(msgspec.Struct, frozen=True, kw_only=True):
    uuid: str
    policy: str
    scope: str = "host"
    max_server_per_host: int = 1


def read_state(client: PlacementClient, only: set[str] | None = None,
               traits: set[str] | None = None) -> PlacementState:
    """Everything the checker needs, through Placement's public API.

    ``traits``: the traits the checks look at (those instances require or
    forbid). Given, each provider's ``traits`` holds only those of them it
    has, read with one provider listing per trait instead of one read per
    provider (at 5,000 hosts a third of the reads); None reads them all."""
    providers: dict[str, ProviderState] = {}
    consumers: dict[str, dict[str, dict[str, int]]] = defaultdict(dict)
    having: dict[str, set[str]] = defaultdict(set)   # provider -> the looked-at traits it has
    if traits is not None:
        traits = {*traits, SHARING}   # how the group checks tell a pool from a host
    for t in sorted(traits or ()):
        for p in client.list_providers(required=[t]):
            having[p.uuid].add(t)
    for p in client.list_providers():
        if only is not None and p.uuid not in only:
            continue
        inv = client.get_inventories(p.uuid).inventories
        found = frozenset(client.get_traits(p.uuid).traits) if traits is None else frozenset(having[p.uuid])
        providers[p.uuid] = ProviderState(uuid=p.uuid, name=p.name, root=p.root_provider_uuid or p.uuid,
                                          inventories=dict(inv), traits=found)
        if inv:
            for consumer, part in client.provider_allocations(p.uuid).allocations.items():
                consumers[consumer][p.uuid] = dict(part.resources)
    return PlacementState(providers=providers, consumers=dict(consumers))


def check(state: PlacementState, instances: dict[str, InstanceExpect], groups: dict[str, GroupExpect],
          topology: dict[str, dict[str, str]]) -> list[Violation]:
    """``topology``: root provider uuid -> level -> domain name (rack, row, room, cell)."""
    out: list[Violation] = []
    out += _capacity(state)
    out += _traits(state, instances)
    out += _groups(state, instances, groups, topology)
    return out


def _capacity(state: PlacementState) -> list[Violation]:
    used: dict[tuple[str, str], int] = Counter()
    for held in state.consumers.values():
        for rp, res in held.items():
            for rc, n in res.items():
                used[(rp, rc)] += n
    out = []
    for (rp, rc), n in sorted(used.items()):
        prov = state.providers.get(rp)
        inv = prov.inventories.get(rc) if prov else None
        limit = int((inv.total - inv.reserved) * inv.allocation_ratio) if inv else 0
        if n > limit:
            out.append(Violation(kind="capacity", host=prov.name if prov else rp,
                                 detail=f"{rc}: {n} allocated, {limit} allocatable"))
    return out


def _traits(state: PlacementState, instances: dict[str, InstanceExpect]) -> list[Violation]:
    out = []
    for uuid, want in sorted(instances.items()):
        held = state.consumers.get(uuid)
        if not held or not (want.required or want.forbidden):
            continue
        have: set[str] = set()
        for rp in held:
            prov = state.providers.get(rp)
            if prov:
                have |= prov.traits
        host = _host_name(state, held)
        missing = sorted(want.required - have)
        if missing:
            out.append(Violation(kind="trait", instance=uuid, host=host,
                                 detail=f"required trait(s) {', '.join(missing)} not on its providers"))
        present = sorted(want.forbidden & have)
        if present:
            out.append(Violation(kind="trait", instance=uuid, host=host,
                                 detail=f"forbidden trait(s) {', '.join(present)} on its providers"))
    return out


def _host_name(state: PlacementState, held: dict[str, dict[str, int]]) -> str | None:
    root = _host_root(state, held)
    return root.name if root is not None else None


def host_of(state: PlacementState, held: dict[str, dict[str, int]]) -> str | None:
    """The root (host) uuid an allocation is on, ignoring sharing providers."""
    root = _host_root(state, held)
    return root.uuid if root is not None else None


def _host_root(state: PlacementState, held: dict[str, dict[str, int]]):
    for rp in held:
        prov = state.providers.get(rp)
        if prov is None:
            continue
        root = state.providers.get(prov.root)
        if root is not None and SHARING not in root.traits:
            return root
    return None


def _groups(state: PlacementState, instances: dict[str, InstanceExpect], groups: dict[str, GroupExpect],
            topology: dict[str, dict[str, str]]) -> list[Violation]:
    members: dict[str, list[tuple[str, str]]] = defaultdict(list)   # group -> [(instance, host uuid)]
    for uuid, want in instances.items():
        if want.group is None or uuid not in state.consumers:
            continue
        host = host_of(state, state.consumers[uuid])
        if host is not None:
            members[want.group].append((uuid, host))
    out = []
    for gid, placed in sorted(members.items()):
        g = groups.get(gid)
        if g is None or g.policy not in ("affinity", "anti-affinity"):
            continue   # soft policies are preferences, not rules
        level = g.scope

        def domain(host: str) -> str:
            return host if level == "host" else topology.get(host, {}).get(level, f"?{host}")

        per_domain = Counter(domain(h) for _, h in placed)
        if g.policy == "affinity" and len(per_domain) > 1:
            out.append(Violation(kind="affinity", level=level, instance=placed[0][0],
                                 detail=f"group {gid}: {len(placed)} members over {len(per_domain)} "
                                        f"{level}s ({', '.join(sorted(per_domain))})"))
        if g.policy == "anti-affinity":
            for dom, n in sorted(per_domain.items()):
                if n > g.max_server_per_host:
                    name = state.providers[dom].name if level == "host" and dom in state.providers else dom
                    out.append(Violation(kind="anti-affinity", level=level,
                                         host=name if level == "host" else None,
                                         detail=f"group {gid}: {n} members in {level} {name}, "
                                                f"at most {g.max_server_per_host} allowed"))
    return out
