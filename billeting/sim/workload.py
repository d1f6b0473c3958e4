"""The requests of a run, drawn once from the scenario and the seed, so every
design faces exactly the same arrivals, shapes, groups and lifetimes."""
from __future__ import annotations

import math
import random
from dataclasses import dataclass

from billeting.sim.scenario import FlavorSpec, GroupSpec, Lifetimes, Scenario


@dataclass(frozen=True, slots=True)
class GroupInstance:
    key: str            # unique per drawn group, e.g. "ha-rack#12"
    spec: GroupSpec


@dataclass(frozen=True, slots=True)
class Arrival:
    index: int
    at_s: float
    flavor: FlavorSpec
    count: int                       # instances in this request
    lifetimes: tuple[float | None, ...]   # per instance; None: stays to the end
    group: GroupInstance | None = None


def _lifetime(rng: random.Random, spec: Lifetimes) -> float | None:
    if spec.distribution == "forever":
        return None
    if spec.distribution == "fixed":
        return spec.mean_s
    if spec.distribution == "exponential":
        return rng.expovariate(1.0 / spec.mean_s)
    # lognormal with the requested mean
    mu = math.log(spec.mean_s) - spec.sigma ** 2 / 2
    return rng.lognormvariate(mu, spec.sigma)


def generate(s: Scenario) -> list[Arrival]:
    rng = random.Random(f"{s.seed}/workload")
    out: list[tuple[float, FlavorSpec, int, GroupInstance | None, tuple]] = []
    groups_drawn = 0

    def lifetimes(n: int, fixed: float | None = None) -> tuple[float | None, ...]:
        return tuple(fixed if fixed is not None else _lifetime(rng, s.lifetimes) for _ in range(n))

    def draw(at: float) -> None:
        nonlocal groups_drawn
        choices: list[FlavorSpec | GroupSpec] = [*s.flavors, *s.groups]
        weights = [c.weight for c in choices]
        pick = rng.choices(choices, weights)[0]
        if isinstance(pick, FlavorSpec):
            out.append((at, pick, pick.instances, None, lifetimes(pick.instances)))
            return
        groups_drawn += 1
        g = GroupInstance(f"{pick.name}#{groups_drawn}", pick)
        flavor = s.flavor(pick.flavor)
        if pick.together:
            out.append((at, flavor, pick.size, g, lifetimes(pick.size)))
        else:
            for k in range(pick.size):   # members one by one, a second apart
                out.append((at + k, flavor, 1, g, lifetimes(1)))

    if s.trace:
        groups: dict[str, GroupInstance] = {}
        specs = {g.name: g for g in s.groups}
        for row in s.trace:
            g = None
            if row.group:
                g = groups.setdefault(row.group, GroupInstance(row.group, specs[row.group.split("#", 1)[0]]))
            life = row.lifetime_s if row.lifetime_s is not None else _lifetime(rng, s.lifetimes)
            out.append((row.arrival_s, s.flavor(row.flavor), 1, g, (life,)))
    else:
        t = 0.0
        for _ in range(s.arrivals.requests):
            t += rng.expovariate(s.arrivals.rate_per_s)
            draw(t)
        for burst in s.arrivals.bursts:
            for _ in range(burst.count):
                draw(burst.at_s)
    out.sort(key=lambda a: a[0])   # stable: draws at one instant keep their order
    return [Arrival(index=i, at_s=at, flavor=f, count=n, lifetimes=life, group=g)
            for i, (at, f, n, g, life) in enumerate(out)]
