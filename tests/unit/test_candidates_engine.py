"""The candidates engine against a brute-force reference of
docs/design/allocation-candidates.md (#one-request-group to #algorithm) on seeded random fleets, the agreement of its three strategies, and the number
of database round trips (which must not grow with the fleet)."""
from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field

import pytest
from sqlalchemy import event

from billeting.placement import candidates
from billeting.placement.candidates import engine as engine_mod, names, summary_cache, world as world_mod
from billeting.placement.candidates.combine import dedupe_key
from tests.placement.api.test_allocation_candidates_fleet import Fleet, canonical

# Every test here runs with summaries read directly and through the cache.
pytestmark = pytest.mark.usefixtures("summary_paths")

CLASSES = ["VCPU", "MEMORY_MB", "DISK_GB", "SRIOV_NET_VF"]
TRAITS = ["HW_CPU_X86_AVX2", "HW_CPU_X86_SSE2", "STORAGE_DISK_SSD", "HW_NUMA_ROOT"]
AGGS = ["c0ffee00-0000-4000-8000-00000000000%d" % i for i in range(3)]
SHARES = "MISC_SHARES_VIA_AGGREGATE"


# --- a fleet we know everything about --------------------------------------------

@dataclass
class Model:
    fleet: Fleet
    parent: dict[str, str | None] = field(default_factory=dict)
    inventory: dict[tuple[str, str], dict] = field(default_factory=dict)
    used: dict[tuple[str, str], int] = field(default_factory=dict)
    traits: dict[str, set[str]] = field(default_factory=dict)
    aggs: dict[str, set[str]] = field(default_factory=dict)

    def root(self, p: str) -> str:
        while self.parent[p] is not None:
            p = self.parent[p]
        return p

    def chain(self, p: str) -> set[str]:
        found = {p}
        while self.parent[p] is not None:
            p = self.parent[p]
            found.add(p)
        return found


def build(fleet: Fleet, seed: int, trees: int, sharing: bool) -> Model:
    rnd = random.Random(seed)
    model = Model(fleet)

    def add(name: str, parent: str | None) -> None:
        inventory = {}
        for rc in rnd.sample(CLASSES, rnd.choice([0, 1, 2, 2, 3])):
            spec = {"total": rnd.choice([4, 8, 16]), "reserved": rnd.choice([0, 0, 1]),
                    "max_unit": rnd.choice([2, 4, 8]), "allocation_ratio": rnd.choice([1.0, 1.0, 1.5])}
            if rc == "MEMORY_MB":
                spec["step_size"] = 2
            inventory[rc] = spec
        traits = set(rnd.sample(TRAITS, rnd.randint(0, 2)))
        aggs = set(rnd.sample(AGGS, rnd.randint(0, 1))) if parent is None or rnd.random() < 0.2 else set()
        fleet.provider(name, parent=parent, inventory=inventory, traits=sorted(traits), aggregates=sorted(aggs))
        model.parent[name] = parent
        model.traits[name] = traits
        model.aggs[name] = aggs
        for rc, spec in inventory.items():
            model.inventory[(name, rc)] = {"reserved": 0, "min_unit": 1, "step_size": 1, **spec}

    for t in range(trees):
        root = f"r{t}"
        add(root, None)
        for c in range(rnd.randint(0, 3)):
            add(f"{root}c{c}", root)
            if rnd.random() < 0.4:
                add(f"{root}c{c}g", f"{root}c{c}")
    if sharing:
        for s in range(2):
            name = f"ss{s}"
            fleet.provider(name, inventory={"DISK_GB": 8}, traits=[SHARES], aggregates=[AGGS[s]])
            model.parent[name], model.traits[name], model.aggs[name] = None, {SHARES}, {AGGS[s]}
            model.inventory[(name, "DISK_GB")] = {"total": 8, "reserved": 0, "min_unit": 1, "max_unit": 8,
                                                   "step_size": 1, "allocation_ratio": 1.0}
    # some usage
    for (p, rc), inv in sorted(model.inventory.items()):
        if rnd.random() < 0.3 and inv["step_size"] == 1:
            fleet.allocate({p: {rc: 1}})
            model.used[(p, rc)] = model.used.get((p, rc), 0) + 1
    return model


# --- the reference: docs/design/allocation-candidates.md literally, on the model ----------------

@dataclass
class Query:
    groups: dict[str, dict]  # suffix -> {"resources": {}, "required": [set], "forbidden": set,
    #                                    "member_of": [set], "not_member": set}
    policy: str | None = None
    root_required: set = field(default_factory=set)
    root_forbidden: set = field(default_factory=set)
    same_subtree: list = field(default_factory=list)

    def string(self) -> str:
        parts = []
        for s, g in self.groups.items():
            if g.get("resources"):
                parts.append(f"resources{s}=" + ",".join(f"{rc}:{a}" for rc, a in g["resources"].items()))
            for any_of in g.get("required", []):
                parts.append(f"required{s}=in:" + ",".join(sorted(any_of)))
            if g.get("forbidden"):
                parts.append(f"required{s}=" + ",".join("!" + t for t in sorted(g["forbidden"])))
            for any_of in g.get("member_of", []):
                parts.append(f"member_of{s}=in:" + ",".join(sorted(any_of)))
            if g.get("not_member"):
                parts.append(f"member_of{s}=!in:" + ",".join(sorted(g["not_member"])))
        if self.policy:
            parts.append(f"group_policy={self.policy}")
        if self.root_required or self.root_forbidden:
            parts.append("root_required=" + ",".join(sorted(self.root_required) +
                                                      ["!" + t for t in sorted(self.root_forbidden)]))
        for st in self.same_subtree:
            parts.append("same_subtree=" + ",".join(sorted(st)))
        return "&".join(parts)


def reference(m: Model, q: Query) -> list:
    providers = list(m.parent)
    has_trees = any(v is not None for v in m.parent.values())
    sharing = {p for p in providers if SHARES in m.traits[p]}

    def serves(p, rc, a):
        inv = m.inventory.get((p, rc))
        if inv is None:
            return False
        cap = (inv["total"] - inv["reserved"]) * inv["allocation_ratio"]
        return (inv["min_unit"] <= a <= inv["max_unit"] and a % inv["step_size"] == 0
                and m.used.get((p, rc), 0) + a <= cap)

    def matches(x, clauses):
        return all(m.aggs[x] & c for c in clauses)

    def root_ok(r):
        return q.root_required <= m.traits[r] and not (q.root_forbidden & m.traits[r])

    def share_anchors(sp):
        return {m.root(sp)} | {m.root(x) for x in providers if m.aggs[x] & m.aggs[sp]}

    per_group = {}
    for s, g in q.groups.items():
        res = g.get("resources", {})
        req, forb = g.get("required", []), g.get("forbidden", set())
        mem, notm = g.get("member_of", []), g.get("not_member", set())
        sols: dict[str, list] = {}
        if s == "" and (has_trees or sharing):
            servers = {}
            for rc, a in res.items():
                pairs = []
                for p in providers:
                    if not serves(p, rc, a) or m.traits[p] & forb or m.aggs[p] & notm:
                        continue
                    own = m.root(p)
                    if (not mem or matches(p, mem) or matches(own, mem)) and not m.aggs[own] & notm and root_ok(own):
                        pairs.append((p, own))
                    if p in sharing:
                        for anchor in share_anchors(p) - {own}:
                            if (not mem or matches(p, mem)) and not m.aggs[anchor] & notm and root_ok(anchor):
                                pairs.append((p, anchor))
                servers[rc] = pairs
            anchors = set.intersection(*({a for _, a in pairs} for pairs in servers.values()))
            rcs = list(res)
            for anchor in anchors:
                lists = [[p for p, a in servers[rc] if a == anchor] for rc in rcs]
                for combo in itertools.product(*lists):
                    have = set().union(*(m.traits[p] for p in combo))
                    if all(have & r for r in req):
                        sols.setdefault(anchor, []).append(
                            (tuple((p, rc, res[rc]) for p, rc in zip(combo, rcs)), frozenset(combo), None))
        else:
            for p in providers:
                if not all(serves(p, rc, a) for rc, a in res.items()):
                    continue
                if not all(m.traits[p] & r for r in req) or m.traits[p] & forb:
                    continue
                if not matches(p, mem) or m.aggs[p] & notm:
                    continue
                anchors = share_anchors(p) if p in sharing else {m.root(p)}
                for anchor in anchors:
                    if root_ok(anchor):
                        sols.setdefault(anchor, []).append(
                            (tuple((p, rc, a) for rc, a in res.items()), frozenset({p}), p if s else None))
        per_group[s] = sols

    results = set()
    suffixes = list(q.groups)
    anchors = set.intersection(*(set(per_group[s]) for s in suffixes))
    for anchor in anchors:
        for combo in itertools.product(*(per_group[s][anchor] for s in suffixes)):
            chosen = dict(zip(suffixes, combo))
            singles = [sol[2] for sol in combo if sol[2] is not None]
            if q.policy == "isolate" and len(set(singles)) != len(singles):
                continue
            ok = True
            for st in q.same_subtree:
                ps = {chosen[x][2] for x in st}
                if not any(all(top in m.chain(p) for p in ps) for top in ps):
                    ok = False
            if not ok:
                continue
            amounts: dict = {}
            for sol in combo:
                for p, rc, a in sol[0]:
                    amounts[(p, rc)] = amounts.get((p, rc), 0) + a
            for (p, rc), a in amounts.items():
                inv = m.inventory[(p, rc)]
                cap = int((inv["total"] - inv["reserved"]) * inv["allocation_ratio"])
                if a > inv["max_unit"] or m.used.get((p, rc), 0) + a > cap:
                    ok = False
            if ok:
                triples = frozenset((p, rc, a) for (p, rc), a in amounts.items())
                maps = frozenset((x, frozenset(chosen[x][1])) for x in suffixes)
                results.add((triples, maps))
    return sorted(results, key=canonical)


def random_query(rnd: random.Random, sharing: bool) -> Query:
    def group(resourceless_ok: bool = False) -> dict:
        g: dict = {}
        if not resourceless_ok or rnd.random() < 0.7:
            g["resources"] = {rc: rnd.choice([1, 1, 2]) for rc in rnd.sample(CLASSES, rnd.randint(1, 2))}
        if rnd.random() < 0.25:
            g["required"] = [set(rnd.sample(TRAITS, rnd.randint(1, 2)))]
        if not g.get("resources") and not g.get("required"):
            g["required"] = [{rnd.choice(TRAITS)}]
        if rnd.random() < 0.2:
            g["forbidden"] = {rnd.choice(TRAITS)} - set().union(*g.get("required", [set()]))
        if rnd.random() < 0.15:
            g["member_of"] = [set(rnd.sample(AGGS, rnd.randint(1, 2)))]
        if rnd.random() < 0.1:
            g["not_member"] = {rnd.choice(AGGS)}
        return g

    shape = rnd.choice(["unsuffixed", "two", "mixed", "subtree"])
    q = Query(groups={})
    if shape == "unsuffixed":
        q.groups[""] = group()
    elif shape == "two":
        q.groups["1"], q.groups["2"] = group(), group()
        q.policy = rnd.choice(["none", "isolate"])
    elif shape == "mixed":
        q.groups[""], q.groups["_X"] = group(), group()
        q.policy = rnd.choice(["none", "isolate"])
    else:
        q.groups["_A"], q.groups["_B"] = group(), group(resourceless_ok=True)
        q.policy = rnd.choice(["none", "isolate"])
        q.same_subtree = [{"_A", "_B"}]
    if rnd.random() < 0.15:
        q.root_required = {rnd.choice(TRAITS)}
    elif rnd.random() < 0.1:
        q.root_forbidden = {rnd.choice(TRAITS)}
    return q


@pytest.mark.parametrize("seed,sharing", [(1, False), (2, True), (3, False), (4, True)])
def test_engine_matches_the_reference(client, seed, sharing):
    fleet = Fleet(client)
    model = build(fleet, seed, trees=7, sharing=sharing)
    rnd = random.Random(seed * 101)
    for _ in range(40):
        q = random_query(rnd, sharing)
        resp = client.get("/allocation_candidates?" + q.string(), mv="1.39")
        assert resp.status == 200, (q.string(), resp)
        expected = reference(model, q)
        got = fleet.requests(resp.json)
        assert got == expected, (q.string(), "missing", set(expected) - set(got), "extra",
                                 set(got) - set(expected), "dupes", len(got) - len(set(got)))
        used = {model.root(fleet.name[u]) for ar in resp.json["allocation_requests"] for u in ar["allocations"]}
        assert fleet.summary_names(resp.json) == {p for p in model.parent if model.root(p) in used}
        # a limit returns a subset, and its summaries cover exactly the trees it uses
        if len(expected) > 1:
            limit = rnd.randint(1, len(expected) - 1)
            limited = client.get(f"/allocation_candidates?{q.string()}&limit={limit}", mv="1.39").json
            got = fleet.requests(limited)
            assert len(got) == limit and set(got) <= set(expected), q.string()
            used = {model.root(fleet.name[u]) for ar in limited["allocation_requests"] for u in ar["allocations"]}
            assert fleet.summary_names(limited) == {p for p in model.parent if model.root(p) in used}


# --- strategies agree; round trips stay flat --------------------------------------

def typed(conn, q: Query, **kw) -> candidates.CandidateRequest:
    wanted_rc = {rc for g in q.groups.values() for rc in g.get("resources", {})}
    wanted_tr = set(q.root_required) | set(q.root_forbidden)
    for g in q.groups.values():
        wanted_tr |= g.get("forbidden", set()) | set().union(*g.get("required", [set()]))
    rc, tr = names.rc_ids(conn, wanted_rc), names.trait_ids(conn, wanted_tr)
    groups = tuple(candidates.ResolvedGroup(
        suffix=s, resources={rc[n]: a for n, a in g.get("resources", {}).items()},
        required=tuple(frozenset(tr[n] for n in r) for r in g.get("required", [])),
        forbidden=frozenset(tr[n] for n in g.get("forbidden", set())),
        member_of=tuple(frozenset(x) for x in g.get("member_of", [])),
        forbidden_aggregates=frozenset(g.get("not_member", set()))) for s, g in q.groups.items())
    return candidates.CandidateRequest(
        groups=groups, group_policy=q.policy, root_required=frozenset(tr[n] for n in q.root_required),
        root_forbidden=frozenset(tr[n] for n in q.root_forbidden),
        same_subtree=tuple(frozenset(s) for s in q.same_subtree), **kw)


def test_windowed_full_and_direct_strategies_agree(client, engine):
    fleet = Fleet(client)
    build(fleet, 11, trees=10, sharing=False)
    rnd = random.Random(7)
    with engine.connect() as conn:
        for _ in range(30):
            q = random_query(rnd, sharing=False)
            request = typed(conn, q)
            world = world_mod.load(conn, request)
            full, _ = engine_mod._full(conn, request, world, None)
            windowed, _ = engine_mod._windowed(conn, request, world, 10 ** 6)
            assert sorted(map(repr, map(dedupe_key, full))) == sorted(map(repr, map(dedupe_key, windowed)))
            if engine_mod._is_direct(request, world):
                direct = engine_mod._direct(conn, request, world, None)
                assert len(direct) == len(full)


def count_statements(engine, work) -> int:
    seen = []

    def listener(*_args, **_kw):
        seen.append(1)

    event.listen(engine, "before_cursor_execute", listener)
    try:
        work()
    finally:
        event.remove(engine, "before_cursor_execute", listener)
    return len(seen)


@pytest.mark.parametrize("query", [
    "resources=VCPU:1,MEMORY_MB:64",
    "resources=VCPU:1,MEMORY_MB:64&limit=3",
    "resources=DISK_GB:1&resources_C=VCPU:1&resources_F=SRIOV_NET_VF:1&group_policy=none"
    "&same_subtree=_C,_F",
    "resources=DISK_GB:1&resources_C=VCPU:1&resources_F=SRIOV_NET_VF:1&group_policy=none"
    "&same_subtree=_C,_F&limit=2",
    "resources=VCPU:1,DISK_GB:1&required=HW_CPU_X86_AVX2",
])
def test_round_trips_do_not_grow_with_the_fleet(client, engine, query, monkeypatch):
    # Bounded scans start at a random id; a wrap-around costs one more trip.
    monkeypatch.setattr(engine_mod, "_scan_start", lambda world: 0)
    fleet = Fleet(client)

    def add_trees(start: int, count: int) -> None:
        for i in range(start, start + count):
            fleet.provider(f"cn{i}", inventory={"DISK_GB": 100, "VCPU": 2, "MEMORY_MB": 128},
                           traits=["HW_CPU_X86_AVX2"])
            fleet.provider(f"numa{i}", parent=f"cn{i}", inventory={"VCPU": 4, "MEMORY_MB": 512})
            fleet.provider(f"pf{i}", parent=f"numa{i}", inventory={"SRIOV_NET_VF": 4})

    def run() -> None:
        summary_cache.clear()  # (a cold cache costs one more round trip: count it both times)
        resp = client.get(f"/allocation_candidates?{query}", mv="1.39")
        assert resp.status == 200 and resp.json["allocation_requests"]

    add_trees(0, 3)
    run()  # warm the name cache
    small = count_statements(engine, run)
    add_trees(3, 12)
    large = count_statements(engine, run)
    assert large == small
    assert small <= 9


def _flat_and_nested(client, count: int) -> Fleet:
    fleet = Fleet(client)
    for i in range(count):
        fleet.provider(f"cn{i}", inventory={"VCPU": 4, "MEMORY_MB": 512})
    return fleet


@pytest.mark.parametrize("nested", [False, True])
def test_limited_answers_start_at_random_points(client, nested):
    """Concurrent schedulers asking the same limited question must not all be
    handed the same first host (they would all race to claim it)."""
    fleet = _flat_and_nested(client, 12)
    if nested:  # a tree makes the windowed strategy answer the two-group query
        fleet.provider("child", parent="cn0", inventory={"SRIOV_NET_VF": 2})
        query = "resources=VCPU:1&resources_X=MEMORY_MB:64&group_policy=none&limit=1"
    else:
        query = "resources=VCPU:1,MEMORY_MB:64&limit=1"
    firsts = set()
    for _ in range(40):
        resp = client.get(f"/allocation_candidates?{query}", mv="1.39")
        assert resp.status == 200 and len(resp.json["allocation_requests"]) == 1
        firsts.update(resp.json["allocation_requests"][0]["allocations"])
    assert len(firsts) >= 4


@pytest.mark.parametrize("start", ["first", "middle", "last"])
def test_a_scan_that_starts_late_wraps_around_to_the_rest(client, monkeypatch, start):
    fleet = _flat_and_nested(client, 9)

    def scan_start(world):
        return {"first": 0, "middle": (world.min_provider_id + world.max_provider_id) // 2,
                "last": world.max_provider_id}[start]

    monkeypatch.setattr(engine_mod, "_scan_start", scan_start)
    for query in ("resources=VCPU:1&limit=9", "resources=VCPU:1&resources_X=MEMORY_MB:64&limit=9"
                  "&group_policy=none"):
        resp = client.get(f"/allocation_candidates?{query}", mv="1.39")
        assert resp.status == 200
        got = {uuid for ar in resp.json["allocation_requests"] for uuid in ar["allocations"]}
        assert got == set(fleet.uuid.values())
