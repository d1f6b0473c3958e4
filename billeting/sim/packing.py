"""How few hosts the final workload could fit on: bounds to judge packing.

The true optimum (the fewest hosts holding every instance alive at the end,
under every rule the checker enforces -- capacity per provider, traits,
server groups, see ``sim.packing_model``) is bracketed by two figures:

* ``lp_bound``, a lower bound, and ``compaction``, an upper bound.
* The lower bound is first the LP relaxation of the integer program below,
  aggregated over identical hosts (a host shape's count ``Y_t`` may be fractional,
  instances may be split), with valid cuts: a provider holds at most
  ``floor(cap / size)`` pieces of one size, at most one piece over half of a
  class, and a host at most ``max_server_per_host`` members of an
  anti-affinity group. Every legal packing satisfies it, so its optimum
  rounded up is a lower bound. Affinity and domain scopes above the host are
  relaxed away there (still a lower bound, only a weaker one).
* The heuristic upper bound is the best of a few greedy packings, server
  groups first in each: first-fit decreasing (instance kinds largest first,
  each onto the first host of a host order where a legal layout fits) and an
  alignment fill (host by host, the kind that best matches what the host
  has left). The run's own placement counts too when it is legal.
* When those two do not meet and the instance is small (``IP_MAX_COLUMNS``
  layout variables, ``IP_MAX_HOSTS`` hosts), it is solved exactly as an
  integer program with HiGHS: one count per (instance kind, host, layout),
  one binary per host; then both figures are the optimum. Stopped by the
  time limit, the program still gives a proven lower bound (its dual bound)
  and its best packing. ``lower_method`` and ``upper_method`` name what gave
  each figure; ``exact`` says they met.
"""
from __future__ import annotations

import math
import os
import random
import sys
import threading
import time
from collections import Counter, defaultdict
from functools import reduce

from billeting.sim import packing_model as pm
from billeting.sim.results import GroupRule, HostCapacity, PackingBound, Placement

IP_MAX_COLUMNS = 6_000
IP_MAX_HOSTS = 300
IP_TIME_SHARE = 0.5          # of the time limit kept for the integer program
_EPS = 1e-6

EXACT = "exact: integer program (HiGHS), optimal"
IP_DUAL = "integer program's proven bound (HiGHS, stopped at the time limit)"
IP_BEST = "integer program's best packing (HiGHS, stopped at the time limit)"
LP = "LP relaxation (HiGHS), rounded up"
VOLUME = "volume per class over the largest host (HiGHS gave nothing better)"
HEURISTIC = "heuristic: best of greedy packings (first-fit decreasing, alignment fill)"
AS_PLACED = "the run's own placement"


def bounds(hosts: list[HostCapacity], placements: list[Placement], *,
           groups: dict[str, GroupRule] | None = None,
           time_limit_s: float = 30, seed: int = 0) -> PackingBound:
    """Both bounds for the workload ``placements`` on the fleet ``hosts``."""
    in_use = len({p.host for p in placements})
    if not placements:
        return PackingBound(hosts_in_use=0, lp_bound=0, compaction=0, exact=True,
                            solver="none needed: empty workload")
    if not hosts:
        return PackingBound(hosts_in_use=in_use, lp_bound=None, compaction=None,
                            solver="skipped: no host capacities recorded")
    deadline = time.monotonic() + time_limit_s
    prob = pm.build(hosts, placements, groups)
    bad = prob.unplaceable()
    if bad:
        return PackingBound(hosts_in_use=in_use, lp_bound=None, compaction=None,
                            solver=f"skipped: {bad} instance(s) fit no host shape")
    notes: list[str] = []
    lower, lower_how = _volume(prob), VOLUME
    upper: int | None = None
    upper_how = ""
    # The relaxation and the greedy packings first: cheap, and when they
    # meet, the optimum is proven without the integer program.
    share = time.monotonic() + time_limit_s * (1 - IP_TIME_SHARE)
    lp, note = _lp_relaxation(prob, max(0.0, share - time.monotonic()))
    notes.append(note)
    if lp is not None and lp >= lower:
        lower, lower_how = lp, LP
    ff, note = _heuristic(prob, share, seed, target=lower)
    notes.append(note)
    if ff is not None:
        upper, upper_how = ff, HEURISTIC
    if (upper is None or upper > lower) and _ip_small(prob):
        ip = _integer_program(prob, max(0.0, deadline - time.monotonic()))
        notes.append(ip.note)
        if ip.optimal:
            lower, lower_how, upper, upper_how = ip.lower, EXACT, ip.upper, EXACT
        elif ip.lower is None and ip.upper is None and "infeasible" in ip.note:
            upper, upper_how = None, ""
        else:
            if ip.lower is not None and ip.lower > lower:
                lower, lower_how = ip.lower, IP_DUAL
            if ip.upper is not None and (upper is None or ip.upper < upper):
                upper, upper_how = ip.upper, IP_BEST
    if pm.legal_as_placed(prob, hosts, placements) and (upper is None or in_use < upper):
        upper, upper_how = in_use, AS_PLACED
    if upper is not None and lower > upper:   # cannot happen for a sound bound: say so loudly
        notes.append(f"INCONSISTENT: lower bound {lower} above a packing of {upper}")
    if prob.dropped:
        notes.append(f"ignored classes no host offers: {', '.join(sorted(prob.dropped))}")
    exact = upper is not None and lower == upper
    return PackingBound(hosts_in_use=in_use, lp_bound=lower, compaction=upper,
                        solver="; ".join(n for n in notes if n),
                        lower_method=lower_how, upper_method=upper_how, exact=exact)


def _volume(prob: pm.Problem) -> int:
    """Per class, the total demand over the largest host's capacity."""
    need = 0.0
    for c in range(len(prob.classes)):
        demand = sum(n * sum(p[c] for p in k.pieces) for k, n in zip(prob.kinds, prob.count))
        largest = max(prob.shape_capacity(t)[c] for t in range(len(prob.shapes)))
        if largest > 0:
            need = max(need, demand / largest)
    return max(1, math.ceil(need - _EPS)) if prob.count else 0


# --------------------------------------------------------------------------- HiGHS

_BANNER_LOCK = threading.Lock()
_BANNER_SHOWN = False


def _new_highs():
    """A silent solver. HiGHS prints its banner on the process's stdout when
    the first solver is made, before any option can stop it, which would land
    in the middle of the simulator's table (and of ``--quiet``); that one
    construction runs with file descriptor 1 pointed at /dev/null."""
    import highspy

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


class _Model:
    """Columns and rows collected in Python, handed to HiGHS in one go."""

    def __init__(self) -> None:
        self.cost: list[float] = []
        self.lo: list[float] = []
        self.hi: list[float] = []
        self.integer: list[int] = []
        self.rows: list[tuple[float, float, list[int], list[float]]] = []

    def col(self, cost: float, lo: float, hi: float, integer: bool = False) -> int:
        self.cost.append(cost)
        self.lo.append(lo)
        self.hi.append(hi)
        if integer:
            self.integer.append(len(self.cost) - 1)
        return len(self.cost) - 1

    def row(self, lo: float, hi: float, idx: list[int], val: list[float]) -> None:
        if idx:
            self.rows.append((lo, hi, idx, val))

    def solve(self, time_limit_s: float, mip: bool):
        import highspy
        import numpy as np

        h = _new_highs()
        h.setOptionValue("time_limit", max(0.001, float(time_limit_s)))
        n = len(self.cost)
        h.addCols(n, np.array(self.cost), np.array(self.lo), np.array(self.hi), 0,
                  np.array([], dtype=np.int32), np.array([], dtype=np.int32), np.array([], dtype=float))
        starts, index, value = [], [], []
        for _, _, idx, val in self.rows:
            starts.append(len(index))
            index.extend(idx)
            value.extend(val)
        h.addRows(len(self.rows), np.array([r[0] for r in self.rows], dtype=float),
                  np.array([r[1] for r in self.rows], dtype=float), len(index),
                  np.array(starts, dtype=np.int32), np.array(index, dtype=np.int32),
                  np.array(value, dtype=float))
        if mip and self.integer:
            h.changeColsIntegrality(len(self.integer), np.array(self.integer, dtype=np.int32),
                                    np.array([highspy.HighsVarType.kInteger] * len(self.integer)))
        h.run()
        return h


def _class_scale(prob: pm.Problem) -> list[float]:
    """Per class, the gcd of every capacity and piece: exact, smaller coefficients."""
    out = []
    for c in range(len(prob.classes)):
        vals = [p.cap[c] for s in prob.shapes for p in s] + [pc[c] for k in prob.kinds for pc in k.pieces]
        g = reduce(math.gcd, (v for v in vals if v), 0)
        out.append(float(g or 1))
    return out


# ------------------------------------------------------------- exact integer program

class _IPResult:
    def __init__(self, lower: int | None, upper: int | None, optimal: bool, note: str) -> None:
        self.lower, self.upper, self.optimal, self.note = lower, upper, optimal, note


def _ip_small(prob: pm.Problem) -> bool:
    if len(prob.hosts) > IP_MAX_HOSTS:
        return False
    cols = 0
    for k in range(len(prob.kinds)):
        for t in range(len(prob.shapes)):
            if (k, t) in prob.truncated:
                return False
            cols += len(prob.configs_of(k, t)) * sum(1 for h in prob.hosts if h.shape == t)
            if cols > IP_MAX_COLUMNS:
                return False
    return True


def _ip_columns(prob: pm.Problem, m: _Model):
    """Per host a binary ``u_h``; per (kind, host, layout) a count; the rows
    that make them a legal packing of every instance."""
    scale = _class_scale(prob)
    u = [m.col(1.0, 0.0, 1.0, integer=True) for _ in prob.hosts]
    w: dict[tuple[int, int], list[tuple[int, pm.Config]]] = {}
    for k, n in enumerate(prob.count):
        mine = []
        for hi, h in enumerate(prob.hosts):
            cols = [(m.col(0.0, 0.0, float(n), integer=True), cfg) for cfg in prob.configs_of(k, h.shape)]
            w[(k, hi)] = cols
            mine += [c for c, _ in cols]
            if cols:   # nothing on a host that is not counted
                m.row(-math.inf, 0.0, [c for c, _ in cols] + [u[hi]], [1.0] * len(cols) + [-float(n)])
        m.row(float(n), float(n), mine, [1.0] * len(mine))
    for hi, h in enumerate(prob.hosts):
        for pi, prov in enumerate(prob.shapes[h.shape]):
            for c in range(len(prob.classes)):
                idx, val = [], []
                for k in range(len(prob.kinds)):
                    for col, cfg in w[(k, hi)]:
                        for i, use in cfg.uses:
                            if i == pi and use[c]:
                                idx.append(col)
                                val.append(use[c] / scale[c])
                m.row(-math.inf, prov.cap[c] / scale[c], idx, val)
    for g, rule in prob.groups.items():
        kinds = [k for k, kind in enumerate(prob.kinds) if kind.group == g]
        by_dom: dict[str, list[int]] = defaultdict(list)
        for hi, h in enumerate(prob.hosts):
            by_dom[h.domains.get(rule.scope, h.name)].append(hi)
        if rule.policy == "anti-affinity":
            for his in by_dom.values():
                idx = [col for k in kinds for hi in his for col, _ in w[(k, hi)]]
                m.row(-math.inf, float(rule.max_server_per_host), idx, [1.0] * len(idx))
        else:
            pick = [m.col(0.0, 0.0, 1.0, integer=True) for _ in by_dom]
            m.row(1.0, 1.0, pick, [1.0] * len(pick))
            for a, his in zip(pick, by_dom.values()):
                for k in kinds:
                    idx = [col for hi in his for col, _ in w[(k, hi)]]
                    m.row(0.0, 0.0, idx + [a], [1.0] * len(idx) + [-float(prob.count[k])])
    # Interchangeable hosts (same shape, same domains at every level a group
    # uses) are opened in order: it prunes mirror-image solutions, no others.
    levels = sorted({r.scope for r in prob.groups.values()} - {"host"})
    prev: dict[tuple, int] = {}
    for hi, h in enumerate(prob.hosts):
        key = (h.shape, *(h.domains.get(lv) for lv in levels))
        if key in prev:
            m.row(0.0, math.inf, [prev[key], u[hi]], [1.0, -1.0])
        prev[key] = hi
    return u


def _integer_program(prob: pm.Problem, time_limit_s: float) -> _IPResult:
    import highspy
    m = _Model()
    _ip_columns(prob, m)
    h = m.solve(time_limit_s, mip=True)
    status = h.getModelStatus()
    info = h.getInfo()
    tag = f"highs {h.version()} integer program ({len(m.cost)} columns)"
    if status == highspy.HighsModelStatus.kOptimal:
        opt = round(info.objective_function_value)
        return _IPResult(opt, opt, True, f"{tag}: optimal")
    if status == highspy.HighsModelStatus.kInfeasible:
        return _IPResult(None, None, False, f"{tag}: infeasible, the workload exceeds the fleet")
    dual = info.mip_dual_bound
    lower = math.ceil(dual - _EPS) if math.isfinite(dual) and dual > 0 else None
    best = info.objective_function_value
    upper = round(best) if info.primal_solution_status == 2 and math.isfinite(best) else None
    return _IPResult(lower, upper, False, f"{tag}: stopped ({h.modelStatusToString(status)})")


# ------------------------------------------------------------------ LP relaxation

def _lp_relaxation(prob: pm.Problem, time_limit_s: float) -> tuple[int | None, str]:
    """The aggregated relaxation described in the module doc."""
    try:
        import highspy
    except ImportError:  # pragma: no cover - highspy is a dependency
        return None, "no LP: highspy not installed"
    scale = _class_scale(prob)
    ncls = len(prob.classes)
    per_shape = Counter(h.shape for h in prob.hosts)
    m = _Model()
    y = [m.col(1.0, 0.0, float(per_shape[t])) for t in range(len(prob.shapes))]
    # z[(t, prov)] -> [(column, piece)] and the columns of each kind per shape
    z: dict[tuple[int, int], list[tuple[int, tuple[int, ...]]]] = defaultdict(list)
    w_of: dict[tuple[int, int], int] = {}
    for k, (kind, n) in enumerate(zip(prob.kinds, prob.count)):
        cols = []
        for t, provs in enumerate(prob.shapes):
            if not (prob.configs_of(k, t) or (k, t) in prob.truncated):
                continue
            wc = m.col(0.0, 0.0, float(n))
            w_of[(k, t)] = wc
            cols.append(wc)
            allowed = [i for i, p in enumerate(provs) if not (p.traits & kind.forbidden)]
            placed_on_trait: dict[str, list[int]] = defaultdict(list)
            for piece in kind.pieces:
                opts = [i for i in allowed if all(v <= provs[i].cap[c] for c, v in enumerate(piece))]
                zs = []
                for i in opts:
                    zc = m.col(0.0, 0.0, float(n))
                    zs.append(zc)
                    z[(t, i)].append((zc, piece))
                    for tr in provs[i].traits & kind.required:
                        placed_on_trait[tr].append(zc)
                m.row(0.0, 0.0, zs + [wc], [1.0] * len(zs) + [-1.0])
            for tr in kind.required:   # each instance has a piece on a provider with it
                zs = placed_on_trait.get(tr, [])
                if kind.pieces:
                    m.row(0.0, math.inf, zs + [wc], [1.0] * len(zs) + [-1.0])
        m.row(float(n), float(n), cols, [1.0] * len(cols))
        if not cols:
            return None, "no LP: an instance kind fits no host shape"
    for (t, i), cols in z.items():
        prov = prob.shapes[t][i]
        for c in range(ncls):
            idx = [col for col, pc in cols if pc[c]]
            m.row(-math.inf, 0.0, idx + [y[t]],
                  [pc[c] / scale[c] for col, pc in cols if pc[c]] + [-prov.cap[c] / scale[c]])
            big = [col for col, pc in cols if 2 * pc[c] > prov.cap[c]]
            if big:   # two pieces over half of a class never share a provider
                m.row(-math.inf, 0.0, big + [y[t]], [1.0] * len(big) + [-1.0])
        sizes: dict[tuple[int, ...], list[int]] = defaultdict(list)
        for col, pc in cols:
            sizes[pc].append(col)
        for pc, idx in sizes.items():
            fit = min(prov.cap[c] // v for c, v in enumerate(pc) if v)
            m.row(-math.inf, 0.0, idx + [y[t]], [1.0] * len(idx) + [-float(fit)])
    for g, rule in prob.groups.items():
        if rule.policy != "anti-affinity":
            continue
        for t in range(len(prob.shapes)):
            idx = [w_of[(k, t)] for k, kind in enumerate(prob.kinds) if kind.group == g and (k, t) in w_of]
            m.row(-math.inf, 0.0, idx + [y[t]], [1.0] * len(idx) + [-float(rule.max_server_per_host)])
    h = m.solve(time_limit_s, mip=False)
    status = h.getModelStatus()
    tag = f"highs {h.version()} LP relaxation ({len(prob.shapes)} host shapes x {len(prob.kinds)} kinds)"
    if status == highspy.HighsModelStatus.kOptimal:
        return math.ceil(h.getInfo().objective_function_value - _EPS), f"{tag}: optimal"
    return None, f"{tag}: {h.modelStatusToString(status)}"


# --------------------------------------------------------------- first-fit heuristic

class _Fleet:
    """Residual capacity per host and provider while the heuristic packs."""

    def __init__(self, prob: pm.Problem) -> None:
        self.prob = prob
        self.resid = [[list(p.cap) for p in prob.shapes[h.shape]] for h in prob.hosts]
        self.used: set[int] = set()
        self.members: dict[str, Counter] = defaultdict(Counter)
        # Per instance shape (pieces and traits, whatever its group): the
        # hosts of the order before this index have no room for it. Room
        # only shrinks (an undo restores a state after the index was set), so
        # they never will: group members need not scan them again.
        self.full_before: dict[tuple, int] = {}

    def shape_key(self, k: int) -> tuple:
        kind = self.prob.kinds[k]
        return kind.pieces, kind.required, kind.forbidden

    def place(self, k: int, hi: int) -> pm.Config | None:
        res = self.resid[hi]
        for cfg in self.prob.configs_of(k, self.prob.hosts[hi].shape):
            if all(all(r >= v for r, v in zip(res[i], use)) for i, use in cfg.uses):
                for i, use in cfg.uses:
                    res[i] = [r - v for r, v in zip(res[i], use)]
                self.used.add(hi)
                return cfg
        return None

    def undo(self, k: int, hi: int, cfg: pm.Config) -> None:
        res = self.resid[hi]
        for i, use in cfg.uses:
            res[i] = [r + v for r, v in zip(res[i], use)]


def _size_of(prob: pm.Problem):
    scale = [max((p.cap[c] for s in prob.shapes for p in s), default=1) or 1
             for c in range(len(prob.classes))]

    def size(k: int) -> float:
        return sum(v / scale[c] for pc in prob.kinds[k].pieces for c, v in enumerate(pc))
    return size, scale


def _place_groups(prob: pm.Problem, f: _Fleet, order: list[int], size) -> bool:
    """Server groups first (they constrain most), the largest group first."""
    by_group: dict[str, list[int]] = defaultdict(list)
    for k, kind in enumerate(prob.kinds):
        if kind.group:
            by_group[kind.group] += [k] * prob.count[k]
    for g in sorted(by_group, key=lambda g: (-sum(size(k) for k in by_group[g]), g)):
        rule = prob.groups[g]
        members = sorted(by_group[g], key=lambda k: -size(k))
        if rule.policy == "anti-affinity":
            for k in members:
                key = f.shape_key(k)
                chain = True    # every host from full_before[key] up to here had no room
                for j in range(f.full_before.get(key, 0), len(order)):
                    hi = order[j]
                    dom = prob.hosts[hi].domains.get(rule.scope, prob.hosts[hi].name)
                    if f.members[g][dom] >= rule.max_server_per_host:
                        chain = False
                        continue
                    if f.place(k, hi):
                        f.members[g][dom] += 1
                        break
                    if chain:
                        f.full_before[key] = j + 1
                else:
                    return False
        elif not _affine(prob, f, rule, members, order):
            return False
    return True


def _first_fit(prob: pm.Problem, order: list[int]) -> int | None:
    """First-fit decreasing: each kind, largest first, onto the first host
    in ``order`` with room for it."""
    f = _Fleet(prob)
    size, _ = _size_of(prob)
    if not _place_groups(prob, f, order, size):
        return None
    loose = sorted((k for k, kind in enumerate(prob.kinds) if not kind.group), key=lambda k: -size(k))
    for k in loose:
        at = 0   # hosts before ``at`` cannot take this kind any more: they only fill up
        for _ in range(prob.count[k]):
            while at < len(order) and f.place(k, order[at]) is None:
                at += 1
            if at == len(order):
                return None
    return len(f.used)


def _aligned_fill(prob: pm.Problem, order: list[int]) -> int | None:
    """Host by host: fill each host in ``order`` with the kind whose demand
    best matches what the host has left (``_alignment``), until nothing
    fits, then open the next. It keeps the classes of a host in balance
    where first-fit fills one and strands the others."""
    f = _Fleet(prob)
    size, scale = _size_of(prob)
    if not _place_groups(prob, f, order, size):
        return None
    left = {k: prob.count[k] for k, kind in enumerate(prob.kinds) if not kind.group and prob.count[k]}
    demand = {k: [sum(pc[c] for pc in prob.kinds[k].pieces) / scale[c] for c in range(len(scale))]
              for k in left}
    for hi in order:
        if not left:
            break
        cands = list(left)
        full = prob.shape_capacity(prob.hosts[hi].shape)
        while cands:
            room = [sum(r[c] for r in f.resid[hi]) / (full[c] or 1) for c in range(len(scale))]
            cands.sort(key=lambda k: -_alignment(demand[k], room, full, scale))
            for j, k in enumerate(cands):
                if f.place(k, hi) is not None:
                    left[k] -= 1
                    if not left[k]:
                        del left[k]
                        cands.remove(k)
                    break
            else:
                break
            # kinds that did not fit before the one placed will not fit now either
            cands = [k for k in cands[j:] if k in left] if j else cands
    return None if left else len(f.used)


def _alignment(demand: list[float], room: list[float], full: tuple[int, ...], scale: list[float]) -> float:
    """Cosine between an instance's demand and a host's free room, both as
    shares of that host's capacity: 1.0 takes the classes in the proportion
    the host has them left."""
    d = [v * scale[c] / (full[c] or 1) for c, v in enumerate(demand)]
    dot = sum(a * b for a, b in zip(d, room))
    norm = math.sqrt(sum(a * a for a in d)) * math.sqrt(sum(b * b for b in room))
    return dot / norm if norm else 0.0


def _affine(prob: pm.Problem, f: _Fleet, rule: GroupRule, members: list[int], order: list[int]) -> bool:
    """All members first-fit inside one domain of the rule's scope, trying
    domains in the order their first host comes."""
    doms: dict[str, list[int]] = {}
    for hi in order:
        doms.setdefault(prob.hosts[hi].domains.get(rule.scope, prob.hosts[hi].name), []).append(hi)
    for his in doms.values():
        done: list[tuple[int, int, pm.Config]] = []
        before = set(f.used)
        for k in members:
            for hi in his:
                cfg = f.place(k, hi)
                if cfg is not None:
                    done.append((k, hi, cfg))
                    break
            else:
                break
        if len(done) == len(members):
            return True
        for k, hi, cfg in done:
            f.undo(k, hi, cfg)
        f.used = before
    return False


def _heuristic(prob: pm.Problem, deadline: float, seed: int, target: int = 0) -> tuple[int | None, str]:
    """The best greedy packing; it stops at ``target`` (the lower bound: none can be better)."""
    cap = [sum(prob.shape_capacity(h.shape)) for h in prob.hosts]
    n = len(prob.hosts)
    orders = [sorted(range(n), key=lambda i: -cap[i]), list(range(n)),
              sorted(range(n), key=lambda i: cap[i])]
    rng = random.Random(seed)
    for _ in range(2):
        o = list(range(n))
        rng.shuffle(o)
        orders.append(o)
    runs = [(_aligned_fill, orders[0])] + [(_first_fit, o) for o in orders] + [(_aligned_fill, o) for o in orders[1:]]
    best: int | None = None
    tried = 0
    for fill, o in runs:
        if tried and (time.monotonic() >= deadline or (best is not None and best <= target)):
            break
        got = fill(prob, o)
        tried += 1
        if got is not None and (best is None or got < best):
            best = got
    note = f"best of {tried} greedy packings (first-fit decreasing, alignment fill; several host orders)"
    if tried < len(runs) and (best is None or best > target):
        note += f", stopped at the time limit (of {len(runs)}; the upper bound may not be its best)"
    return best, note
