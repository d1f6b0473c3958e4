"""A paragraph that says, in the run's own numbers, what the designs did.

The seeds argue that claiming in the scheduler, with alternates handed to
the cell, keeps retries inside the cell, where the legacy design has to call
the scheduler back (an upcall) for every failed build. This module states
what *this* run shows about that, and says so plainly when it shows no
difference rather than repeating the argument.
"""
from __future__ import annotations

from billeting.sim.figures import extra_attempts, method_tag, packing_ratio
from billeting.sim.results import DesignResult, RunResult

# Below these, two figures are "about the same" in the prose.
_SAME_POINTS = 0.1      # success rate, percentage points
_SAME_LATENCY = 0.10    # relative
# What the seeds promise for scheduler-claims with alternates.
_SEEDS_TARGET = 0.999


def explain(run: RunResult) -> str:
    """One paragraph (plain text) about ``run``."""
    if not run.designs:
        return "This run has no designs, so there is nothing to explain."
    parts: list[str] = []
    legacy = _first(run, "legacy")
    sched = _first(run, "scheduler-claims")
    cond = _first(run, "conductor-claims")
    told: list[DesignResult] = []
    if legacy and sched:
        parts += _legacy_vs_scheduler(legacy, sched)
        told += [legacy, sched]
        if cond:
            parts.append(_conductor(cond))
            told.append(cond)
    # Every other design (a second scheduler-claims variant, say) in a
    # sentence of its own, so none is silently left out.
    parts += [_one_design(d) for d in run.designs if all(d is not t for t in told)]
    parts += _conflicts(run)
    parts += _latency(run, legacy, sched)
    parts += _packing(run)
    parts.append(_violations(run))
    return " ".join(p for p in parts if p)


def _first(run: RunResult, kind: str) -> DesignResult | None:
    return next((d for d in run.designs if d.design == kind), None)


def _n(v: int | float) -> str:
    return f"{int(v):,}"


def _pct(d: DesignResult) -> str:
    return f"{100 * d.success_rate:.2f}%"


def _who(d: DesignResult) -> str:
    """The design's kind, with its scenario name when that says more."""
    return d.design if d.name == d.design else f"{d.design} ({d.name})"


def _alternates(d: DesignResult) -> str:
    alt = d.knobs.get("alternates")
    return f" with {alt} alternate{'s' if alt != 1 else ''}" if alt is not None else ""


def _legacy_vs_scheduler(legacy: DesignResult, sched: DesignResult) -> list[str]:
    out = []
    same_load = legacy.requested == sched.requested
    load = (f"For the same {_n(legacy.requested)} instances, " if same_load
            else f"For {_n(legacy.requested)} (legacy) and {_n(sched.requested)} "
                 f"(scheduler-claims) instances, ")
    if legacy.upcalls:
        out.append(
            f"{load}{_who(legacy)} called the scheduler back {_n(legacy.upcalls)} "
            f"time{'s' if legacy.upcalls != 1 else ''} to reschedule builds that failed on "
            f"their host, and {_pct(legacy)} of its builds succeeded "
            f"({_n(legacy.errored)} ended in ERROR).")
    else:
        out.append(
            f"{load}{_who(legacy)} needed no upcalls at this load and "
            f"{_pct(legacy)} of its builds succeeded, so this run does not show the "
            f"rescheduling cost the seeds argue about.")
    retries = extra_attempts(sched)
    where = (f"retried {_n(retries)} build attempt{'s' if retries != 1 else ''} on the "
             f"alternates inside their cells" if retries else "needed no retries")
    if sched.upcalls == 0:
        tail = "none upcalled"
    else:
        tail = (f"but {_n(sched.upcalls)} still went back to the scheduler "
                f"(the cell designs should need none)")
    out.append(
        f"{_who(sched)}, which claims in the scheduler{_alternates(sched)}, "
        f"{where}, {tail}, and {_pct(sched)} succeeded.")
    holds = sched.upcalls == 0 and sched.success_rate >= _SEEDS_TARGET
    out.append(f"The seeds' claim for this design (at least {100 * _SEEDS_TARGET:.1f}% of "
               f"builds succeed with no upcall) {'holds' if holds else 'does not hold'} "
               f"in this run.")
    diff = 100 * (sched.success_rate - legacy.success_rate)
    if abs(diff) < _SAME_POINTS:
        out.append("Their success rates are the same within 0.1 percentage point.")
    elif diff > 0:
        out.append(f"That is {diff:.2f} percentage points more builds succeeding than legacy.")
    else:
        out.append(f"That is {-diff:.2f} percentage points fewer builds succeeding than "
                   f"legacy: in this run claiming in the scheduler did not pay off.")
    return out


def _one_design(d: DesignResult) -> str:
    if d.design == "conductor-claims":
        return _conductor(d)
    retries = extra_attempts(d)
    return (f"{_who(d)}{_alternates(d)}: {_pct(d)} of {_n(d.requested)} builds "
            f"succeeded, {_n(retries)} extra attempt{'s' if retries != 1 else ''}, "
            f"{_n(d.upcalls)} upcall{'s' if d.upcalls != 1 else ''}.")


def _conductor(d: DesignResult) -> str:
    retries = extra_attempts(d)
    s = (f"{_who(d)}, where the super conductor claims down the "
         f"scheduler's ranked list, made {_n(retries)} extra attempt"
         f"{'s' if retries != 1 else ''} with {_n(d.upcalls)} upcall"
         f"{'s' if d.upcalls != 1 else ''} and {_pct(d)} succeeded")
    return s + (f", at {d.placement_requests_per_build:.2f} Placement requests per build."
                if d.placement_requests_per_build else ".")


def _conflicts(run: RunResult) -> list[str]:
    where = {"legacy": "on the computes, each one a failed build",
             "conductor-claims": "in the super conductor, which moved down its list",
             "scheduler-claims": "in the scheduler, which fell back to its next candidate "
                                 "before anything reached a cell"}
    with_conf = [d for d in run.designs if d.claim_conflicts]
    if not with_conf:
        return ["Placement refused no claims in any design."]
    bits = [f"{_n(d.claim_conflicts)} in {d.name} ({where.get(d.design, 'where it claims')})"
            for d in with_conf]
    clean = [d.name for d in run.designs if not d.claim_conflicts]
    s = "Placement refused claims (409 conflicts): " + "; ".join(bits)
    if clean:
        s += f"; none in {', '.join(clean)}"
    return [s + "."]


def _latency(run: RunResult, legacy: DesignResult | None,
             sched: DesignResult | None) -> list[str]:
    if len(run.designs) < 2:
        d = run.designs[0]
        return [f"Scheduler latency, real time measured one call at a time on this machine, was "
                f"{d.scheduler_latency_ms.p50:.1f} ms at p50 and "
                f"{d.scheduler_latency_ms.p99:.1f} ms at p99."]
    a, b = (legacy, sched) if legacy and sched else (run.designs[0], run.designs[1])
    la, lb = a.scheduler_latency_ms, b.scheduler_latency_ms
    rel = (lb.p50 - la.p50) / la.p50 if la.p50 else 0.0
    if abs(rel) < _SAME_LATENCY:
        how = "about as long as"
    elif rel > 0:
        how = f"{100 * rel:.0f}% longer than"
    else:
        how = f"{-100 * rel:.0f}% less than"
    s = (f"In this run the scheduler call of {b.name} took {how} that of {a.name} "
         f"(p50 {lb.p50:.1f} ms vs {la.p50:.1f} ms, p99 {lb.p99:.1f} ms vs {la.p99:.1f} ms; "
         f"from p50 to p99 {lb.p99 - lb.p50:.1f} ms vs {la.p99 - la.p50:.1f} ms). That is real time of "
         f"the real code, measured one call at a time on this machine while the designs ran one "
         f"after another, so each design met the machine's load of its own minutes: a figure of this "
         f"run, not of the design (--seeds shows its spread; --compare judges it only with "
         f"--judge-latency)")
    ta, tb = a.time_to_active_s, b.time_to_active_s
    if ta.count and tb.count:
        s += (f"; time to ACTIVE at p50 was {tb.p50:.1f} s vs {ta.p50:.1f} s "
              f"(virtual time, retries included)")
    return [s + "."]


def _packing(run: RunResult) -> list[str]:
    bits = []
    for d in run.designs:
        p = d.packing
        if p is None or p.lp_bound is None:
            continue
        r = packing_ratio(d)
        over = f" ({100 * (r - 1):.0f}% above the optimum)" if r and r > 1 else " (optimal)"
        if p.exact:
            how = f"the fewest they fit on is {_n(p.lp_bound)}"
            if p.lower_method.startswith("exact"):
                how += ", solved exactly"
            bits.append(f"{d.name} {_n(p.hosts_in_use)} hosts; {how}{over}")
            continue
        over = f" ({100 * (r - 1):.0f}% above the lower bound)" if r and r > 1 else " (optimal)"
        low = f" ({tag(p.lower_method)})" if p.lower_method else ""
        up = "" if p.compaction is None else f", and a packing on {_n(p.compaction)} was found" + (
            f" ({tag(p.upper_method)})" if p.upper_method else "")
        bits.append(f"{d.name} {_n(p.hosts_in_use)} hosts against a lower bound of "
                    f"{_n(p.lp_bound)}{low}{up}{over}")
    return ["Packing, under every rule the checker enforces: " + "; ".join(bits) + "."] if bits else []


def tag(method: str) -> str:
    return method_tag(method).replace("IP", "integer program's bound").replace("LP", "LP relaxation")


def _violations(run: RunResult) -> str:
    bad = [d for d in run.designs if d.violations]
    if not bad:
        return "The independent checker found no constraint violations in any design."
    return ("The independent checker found constraint violations -- " + "; ".join(
        f"{_n(len(d.violations))} in {d.name} "
        f"({', '.join(sorted({v.kind for v in d.violations}))})" for d in bad)
        + " -- so those designs placed instances wrongly and their other figures "
          "flatter them.")
