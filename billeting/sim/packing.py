"""How few hosts the final workload could fit on: bounds to judge packing.

Two figures bracket the true optimum (the fewest hosts, an NP-hard
multi-dimensional bin-packing problem):

* ``lp_bound`` -- a lower bound. The linear-programming relaxation lets an
  instance be split across hosts. Every real (integral) packing is also a
  solution of the relaxation with the same host count, so the relaxation's
  optimum is <= the true optimum, and since host counts are integers its
  ceiling is too. We solve it *aggregated*: hosts of the same shape form one
  column ``Y_t`` (0..count of that shape) and instances of the same size one
  demand row; summing any per-host solution over those groups gives an
  aggregated solution with the same objective, so the aggregated optimum is
  <= the per-host one and still a lower bound -- and it is tiny (shapes x
  sizes), so 5,000 hosts x 50,000 instances solve in well under a second.
  One family of valid cuts tightens it: on a host of shape t, at most one
  instance can use more than half of class c, so the "big in c" instances on
  shape t number at most ``Y_t``. A real packing satisfies it, so the bound
  stays a lower bound.
* ``compaction`` -- an upper bound, as Borg measures it: re-pack the whole
  workload from scratch with best-fit decreasing onto ever fewer hosts (in
  several host orders) and keep the fewest that worked.

Resource classes no host offers (e.g. DISK_GB held by a sharing provider)
cannot constrain which host an instance uses, so both figures ignore them.
"""
from __future__ import annotations

import math
import os
import random
import sys
import threading
import time
from collections import Counter

import numpy as np

from billeting.sim.results import HostCapacity, PackingBound, Placement

_EPS = 1e-6


def bounds(hosts: list[HostCapacity], placements: list[Placement], *,
           time_limit_s: float = 30, seed: int = 0) -> PackingBound:
    """Both bounds for the workload ``placements`` on the fleet ``hosts``."""
    in_use = len({p.host for p in placements})
    if not placements:
        return PackingBound(hosts_in_use=0, lp_bound=0, compaction=0,
                            solver="none needed: empty workload")
    if not hosts:
        return PackingBound(hosts_in_use=in_use, lp_bound=None, compaction=None,
                            solver="skipped: no host capacities recorded")
    prob = _Problem.build(hosts, placements)
    if prob.unplaceable:
        return PackingBound(
            hosts_in_use=in_use, lp_bound=None, compaction=None,
            solver=f"skipped: {prob.unplaceable} instance(s) fit no host shape")
    deadline = time.monotonic() + time_limit_s
    floor = prob.trivial_bound()
    lp, solver = _lp_bound(prob, time_limit_s)
    if lp is None:
        lp_bound = floor if not solver.startswith("skipped: infeasible") else None
    else:
        lp_bound = max(lp, floor)
    compaction, stopped = _compaction(prob, deadline, seed)
    if stopped:
        solver += "; compaction stopped at the time limit (its figure is not the best it could be)"
    if compaction is not None and _fits_as_placed(prob, hosts, placements):
        compaction = min(compaction, in_use)
    elif compaction is None and _fits_as_placed(prob, hosts, placements):
        compaction = in_use
    if prob.dropped:
        solver += f"; ignored classes no host offers: {', '.join(sorted(prob.dropped))}"
    return PackingBound(hosts_in_use=in_use, lp_bound=lp_bound,
                        compaction=compaction, solver=solver)


class _Problem:
    """The workload and fleet grouped into shapes, classes scaled to 0..1."""

    def __init__(self) -> None:
        self.classes: list[str] = []
        self.dropped: set[str] = set()
        self.host_cap = np.zeros((0, 0))      # host shapes x classes (scaled)
        self.host_count = np.zeros(0, dtype=np.int64)
        self.host_names: list[list[str]] = []  # names per shape
        self.item_size = np.zeros((0, 0))     # instance sizes x classes (scaled)
        self.item_count = np.zeros(0, dtype=np.int64)
        self.unplaceable = 0

    @classmethod
    def build(cls, hosts: list[HostCapacity], placements: list[Placement]) -> "_Problem":
        p = cls()
        offered = {rc for h in hosts for rc, v in h.capacity.items() if v > 0}
        wanted = {rc for pl in placements for rc, v in pl.resources.items() if v > 0}
        p.classes = sorted(offered)
        p.dropped = wanted - offered
        shapes: dict[tuple[int, ...], list[str]] = {}
        for h in hosts:
            key = tuple(max(0, int(h.capacity.get(rc, 0))) for rc in p.classes)
            shapes.setdefault(key, []).append(h.host)
        sizes = Counter(tuple(int(pl.resources.get(rc, 0)) for rc in p.classes)
                        for pl in placements)
        raw_caps = np.array(list(shapes), dtype=float).reshape(len(shapes), len(p.classes))
        scale = raw_caps.max(axis=0) if len(shapes) else np.ones(len(p.classes))
        scale[scale == 0] = 1.0
        p.host_cap = raw_caps / scale
        p.host_count = np.array([len(v) for v in shapes.values()], dtype=np.int64)
        p.host_names = list(shapes.values())
        # Largest first: the order best-fit decreasing wants.
        items = sorted(sizes.items(), key=lambda kv: -sum(np.array(kv[0]) / scale))
        p.item_size = (np.array([k for k, _ in items], dtype=float)
                       .reshape(len(items), len(p.classes)) / scale)
        p.item_count = np.array([n for _, n in items], dtype=np.int64)
        fits = p.fits()
        p.unplaceable = int(p.item_count[~fits.any(axis=1)].sum())
        return p

    def fits(self) -> np.ndarray:
        """fits[k, t]: one instance of size k fits on an empty host of shape t."""
        return (self.item_size[:, None, :] <= self.host_cap[None, :, :] + _EPS).all(axis=2)

    def trivial_bound(self) -> int:
        """Per class, total demand over the largest host: a floor for sanity."""
        demand = (self.item_size * self.item_count[:, None]).sum(axis=0)
        largest = self.host_cap.max(axis=0)
        need = [d / c for d, c in zip(demand, largest) if c > 0]
        return math.ceil(max(need, default=0.0) - _EPS)


_BANNER_LOCK = threading.Lock()
_BANNER_SHOWN = False


def _new_highs(highspy):
    """A silent solver. HiGHS prints its banner on the process's stdout when
    the first solver is made, before any option can stop it, which would land
    in the middle of the simulator's table (and of ``--quiet``); that one
    construction runs with file descriptor 1 pointed at /dev/null."""
    global _BANNER_SHOWN
    with _BANNER_LOCK:
        if _BANNER_SHOWN:
            h = highspy.Highs()
        else:
            sys.stdout.flush()
            saved, null = os.dup(1), os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(null, 1)
                h = highspy.Highs()
            finally:
                os.dup2(saved, 1)
                os.close(saved)
                os.close(null)
            _BANNER_SHOWN = True
    h.silent()
    return h


def _lp_bound(prob: _Problem, time_limit_s: float) -> tuple[int | None, str]:
    try:
        import highspy
    except ImportError:  # pragma: no cover - highspy is a dependency
        return None, "trivial bound only: highspy not installed"
    T, K, C = len(prob.host_count), len(prob.item_count), len(prob.classes)
    fits = prob.fits()
    # Columns: Y_t for each host shape, then X_kt for each fitting pair.
    pairs = [(k, t) for k in range(K) for t in range(T) if fits[k, t]]
    col_of = {kt: T + i for i, kt in enumerate(pairs)}
    ncol = T + len(pairs)
    cost = np.concatenate([np.ones(T), np.zeros(len(pairs))])
    lower = np.zeros(ncol)
    upper = np.concatenate([prob.host_count.astype(float), np.full(len(pairs), np.inf)])

    rows: list[tuple[float, float, list[int], list[float]]] = []
    for k in range(K):   # every instance placed (fractionally)
        idx = [col_of[(k, t)] for t in range(T) if fits[k, t]]
        rows.append((float(prob.item_count[k]), float(prob.item_count[k]), idx, [1.0] * len(idx)))
    for t in range(T):
        for c in range(C):
            ks = [k for k in range(K) if fits[k, t] and prob.item_size[k, c] > 0]
            if not ks:
                continue
            # capacity: sum_k size_kc X_kt <= cap_tc Y_t
            rows.append((-np.inf, 0.0, [col_of[(k, t)] for k in ks] + [t],
                         [float(prob.item_size[k, c]) for k in ks] + [-float(prob.host_cap[t, c])]))
            # at most one instance per host uses more than half of class c
            big = [k for k in ks if 2 * prob.item_size[k, c] > prob.host_cap[t, c] + _EPS]
            if big:
                rows.append((-np.inf, 0.0, [col_of[(k, t)] for k in big] + [t],
                             [1.0] * len(big) + [-1.0]))

    h = _new_highs(highspy)
    h.setOptionValue("time_limit", float(time_limit_s))
    h.addCols(ncol, cost, lower, upper, 0, np.array([], dtype=np.int32),
              np.array([], dtype=np.int32), np.array([], dtype=float))
    starts, index, value = [], [], []
    for _, _, idx, val in rows:
        starts.append(len(index))
        index.extend(idx)
        value.extend(val)
    h.addRows(len(rows), np.array([r[0] for r in rows]), np.array([r[1] for r in rows]),
              len(index), np.array(starts, dtype=np.int32),
              np.array(index, dtype=np.int32), np.array(value, dtype=float))
    h.run()
    status = h.getModelStatus()
    name = h.modelStatusToString(status)
    if status == highspy.HighsModelStatus.kOptimal:
        opt = h.getInfo().objective_function_value
        return math.ceil(opt - _EPS), f"highs {h.version()} LP ({T} host shapes x {K} sizes)"
    if status == highspy.HighsModelStatus.kInfeasible:
        return None, "skipped: infeasible -- the workload exceeds the fleet"
    return None, f"trivial bound only: highs stopped ({name})"


class _OutOfTime(Exception):
    pass


def _pack(prob: _Problem, allowed: np.ndarray, deadline: float = float("inf")) -> bool:
    """Best-fit decreasing of the whole workload onto the hosts in ``allowed``
    (counts per host shape). Instances of one size are placed together: for
    identical instances best-fit fills the tightest host that fits until it
    is full, then the next tightest, which is what this does in bulk."""
    # One row per host actually opened: residual capacity, scaled.
    shape_of = np.repeat(np.arange(len(allowed)), allowed)
    resid = prob.host_cap[shape_of].copy()
    if resid.shape[0] == 0:
        return not prob.item_count.any()
    for n_size, (size, count) in enumerate(zip(prob.item_size, prob.item_count)):
        if n_size % 64 == 63 and time.monotonic() > deadline:
            raise _OutOfTime
        need = size > 0
        if not need.any():
            continue
        with np.errstate(divide="ignore", invalid="ignore"):
            per = np.floor((resid[:, need] + _EPS) / size[need]).min(axis=1)
        per = np.maximum(per, 0).astype(np.int64)
        cand = np.nonzero(per)[0]
        if per[cand].sum() < count:
            return False
        tight = resid[cand].sum(axis=1)      # least room left = best fit
        order = cand[np.argsort(tight, kind="stable")]
        left = int(count)
        for h in order:
            n = min(left, int(per[h]))
            resid[h] -= n * size
            left -= n
            if not left:
                break
    return True


def _compaction(prob: _Problem, deadline: float, seed: int) -> tuple[int | None, bool]:
    """Fewest hosts best-fit decreasing managed. Borg removes hosts one by one
    and repacks until the workload no longer fits; we remove them shape by
    shape (hosts of one shape are interchangeable), binary-searching how many
    of each shape can go, over a few shape orders -- smallest shapes first,
    then random ones. ``None`` if even the whole fleet did not pack; the flag
    says whether the time limit cut the search short."""
    rng = random.Random(seed)
    T = len(prob.host_count)
    if not _pack(prob, prob.host_count):
        return None, False
    stopped = False
    size = prob.host_cap.sum(axis=1)
    orders = [sorted(range(T), key=lambda t: size[t])]
    for _ in range(3):
        o = list(range(T))
        rng.shuffle(o)
        orders.append(o)
    best = int(prob.host_count.sum())
    for order in orders:
        counts = prob.host_count.copy()
        for t in order:
            lo, hi = 0, int(counts[t])
            while lo < hi:
                if time.monotonic() >= deadline:
                    stopped = True
                    break
                trial = counts.copy()
                trial[t] = mid = (lo + hi) // 2
                try:
                    fits = _pack(prob, trial, deadline)
                except _OutOfTime:
                    stopped = True
                    break           # keep the last count that packed
                if fits:
                    hi = mid
                else:
                    lo = mid + 1
            counts[t] = hi
        best = min(best, int(counts.sum()))
        if stopped or time.monotonic() >= deadline or T == 1:
            break
    return best, stopped


def _fits_as_placed(prob: _Problem, hosts: list[HostCapacity],
                    placements: list[Placement]) -> bool:
    """Whether the placement as it stands respects every host's capacity (so
    its own host count is a packing that works)."""
    cap = {h.host: h.capacity for h in hosts}
    used: dict[str, Counter] = {}
    for pl in placements:
        if pl.host not in cap:
            return False
        used.setdefault(pl.host, Counter()).update(
            {rc: v for rc, v in pl.resources.items() if rc in prob.classes})
    return all(v <= cap[h].get(rc, 0) for h, u in used.items() for rc, v in u.items())
