"""Packing bounds on fleets small enough that the optimum is known by hand."""
import random
from collections import Counter
import time

from billeting.sim.packing import bounds
from billeting.sim.results import HostCapacity, Placement


def hosts(n, vcpu=16, mem=64_000, cell="c1", prefix="h", **extra):
    return [HostCapacity(host=f"{prefix}{i}", cell=cell,
                         capacity={"VCPU": vcpu, "MEMORY_MB": mem, **extra})
            for i in range(n)]


def vms(sizes, spread_over):
    """One instance per (vcpu, mem) in sizes, dealt round-robin over hosts."""
    return [Placement(instance=f"i{i}", host=spread_over[i % len(spread_over)].host,
                      resources={"VCPU": v, "MEMORY_MB": m})
            for i, (v, m) in enumerate(sizes)]


def test_four_half_hosts_need_two():
    fleet = hosts(4)
    b = bounds(fleet, vms([(8, 32_000)] * 4, fleet))
    assert b.hosts_in_use == 4
    assert b.lp_bound == 2
    assert b.compaction == 2
    assert b.solver.startswith("highs")


def test_items_over_half_cannot_share_so_lp_sees_three():
    # Volume alone says 3 x 0.6 = 1.8 -> 2 hosts; no two fit together: 3.
    fleet = hosts(5)
    b = bounds(fleet, vms([(10, 10_000)] * 3, fleet))
    assert b.lp_bound == 3
    assert b.compaction == 3


def test_mixed_sizes_two_dimensions():
    # A CPU-heavy and a memory-heavy instance share a host well; the optimum
    # pairs them: 2 x (12 cpu, 16G) + 2 x (4 cpu, 48G) -> 2 hosts.
    fleet = hosts(4)
    sizes = [(12, 16_000), (12, 16_000), (4, 48_000), (4, 48_000)]
    b = bounds(fleet, vms(sizes, fleet))
    assert b.lp_bound == 2
    assert b.compaction == 2
    assert b.hosts_in_use == 4


def test_hosts_of_different_shapes_and_missing_classes():
    big = hosts(2, vcpu=64, mem=256_000, prefix="big")
    gpu = hosts(2, vcpu=16, mem=64_000, prefix="gpu", VGPU=4)
    fleet = big + gpu
    # Two GPU instances can only go on gpu hosts; 4 x 16 vcpu fit on one big.
    work = [Placement(instance=f"g{i}", host=f"gpu{i}",
                      resources={"VCPU": 8, "MEMORY_MB": 8_000, "VGPU": 4}) for i in range(2)]
    work += [Placement(instance=f"v{i}", host=f"big{i % 2}",
                       resources={"VCPU": 16, "MEMORY_MB": 32_000}) for i in range(4)]
    b = bounds(fleet, work)
    assert b.hosts_in_use == 4
    assert b.lp_bound == 3      # each VGPU instance needs a whole gpu host
    assert b.compaction == 3


def test_class_no_host_offers_is_ignored_and_said():
    fleet = hosts(2)
    work = [Placement(instance="a", host="h0",
                      resources={"VCPU": 4, "MEMORY_MB": 1_000, "DISK_GB": 100})]
    b = bounds(fleet, work)
    assert (b.lp_bound, b.compaction) == (1, 1)
    assert "DISK_GB" in b.solver


def test_empty_workload():
    assert bounds(hosts(3), []).lp_bound == 0
    b = bounds([], [])
    assert (b.hosts_in_use, b.lp_bound, b.compaction) == (0, 0, 0)


def test_instance_too_big_for_every_host_is_reported_not_guessed():
    fleet = hosts(2)
    work = [Placement(instance="x", host="h0", resources={"VCPU": 64, "MEMORY_MB": 1})]
    b = bounds(fleet, work)
    assert b.lp_bound is None and b.compaction is None
    assert b.solver.startswith("skipped")


def test_lp_at_most_compaction_at_most_in_use_on_random_fleets():
    rng = random.Random(7)
    flavors = [(1, 2_000), (2, 4_000), (4, 8_000), (8, 16_000), (16, 8_000), (2, 32_000)]
    for trial in range(20):
        fleet = hosts(rng.randint(3, 12)) + hosts(rng.randint(0, 5), vcpu=32,
                                                   mem=128_000, prefix="L")
        used = {h.host: [0, 0] for h in fleet}
        cap = {h.host: h.capacity for h in fleet}
        work = []
        for i in range(rng.randint(0, 60)):
            v, m = rng.choice(flavors)
            h = rng.choice(fleet).host
            if used[h][0] + v <= cap[h]["VCPU"] and used[h][1] + m <= cap[h]["MEMORY_MB"]:
                used[h][0] += v
                used[h][1] += m
                work.append(Placement(instance=f"i{i}", host=h,
                                      resources={"VCPU": v, "MEMORY_MB": m}))
        b = bounds(fleet, work, seed=trial)
        assert b.lp_bound is not None and b.compaction is not None
        assert b.lp_bound <= b.compaction <= b.hosts_in_use, (trial, b)


def test_large_fleet_aggregates(capsys):
    # 5,000 hosts x 50,000 instances must come back (the aggregated LP is
    # tiny); the time is printed, not asserted.
    fleet = hosts(4_000, vcpu=48, mem=192_000) + hosts(1_000, vcpu=96, mem=768_000, prefix="L")
    flavors = [(1, 2_048), (2, 4_096), (4, 8_192), (8, 16_384), (2, 16_384)]
    work = [Placement(instance=f"i{i}", host=fleet[i % len(fleet)].host,
                      resources=dict(zip(("VCPU", "MEMORY_MB"), flavors[i % 5])))
            for i in range(50_000)]
    t0 = time.monotonic()
    b = bounds(fleet, work)
    with capsys.disabled():
        print(f"\n5,000 hosts x 50,000 instances: {time.monotonic() - t0:.2f}s {b}")
    assert b.lp_bound is not None and b.compaction is not None
    # 170,000 VCPU on at most 96 per host: at least 1,771 hosts.
    assert 1_771 <= b.lp_bound <= b.compaction <= 5_000
    # VCPU binds: the 1,000 large hosts hold 96,000, the rest needs 1,542
    # small ones; the aligned fill finds that packing, the LP proves it.
    assert b.lp_bound == b.compaction == 2_542
    assert b.exact and b.upper_method.startswith("heuristic")


def _brute_force_optimum(fleet, work):
    """The fewest hosts any assignment uses, by trying them all (tiny only)."""
    import itertools
    cap = [h.capacity for h in fleet]
    offered = {rc for c in cap for rc in c}   # as bounds() does: others are shared
    work = [Placement(instance=w.instance, host=w.host,
                      resources={rc: v for rc, v in w.resources.items() if rc in offered})
            for w in work]
    best = None
    for assign in itertools.product(range(len(fleet)), repeat=len(work)):
        used = [dict() for _ in fleet]
        ok = True
        for w, h in zip(work, assign):
            for rc, v in w.resources.items():
                used[h][rc] = used[h].get(rc, 0) + v
                if used[h][rc] > cap[h].get(rc, 0):
                    ok = False
                    break
            if not ok:
                break
        if ok:
            n = len(set(assign))
            best = n if best is None else min(best, n)
    return best


def test_lp_bound_never_exceeds_the_true_optimum():
    # The bound's whole point: on tiny fleets, compare with the optimum found
    # by trying every assignment.
    rng = random.Random(11)
    for trial in range(25):
        fleet = [HostCapacity(host=f"h{i}", cell="c",
                              capacity={"VCPU": rng.choice([8, 16]),
                                        "MEMORY_MB": rng.choice([16, 32]),
                                        **({"VGPU": 2} if rng.random() < 0.3 else {})})
                 for i in range(4)]
        work = []
        for i in range(rng.randint(1, 6)):
            res = {"VCPU": rng.randint(1, 9), "MEMORY_MB": rng.randint(1, 17)}
            if rng.random() < 0.15:
                res["VGPU"] = 1
            work.append(Placement(instance=f"i{i}", host="h0", resources=res))
        opt = _brute_force_optimum(fleet, work)
        b = bounds(fleet, work, seed=trial)
        if opt is None:
            assert b.compaction is None, (trial, b)
            continue
        assert b.lp_bound is not None and b.lp_bound <= opt <= b.compaction, (trial, opt, b)


def test_time_limit_is_said_and_keeps_a_true_packing():
    fleet = hosts(200)
    rng = random.Random(3)
    work = [Placement(instance=f"i{i}", host=f"h{i % 200}",
                      resources={"VCPU": rng.randint(1, 4), "MEMORY_MB": rng.randint(1, 9_999)})
            for i in range(1_000)]
    b = bounds(fleet, work, time_limit_s=0)
    # The LP had no time; the volume bound stands in, and says so.
    assert "time limit reached" in b.solver.lower()
    assert b.lower_method.startswith("volume")
    assert b.compaction is not None and b.lp_bound is not None
    assert b.lp_bound <= b.compaction <= 200


def test_the_solver_prints_nothing_on_stdout():
    """HiGHS prints a banner when a process makes its first solver; it would
    land in the middle of `billeting simulate`'s table (a fresh process, as the
    banner shows once per process)."""
    import subprocess
    import sys

    code = ("from tests.sim.test_packing import hosts, vms; from billeting.sim.packing import bounds; "
            "fleet = hosts(4); b = bounds(fleet, vms([(8, 32_000)] * 4, fleet)); print('bound', b.lp_bound)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=__file__.rsplit("/tests/", 1)[0])
    assert out.returncode == 0, out.stderr
    assert out.stdout == "bound 2\n", out.stdout


# --- bounds that obey the checker's rules: nested providers, traits, groups ----

from billeting.sim.results import GroupRule, ProviderCapacity  # noqa: E402


def tree_host(name, *children, root=None, root_traits=(), rack="r0", cell="c1"):
    """A host whose root holds ``root`` and whose children hold ``children``
    (each a (capacity, traits) pair)."""
    root = root or {"VCPU": 32, "MEMORY_MB": 64_000}
    provs = [ProviderCapacity(name=name, capacity=root, traits=list(root_traits))]
    provs += [ProviderCapacity(name=f"{name}_c{i}", capacity=cap, traits=list(tr))
              for i, (cap, tr) in enumerate(children)]
    total = Counter()
    for p in provs:
        total.update(p.capacity)
    return HostCapacity(host=name, cell=cell, capacity=dict(total), providers=provs,
                        domains={"rack": rack, "row": "w0", "room": "m0"})


def vm(name, host, pieces, group=None, required=(), forbidden=()):
    total = Counter()
    for p in pieces:
        total.update(p)
    return Placement(instance=name, host=host, resources=dict(total), pieces=pieces,
                     group=group, required=list(required), forbidden=list(forbidden))


def test_vgpus_on_child_providers_are_not_pooled():
    # Two GPUs of 3 vGPUs per host: a 2-vGPU instance takes one GPU, so a host
    # holds two, and six need three hosts (summed over the tree it looks like 3 per host).
    fleet = [tree_host(f"g{i}", ({"VGPU": 3}, ()), ({"VGPU": 3}, ())) for i in range(6)]
    work = [vm(f"i{i}", f"g{i}", [{"VCPU": 2}, {"MEMORY_MB": 2_000}, {"VGPU": 2}]) for i in range(6)]
    b = bounds(fleet, work)
    assert (b.lp_bound, b.compaction) == (3, 3) and b.exact
    # The integer program alone, as it runs when the others leave a gap.
    from billeting.sim import packing, packing_model
    ip = packing._integer_program(packing_model.build(fleet, work), 10)
    assert ip.optimal and ip.lower == ip.upper == 3


def test_vgpu_nesting_lp_relaxation_is_three_as_well():
    # The same fleet, too big for the integer program: the LP's per-provider
    # cut still sees that a GPU holds one such piece.
    fleet = [tree_host(f"g{i}", ({"VGPU": 3}, ()), ({"VGPU": 3}, ())) for i in range(400)]
    work = [vm(f"i{i}", f"g{i}", [{"VCPU": 2}, {"MEMORY_MB": 2_000}, {"VGPU": 2}]) for i in range(6)]
    b = bounds(fleet, work)
    assert b.lower_method == "LP relaxation (HiGHS), rounded up"
    assert (b.lp_bound, b.compaction) == (3, 3)


def test_anti_affinity_group_of_four_needs_four_hosts():
    fleet = hosts(6, vcpu=64, mem=256_000)
    rule = {"g": GroupRule(policy="anti-affinity")}
    work = [vm(f"a{i}", f"h{i}", [{"VCPU": 1}, {"MEMORY_MB": 1_000}], group="g") for i in range(4)]
    b = bounds(fleet, work, groups=rule)
    assert (b.lp_bound, b.compaction) == (4, 4)
    # Two per host allowed: two hosts.
    rule2 = {"g": GroupRule(policy="anti-affinity", max_server_per_host=2)}
    assert (bounds(fleet, work, groups=rule2).lp_bound, bounds(fleet, work, groups=rule2).compaction) == (2, 2)
    # A soft policy is a preference, not a rule: one host.
    soft = {"g": GroupRule(policy="soft-anti-affinity")}
    assert bounds(fleet, work, groups=soft).compaction == 1


def test_anti_affinity_per_rack_counts_racks_not_hosts():
    # Four members, one per rack; racks of two hosts: the four hosts used lie
    # in four racks, and the instances of a second, plain kind fill them.
    fleet = [HostCapacity(host=f"h{i}", cell="c1", capacity={"VCPU": 8, "MEMORY_MB": 8_000},
                          domains={"rack": f"r{i // 2}"}) for i in range(8)]
    rule = {"g": GroupRule(policy="anti-affinity", scope="rack")}
    work = [vm(f"a{i}", f"h{2 * i}", [{"VCPU": 4}], group="g") for i in range(4)]
    b = bounds(fleet, work, groups=rule)
    assert (b.lp_bound, b.compaction) == (4, 4)
    assert b.exact


def test_affinity_keeps_members_on_one_host_even_if_that_needs_a_second():
    # Three members of 6 VCPU each on 16-VCPU hosts: together they need 18,
    # so hard host-affinity is infeasible; two members of 6 plus a loose 6
    # and a loose 10: the pair share a host (12) and the 10 and 6 another.
    fleet = hosts(4, vcpu=16, mem=64_000)
    rule = {"g": GroupRule(policy="affinity")}
    work = [vm(f"a{i}", "h0", [{"VCPU": 6}], group="g") for i in range(2)]
    work += [vm("x", "h1", [{"VCPU": 10}]), vm("y", "h1", [{"VCPU": 4}])]
    b = bounds(fleet, work, groups=rule)
    assert (b.lp_bound, b.compaction) == (2, 2)
    too_big = [vm(f"a{i}", "h0", [{"VCPU": 6}], group="g") for i in range(3)]
    assert bounds(fleet, too_big, groups=rule).compaction is None


def test_required_and_forbidden_traits_restrict_hosts():
    # Only two hosts carry CUSTOM_SSD: four instances needing it and half a
    # host each fill exactly those two; the rest of the fleet cannot help.
    fleet = [tree_host(f"s{i}", root_traits=["CUSTOM_SSD"]) for i in range(2)]
    fleet += [tree_host(f"p{i}") for i in range(4)]
    work = [vm(f"i{i}", f"s{i % 2}", [{"VCPU": 16}], required=["CUSTOM_SSD"]) for i in range(4)]
    b = bounds(fleet, work)
    assert (b.lp_bound, b.compaction) == (2, 2)
    # A fifth one needing the trait fits nowhere: reported, not guessed.
    more = work + [vm("i4", "s0", [{"VCPU": 16}], required=["CUSTOM_SSD"])]
    assert bounds(fleet, more).compaction is None
    # Forbidding it sends them to the plain hosts; the LP sees the same.
    plain = [vm(f"f{i}", f"p{i}", [{"VCPU": 16}], forbidden=["CUSTOM_SSD"]) for i in range(6)]
    b = bounds(fleet, plain)
    assert (b.lp_bound, b.compaction) == (3, 3)
    big = fleet + [tree_host(f"q{i}", root_traits=["CUSTOM_SSD"]) for i in range(400)]
    b = bounds(big, plain)
    assert b.lower_method.startswith("LP") and b.lp_bound == 3 and b.compaction == 3


def test_numa_nodes_hold_their_own_share():
    # Two NUMA nodes of 8 VCPU / 16 GB: a 6-VCPU instance takes its VCPUs
    # from one node; VCPU pieces of 6 cannot share a node, so two per host.
    numa = ({"VCPU": 8, "MEMORY_MB": 16_000}, ["HW_NUMA_ROOT"])
    fleet = [tree_host(f"n{i}", numa, numa, root={"DISK_GB": 1_000}) for i in range(4)]
    work = [vm(f"i{i}", f"n{i}", [{"VCPU": 6}, {"MEMORY_MB": 4_000}, {"DISK_GB": 10}]) for i in range(4)]
    b = bounds(fleet, work)
    assert (b.lp_bound, b.compaction) == (2, 2)


def _brute_optimum(fleet, work, rules):
    """Fewest hosts over every assignment of instances to hosts and of their
    pieces to providers, checked by the checker's own rules (tiny only)."""
    import itertools
    best = None
    for assign in itertools.product(range(len(fleet)), repeat=len(work)):
        n = len(set(assign))
        if best is not None and n >= best:
            continue
        if _legal(fleet, work, assign, rules):
            best = n
    return best


def _legal(fleet, work, assign, rules):
    import itertools
    from collections import defaultdict as dd
    members = dd(Counter)
    for w, h in zip(work, assign):
        rule = rules.get(w.group)
        if rule and rule.policy in ("affinity", "anti-affinity"):
            members[w.group][fleet[h].domains.get(rule.scope, fleet[h].host)
                             if rule.scope != "host" else fleet[h].host] += 1
    for g, doms in members.items():
        r = rules[g]
        if r.policy == "affinity" and len(doms) > 1:
            return False
        if r.policy == "anti-affinity" and max(doms.values()) > r.max_server_per_host:
            return False
    for hi, h in enumerate(fleet):
        here = [w for w, a in zip(work, assign) if a == hi]
        provs = h.providers or [ProviderCapacity(name=h.host, capacity=h.capacity)]
        slots = [(w, p) for w in here for p in w.pieces]
        ok = False
        for choice in itertools.product(range(len(provs)), repeat=len(slots)):
            used = [Counter() for _ in provs]
            for (w, p), c in zip(slots, choice):
                used[c].update(p)
            if any(v > provs[c].capacity.get(rc, 0) for c, u in enumerate(used) for rc, v in u.items()):
                continue
            fine = True
            for w in here:
                have = set()
                for (w2, _), c in zip(slots, choice):
                    if w2 is w:
                        have |= set(provs[c].traits)
                if not set(w.required) <= have or set(w.forbidden) & have:
                    fine = False
                    break
            if fine:
                ok = True
                break
        if not ok:
            return False
    return True


def test_bounds_bracket_the_optimum_with_trees_traits_and_groups():
    rng = random.Random(5)
    for trial in range(30):
        fleet = []
        for i in range(3):
            kids = [({"VGPU": rng.choice([1, 2, 3])}, rng.choice([(), ("CUSTOM_A",)]))
                    for _ in range(rng.randint(0, 2))]
            fleet.append(tree_host(f"h{i}", *kids, root={"VCPU": rng.choice([4, 8])},
                                   root_traits=rng.choice([(), ("CUSTOM_B",)]), rack=f"r{i // 2}"))
        rules = {"g": GroupRule(policy=rng.choice(["affinity", "anti-affinity"]),
                                scope=rng.choice(["host", "rack"]))}
        work = []
        for i in range(rng.randint(1, 4)):
            pieces = [{"VCPU": rng.randint(1, 5)}]
            if rng.random() < 0.4:
                pieces.append({"VGPU": rng.randint(1, 2)})
            work.append(vm(f"i{i}", "h0", pieces, group="g" if rng.random() < 0.4 else None,
                           required=["CUSTOM_A"] if rng.random() < 0.15 else [],
                           forbidden=["CUSTOM_B"] if rng.random() < 0.15 else []))
        opt = _brute_optimum(fleet, work, rules)
        b = bounds(fleet, work, groups=rules, seed=trial)
        if opt is None:
            assert b.compaction is None, (trial, b)
            continue
        assert b.lp_bound is not None and b.lp_bound <= opt, (trial, opt, b)
        assert b.compaction is not None and opt <= b.compaction, (trial, opt, b)
        assert b.exact and b.lp_bound == opt == b.compaction, (trial, opt, b)   # small: proven optimal
        # The relaxation alone (what large fleets get) stays below the optimum too.
        from billeting.sim import packing, packing_model
        lp, _ = packing._lp_relaxation(packing_model.build(fleet, work, rules), 10)
        assert lp is not None and lp <= opt, (trial, opt, lp)
        ff, _ = packing._heuristic(packing_model.build(fleet, work, rules), time.monotonic() + 10, 0)
        assert ff is None or ff >= opt, (trial, opt, ff)
        ip = packing._integer_program(packing_model.build(fleet, work, rules), 10)
        assert ip.optimal and ip.lower == ip.upper == opt, (trial, opt, ip.note)


def test_anti_affinity_on_a_fleet_too_big_for_the_integer_program():
    # 400 hosts: the LP relaxation's per-host cut and the heuristic agree on
    # five hosts for a group of five, while plain volume would say one.
    fleet = hosts(400, vcpu=64, mem=256_000)
    rule = {"g": GroupRule(policy="anti-affinity")}
    work = [vm(f"a{i}", f"h{i}", [{"VCPU": 1}, {"MEMORY_MB": 1_000}], group="g") for i in range(5)]
    work += [vm(f"x{i}", f"h{i}", [{"VCPU": 1}]) for i in range(20)]
    b = bounds(fleet, work, groups=rule)
    assert b.lower_method.startswith("LP") and b.upper_method.startswith("heuristic")
    assert (b.lp_bound, b.compaction) == (5, 5)


def test_integer_program_closes_a_gap_the_relaxation_leaves():
    # No two of these share a host (4+4 are a rack-anti-affine pair, 4+5 and
    # 5+5 exceed 8): four hosts. Divisible, the LP sees 18 / 8 -> 3; the
    # greedy packing finds 4, and the integer program proves it.
    fleet = [HostCapacity(host=f"h{i}", cell="c1", capacity={"VCPU": 8}, domains={"rack": f"r{i // 2}"})
             for i in range(4)]
    rule = {"g": GroupRule(policy="anti-affinity", scope="rack")}
    work = [vm("a", "h0", [{"VCPU": 4}], group="g"), vm("b", "h2", [{"VCPU": 4}], group="g"),
            vm("x", "h1", [{"VCPU": 5}]), vm("y", "h3", [{"VCPU": 5}])]
    from billeting.sim import packing, packing_model
    lp, _ = packing._lp_relaxation(packing_model.build(fleet, work, rule), 10)
    assert lp == 3
    b = bounds(fleet, work, groups=rule)
    assert (b.lp_bound, b.compaction) == (4, 4) and b.exact
    assert b.lower_method.startswith("exact") and "integer program" in b.solver


def test_a_real_run_records_trees_and_pieces_and_bounds_them(tmp_path):
    # End to end: the simulator's own record of a nested fleet gives the
    # bound the hand count gives.
    import json
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-m", "billeting.cli", "simulate", "tests/sim/data/nested-vgpu-bound.toml",
                           "--out", str(tmp_path), "--quiet", "--no-html"], cwd=root, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    d = json.loads((tmp_path / "result.json").read_text())["designs"][0]
    assert d["succeeded"] == 6
    assert all(len(h["providers"]) == 3 for h in d["hosts"])          # root and two GPUs
    # Every piece here is one class, so the record leaves pieces out (one per class is its meaning).
    assert not any(p.get("pieces") for p in d["placements"])
    assert all(len(p["allocations"]) == 2 for p in d["placements"])   # root and one GPU
    assert (d["packing"]["lp_bound"], d["packing"]["compaction"]) == (3, 3)
