"""The figures every output shows per design, defined once: how to read each
from a ``DesignResult``, how to print it and which direction is better, so
the table, the HTML report and ``--compare`` agree on what a figure means."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Literal

from billeting.sim.results import DesignResult


@dataclass(frozen=True)
class Figure:
    key: str
    label: str
    value: Callable[[DesignResult], float | None]
    fmt: Callable[[float], str]
    better: Literal["lower", "higher"] | None   # None: shown, never "won"
    # How to print the cell; defaults to fmt(value). Lets a row show more
    # than the number it is judged on (hosts in use / lower / upper bound).
    text: Callable[[DesignResult], str] | None = None
    # Values within this fraction of the best also "win": wall-clock
    # latency differs by a few percent from run to run, so that is a tie.
    tie: float = 0.0
    # A cost a design can cut by giving up (fewer retries, fewer hosts
    # filled): only a design that got the most builds to ACTIVE is marked
    # best on it, so one that failed more builds never "wins" by that.
    needs_best_success: bool = False

    def show(self, d: DesignResult) -> str:
        if self.text is not None:
            return self.text(d)
        v = self.value(d)
        return "n/a" if v is None else self.fmt(v)


def success_pct(d: DesignResult) -> float:
    return 100.0 * d.success_rate


def packing_ratio(d: DesignResult) -> float | None:
    """Hosts in use over the lower bound: 1.0 is provably optimal."""
    p = d.packing
    if p is None or p.lp_bound is None or p.lp_bound == 0:
        return None
    return p.hosts_in_use / p.lp_bound


def stranded_max(d: DesignResult) -> float | None:
    return 100.0 * max(d.stranded.values()) if d.stranded else None


def retries(d: DesignResult) -> float | None:
    return d.retries


def extra_attempts(d: DesignResult) -> int:
    """Build attempts beyond each instance's first, failed instances included.
    A result from before they were counted gives an estimate from the mean,
    a lower bound (instances never built pulled that mean down)."""
    if d.retries is not None:
        return d.retries
    a = d.attempts_per_build
    return max(0, round((a.mean - 1) * a.count))


def method_tag(method: str) -> str:
    """A word for how a bound was obtained (``PackingBound.*_method``)."""
    m = method.lower()
    for start, tag in (("exact", "exact"), ("integer program", "IP"), ("lp", "LP"),
                       ("volume", "volume"), ("heuristic", "heuristic"), ("the run", "as placed")):
        if m.startswith(start):
            return tag
    return "?" if not m else m.split()[0]


def _packing_text(d: DesignResult) -> str:
    p = d.packing
    if p is None:
        return "not computed"
    lp = "?" if p.lp_bound is None else f"{p.lp_bound:,}"
    cp = "?" if p.compaction is None else f"{p.compaction:,}"
    if p.exact and p.lower_method.startswith("exact"):
        return f"{p.hosts_in_use:,} / {lp} / {cp} (exact)"
    if not p.lower_method:   # a result from before the methods were recorded
        return f"{p.hosts_in_use:,} / {lp} / {cp}"
    return (f"{p.hosts_in_use:,} / {lp} {method_tag(p.lower_method)} / "
            f"{cp} {method_tag(p.upper_method)}")


def _stranded_text(d: DesignResult) -> str:
    if not d.stranded:
        return "n/a"
    # The worst class by share, ties by name so the pick is stable; a class
    # is only named when something of it is stranded.
    worst = min(d.stranded, key=lambda k: (-d.stranded[k], k))
    if d.stranded[worst] <= 0:
        return "0.0% (none)"
    return f"{100 * d.stranded[worst]:.1f}% {worst}"


def _int(v: float) -> str:
    return f"{int(v):,}"


FIGURES: list[Figure] = [
    Figure("success_pct", "builds succeeded", success_pct, lambda v: f"{v:.2f}%", "higher"),
    Figure("errored", "ended in ERROR", lambda d: d.errored, _int, "lower"),
    Figure("attempts", "attempts per build on hosts (mean)",
           lambda d: d.attempts_per_build.mean if d.attempts_per_build.count else None,
           lambda v: f"{v:.3f}", "lower", needs_best_success=True),
    Figure("retries", "retries (attempts after the first)", retries, _int, "lower",
           needs_best_success=True),
    Figure("upcalls", "upcalls to the scheduler", lambda d: d.upcalls, _int, "lower",
           needs_best_success=True),
    Figure("claim_conflicts", "claim conflicts (409)", lambda d: d.claim_conflicts, _int, "lower",
           needs_best_success=True),
    Figure("placement_per_build", "Placement requests per build",
           lambda d: d.placement_requests_per_build, lambda v: f"{v:.2f}", "lower",
           needs_best_success=True),
    Figure("latency_p50", "scheduler latency p50 (ms)", lambda d: d.scheduler_latency_ms.p50,
           lambda v: f"{v:.2f}", "lower", tie=0.05),
    Figure("latency_p99", "scheduler latency p99 (ms)", lambda d: d.scheduler_latency_ms.p99,
           lambda v: f"{v:.2f}", "lower", tie=0.05),
    Figure("active_p50", "time to ACTIVE p50 (s, virtual)", lambda d: d.time_to_active_s.p50,
           lambda v: f"{v:.1f}", "lower", needs_best_success=True),
    Figure("violations", "constraint violations", lambda d: len(d.violations), _int, "lower"),
    Figure("packing", "hosts in use / lower / upper bound", packing_ratio,
           lambda v: f"{v:.3f}", "lower", text=_packing_text),
    Figure("stranded", "stranded capacity (worst class)", stranded_max,
           lambda v: f"{v:.1f}%", "lower", text=_stranded_text, needs_best_success=True),
]


def winners(fig: Figure, designs: list[DesignResult]) -> set[int]:
    """Indexes of the designs best on ``fig``; empty when all tie or it has
    no direction (nothing to win). Values that print the same are a tie."""
    if fig.better is None:
        return set()
    vals = [(i, fig.value(d)) for i, d in enumerate(designs)]
    vals = [(i, v) for i, v in vals if v is not None]
    if len(vals) < 2:
        return set()
    best = (min if fig.better == "lower" else max)(v for _, v in vals)
    slack = max(fig.tie * abs(best), 1e-9 * max(1.0, abs(best)))
    win = {i for i, v in vals if abs(v - best) <= slack or fig.fmt(v) == fig.fmt(best)}
    if len(win) == len(vals):
        return set()
    if fig.needs_best_success:
        # The best value counts, but only a design that lost no more builds
        # than any other is marked for it.
        top = max(designs[i].success_rate for i, _ in vals)
        win = {i for i in win if designs[i].success_rate >= top - 1e-12}
    return win
