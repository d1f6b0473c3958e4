"""Packing bounds on fleets small enough that the optimum is known by hand."""
import random
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
    assert "stopped at the time limit" in b.solver
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
