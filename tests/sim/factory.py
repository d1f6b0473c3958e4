"""SYNTHETIC RunResults for testing the readers of a run (table, report,
narrative, compare). The numbers are made up to be plausible; they are not
measurements of anything."""
from __future__ import annotations

import math
import random

from billeting.sim.results import (DesignResult, Distribution, FillPoint, HostCapacity,
                                   PackingBound, Placement, RunResult, Violation)

SYNTHETIC = "SYNTHETIC test data -- not a measured result"


def dist(values: list[float]) -> Distribution:
    v = sorted(values)
    if not v:
        return Distribution(count=0, p50=0, p90=0, p99=0, mean=0, max=0, sample=[])

    def q(p: float) -> float:
        return v[min(len(v) - 1, int(p * len(v)))]

    return Distribution(count=len(v), p50=q(0.5), p90=q(0.9), p99=q(0.99),
                        mean=sum(v) / len(v), max=v[-1], sample=v[:: max(1, len(v) // 1000)])


def lognormal(rng: random.Random, n: int, median: float, sigma: float) -> list[float]:
    return [median * math.exp(rng.gauss(0, sigma)) for _ in range(n)]


def design(name: str = "scheduler-claims", kind: str | None = None, *, seed: int = 1,
           requested: int = 1000, succeeded: int | None = None, upcalls: int = 0,
           claim_conflicts: int = 0, latency_ms: float = 4.0, latency_sigma: float = 0.5,
           active_s: float = 30.0, attempts_mean: float = 1.0, retried: int = 0,
           placement_per_build: float = 3.0, violations: int = 0,
           hosts_in_use: int = 100, lp_bound: int | None = 90, compaction: int | None = 95,
           stranded: dict[str, float] | None = None, error_reasons: dict[str, int] | None = None,
           knobs: dict | None = None, fill_points: int = 40, with_end_state: bool = False
           ) -> DesignResult:
    rng = random.Random(f"{name}-{seed}")
    succeeded = requested if succeeded is None else succeeded
    errored = requested - succeeded
    attempts = [1.0] * requested
    for i in range(min(retried, requested)):
        attempts[i] = 2.0 + (i % 3 == 0)
    lat = lognormal(rng, 1000, latency_ms, latency_sigma)
    act = lognormal(rng, min(succeeded, 1000), active_s, 0.25)
    fill = []
    rate = 2.0 + rng.random() * 2     # each design fills at its own pace
    for k in range(fill_points):
        t = 3600.0 * k / max(1, fill_points - 1)
        f = 0.9 * (succeeded / max(1, requested)) * (1 - math.exp(-rate * k / max(1, fill_points)))
        fill.append(FillPoint(t_s=t, active=int(succeeded * f / 0.9),
                              hosts_in_use=int(hosts_in_use * min(1.0, f / 0.85)),
                              vcpu_fill=f, memory_fill=f * 0.93))
    hosts, placements = [], []
    if with_end_state:
        hosts = [HostCapacity(host=f"h{i}", cell=f"cell{i % 2}",
                              capacity={"VCPU": 16, "MEMORY_MB": 65536}) for i in range(8)]
        placements = [Placement(instance=f"i{i}", host=f"h{i % 8}",
                                resources={"VCPU": 4, "MEMORY_MB": 8192}) for i in range(12)]
    return DesignResult(
        name=name, design=kind or name.split("-2alt")[0].split(" ")[0],
        knobs=knobs or {}, requested=requested, succeeded=succeeded, errored=errored,
        error_reasons=error_reasons if error_reasons is not None else (
            {"No valid host was found": errored} if errored else {}),
        attempts_per_build=dist(attempts), retries=int(sum(a - 1 for a in attempts)), never_built=0,
        upcalls=upcalls, claim_conflicts=claim_conflicts,
        placement_requests=int(placement_per_build * requested),
        placement_requests_per_build=placement_per_build,
        scheduler_latency_ms=dist(lat), time_to_active_s=dist(act),
        violations=[Violation(kind="capacity", host=f"h{i}", instance=f"i{i}",
                              detail="VCPU used 17 > 16") for i in range(violations)],
        fill=fill,
        packing=None if lp_bound is None and compaction is None and hosts_in_use is None
        else PackingBound(hosts_in_use=hosts_in_use, lp_bound=lp_bound, compaction=compaction,
                          solver="highs (synthetic)"),
        stranded=stranded if stranded is not None else {"VCPU": 0.02, "MEMORY_MB": 0.05},
        anti_affinity_spread={"host": 1.0, "rack": 0.9},
        wall_s=12.5, hosts=hosts, placements=placements)


def run(*designs: DesignResult, scenario: str = "seeds-90pct-fill", seed: int = 42,
        hosts: int = 120, requests: int = 1000) -> RunResult:
    return RunResult(scenario=scenario, seed=seed, hosts=hosts, cells=2, requests=requests,
                     designs=list(designs) or [design()], billeting_version="0.1.0",
                     started_at="2026-11-23T06:00:00Z", notes=[SYNTHETIC])


def three_designs(requested: int = 1000) -> RunResult:
    """The seeds' argument in made-up numbers: legacy upcalls, the cell
    designs retry inside the cell."""
    n = requested
    return run(
        design("legacy", requested=n, succeeded=n - 31, upcalls=74, claim_conflicts=58,
               retried=74, attempts_mean=1.11, latency_ms=5.1, active_s=41.0,
               placement_per_build=3.4, hosts_in_use=112, lp_bound=101, compaction=106,
               error_reasons={"Exceeded maximum number of retries": 19,
                              "No valid host was found": 12},
               knobs={"max_attempts": 3}),
        design("conductor-claims", requested=n, succeeded=n - 4, upcalls=0, claim_conflicts=37,
               retried=52, attempts_mean=1.06, latency_ms=4.6, active_s=33.0,
               placement_per_build=4.1, hosts_in_use=108, lp_bound=101, compaction=105,
               error_reasons={"Exceeded maximum number of retries": 4},
               knobs={"alternates": 2}),
        design("scheduler-claims", requested=n, succeeded=n, upcalls=0, claim_conflicts=21,
               retried=49, attempts_mean=1.05, latency_ms=6.3, active_s=31.5,
               placement_per_build=2.6, hosts_in_use=105, lp_bound=101, compaction=104,
               knobs={"alternates": 2}),
        requests=n)
