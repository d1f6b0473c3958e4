"""The packing problem the bounds solve, built from a run's end state.

It models exactly what the independent checker (``sim.checker``) checks, and
nothing the checker does not:

* capacity per provider: a host is its provider tree (root, NUMA nodes,
  GPUs, NICs), and every provider's allocations stay within its own
  capacity -- not the tree's sum, so two GPUs with 3 vGPUs each hold two
  2-vGPU instances, not three;
* traits: an instance's required traits are on some provider it allocates
  from, its forbidden traits on none of them;
* server groups (hard policies): affinity keeps a group's members in one
  domain at its scope (host, rack, row, room, cell); anti-affinity allows at
  most ``max_server_per_host`` members per domain.

An instance is a list of *pieces*, each taken from a single provider: one
per resource class of its unnumbered request group (Placement may take each
class of that group from a different provider of the tree) and one per
numbered group. A *configuration* is one way to lay an instance's pieces on
a host's providers. Classes no host offers (DISK_GB held by a sharing
provider) cannot decide which host an instance uses, so they are dropped.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

from billeting.sim.results import GroupRule, HostCapacity, Placement

# Configurations enumerated per (instance kind, host shape) at most; beyond it
# the exact integer program is not attempted (the heuristic keeps the ones found).
MAX_CONFIGS = 256
_MAX_LEAVES = 4096


@dataclass(frozen=True, slots=True)
class Provider:
    name: str
    cap: tuple[int, ...]          # per class of the problem
    traits: frozenset[str]


@dataclass(frozen=True, slots=True)
class Kind:
    """Instances that are interchangeable: same pieces, traits and group."""
    pieces: tuple[tuple[int, ...], ...]
    required: frozenset[str]
    forbidden: frozenset[str]
    group: str | None


@dataclass(frozen=True, slots=True)
class Config:
    """One way to lay an instance on a host: (provider index, usage) pairs."""
    uses: tuple[tuple[int, tuple[int, ...]], ...]


@dataclass(slots=True)
class Host:
    name: str
    shape: int
    domains: dict[str, str]       # level -> domain name; "host" is the host itself


@dataclass
class Problem:
    classes: list[str]
    dropped: set[str]
    hosts: list[Host]
    shapes: list[tuple[Provider, ...]]         # providers of each host shape
    kinds: list[Kind]
    count: list[int]                            # instances of each kind
    groups: dict[str, GroupRule]                # hard groups with live members
    configs: dict[tuple[int, int], list[Config]] = field(default_factory=dict)
    truncated: set[tuple[int, int]] = field(default_factory=set)

    @property
    def instances(self) -> int:
        return sum(self.count)

    def configs_of(self, k: int, t: int) -> list[Config]:
        key = (k, t)
        if key not in self.configs:
            found, cut = _enumerate(self.kinds[k], self.shapes[t])
            self.configs[key] = found
            if cut:
                self.truncated.add(key)
        return self.configs[key]

    def unplaceable(self) -> int:
        return sum(n for k, n in enumerate(self.count)
                   if not any(self.configs_of(k, t) or (k, t) in self.truncated
                              for t in range(len(self.shapes))))

    def shape_capacity(self, t: int) -> tuple[int, ...]:
        return tuple(sum(p.cap[c] for p in self.shapes[t]) for c in range(len(self.classes)))


def _providers(h: HostCapacity) -> list[tuple[str, dict[str, int], frozenset[str]]]:
    if h.providers:
        return [(p.name, p.capacity, frozenset(p.traits)) for p in h.providers]
    return [(h.host, h.capacity, frozenset())]   # a record from before trees were kept


def _pieces(pl: Placement) -> list[dict[str, int]]:
    if pl.pieces:
        return pl.pieces
    return [{rc: v} for rc, v in pl.resources.items() if v > 0]


def build(hosts: list[HostCapacity], placements: list[Placement],
          groups: dict[str, GroupRule] | None = None) -> Problem:
    offered = {rc for h in hosts for _, cap, _ in _providers(h) for rc, v in cap.items() if v > 0}
    wanted = {rc for pl in placements for piece in _pieces(pl) for rc, v in piece.items() if v > 0}
    classes = sorted(offered)
    shapes: dict[tuple[Provider, ...], int] = {}
    out_hosts = []
    for h in hosts:
        provs = tuple(Provider(name="", cap=tuple(max(0, int(cap.get(rc, 0))) for rc in classes), traits=tr)
                      for _, cap, tr in _providers(h))
        t = shapes.setdefault(provs, len(shapes))
        out_hosts.append(Host(name=h.host, shape=t, domains={**h.domains, "host": h.host, "cell": h.cell}))
    hard = {g: r for g, r in (groups or {}).items() if r.policy in ("affinity", "anti-affinity")}
    kinds: Counter[Kind] = Counter()
    for pl in placements:
        pieces = []
        for piece in _pieces(pl):
            vec = tuple(int(piece.get(rc, 0)) for rc in classes)
            if any(vec):
                pieces.append(vec)
        group = pl.group if pl.group in hard else None
        kinds[Kind(pieces=tuple(sorted(pieces, reverse=True)), required=frozenset(pl.required),
                   forbidden=frozenset(pl.forbidden), group=group)] += 1
    live = {k.group for k in kinds if k.group}
    return Problem(classes=classes, dropped=wanted - offered, hosts=out_hosts, shapes=list(shapes),
                   kinds=list(kinds), count=list(kinds.values()),
                   groups={g: r for g, r in hard.items() if g in live})


def _enumerate(kind: Kind, provs: tuple[Provider, ...]) -> tuple[list[Config], bool]:
    """Every legal layout of ``kind`` on an empty host of these providers,
    identical layouts once; the flag says the enumeration stopped early."""
    allowed = [i for i, p in enumerate(provs) if not (p.traits & kind.forbidden)]
    options = [[i for i in allowed if all(v <= provs[i].cap[c] for c, v in enumerate(piece))]
               for piece in kind.pieces]
    found: dict[tuple, Config] = {}
    leaves = 0
    cut = False

    def walk(j: int, used: dict[int, list[int]]) -> None:
        nonlocal leaves, cut
        if cut:
            return
        if j == len(kind.pieces):
            leaves += 1
            if leaves > _MAX_LEAVES:
                cut = True
                return
            have = set().union(*(provs[i].traits for i in used)) if used else set()
            if kind.required <= have:
                key = tuple(sorted((i, tuple(u)) for i, u in used.items()))
                if key not in found:
                    found[key] = Config(uses=key)
                    if len(found) >= MAX_CONFIGS:
                        cut = True
            return
        piece = kind.pieces[j]
        for i in options[j]:
            u = used.get(i)
            nxt = [a + b for a, b in zip(u, piece)] if u else list(piece)
            if any(v > provs[i].cap[c] for c, v in enumerate(nxt)):
                continue
            used[i] = nxt
            walk(j + 1, used)
            if u is None:
                del used[i]
            else:
                used[i] = u
    if not kind.pieces:
        return ([Config(uses=())] if not kind.required else []), False
    walk(0, {})
    return list(found.values()), cut


def legal_as_placed(prob: Problem, hosts: list[HostCapacity], placements: list[Placement]) -> bool:
    """Whether the run's own end state satisfies every rule above (then its
    host count is a packing that works, an upper bound)."""
    provs = {h.host: {name: (cap, tr) for name, cap, tr in _providers(h)} for h in hosts}
    domains = {h.name: h.domains for h in prob.hosts}
    used: dict[tuple[str, str], Counter] = defaultdict(Counter)
    per_domain: dict[str, Counter] = defaultdict(Counter)
    for pl in placements:
        tree = provs.get(pl.host)
        if tree is None:
            return False
        alloc = pl.allocations or {pl.host: pl.resources}
        have: set[str] = set()
        for name, res in alloc.items():
            if name not in tree:
                return False
            used[(pl.host, name)].update({rc: v for rc, v in res.items() if rc in prob.classes})
            have |= tree[name][1]
        if not set(pl.required) <= have or set(pl.forbidden) & have:
            return False
        rule = prob.groups.get(pl.group) if pl.group else None
        if rule is not None:
            per_domain[pl.group][domains[pl.host].get(rule.scope, pl.host)] += 1
    for (host, name), u in used.items():
        cap = provs[host][name][0]
        if any(v > cap.get(rc, 0) for rc, v in u.items()):
            return False
    for g, doms in per_domain.items():
        rule = prob.groups[g]
        if rule.policy == "affinity" and len(doms) > 1:
            return False
        if rule.policy == "anti-affinity" and max(doms.values()) > rule.max_server_per_host:
            return False
    return True
