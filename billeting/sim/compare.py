"""Is a candidate run "at least as fast and accurate" as a baseline?

Designs are matched by name. Accuracy figures come from the virtual clock
and a seed, so they repeat exactly and get tight limits; latency is real
wall-clock time of the real code, so it depends on the machine: it is shown
but judged only when asked (``Tolerances.wall_clock``), then with a relative
tolerance plus a small absolute slack. Every check is kept with its
baseline, candidate and limit, so a person sees what decided the verdict.
"""
from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Literal

import msgspec

from billeting.sim.figures import packing_ratio
from billeting.sim.results import DesignResult, RunResult, load


class Tolerances(msgspec.Struct, frozen=True, kw_only=True):
    success_points: float = 0.1      # percentage points the success rate may drop
    latency: float = 0.25            # p50/p99 may grow by this fraction ...
    latency_slack_ms: float = 0.5    # ... or by this much, whichever is larger
    placement_requests: float = 0.0  # fraction requests/build may grow
    packing: float = 0.02            # fraction hosts-in-use/LP-bound may grow
    upcalls: int = 0                 # extra upcalls allowed
    same_seed: bool = True           # a different seed makes the runs not comparable
    # Wall-clock latency depends on the machine and what else runs on it:
    # the same scenario, seed and code differ by half on another machine.
    # By default it is shown, not judged, and speed is judged on Placement
    # requests per build; True judges it too (same machine, quiet sitting).
    wall_clock: bool = False


class Check(msgspec.Struct, frozen=True, kw_only=True):
    design: str
    figure: str
    kind: Literal["accuracy", "speed"]
    baseline: float | None
    candidate: float | None
    limit: float | None
    rule: str                       # e.g. "<= baseline x 1.25"
    passed: bool
    note: str = ""


class Verdict(msgspec.Struct, frozen=True, kw_only=True):
    status: Literal["pass", "fail", "mismatch"]
    baseline: str                   # "scenario seed=N" of each run, for the header
    candidate: str
    checks: list[Check] = []
    problems: list[str] = []        # why it failed or did not match, in words
    notes: list[str] = []           # worth saying, not deciding

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if not c.passed]


def _label(run: RunResult) -> str:
    return f"{run.scenario} (seed {run.seed}, {run.hosts:,} hosts, {run.requests:,} requests)"


def compare(baseline: RunResult, candidate: RunResult, *,
            tolerances: Tolerances = Tolerances()) -> Verdict:
    tol = tolerances
    head = dict(baseline=_label(baseline), candidate=_label(candidate))
    mismatch = [f"{what} differs: baseline {a!r}, candidate {b!r}"
                for what, a, b in (("scenario", baseline.scenario, candidate.scenario),
                                   ("hosts", baseline.hosts, candidate.hosts),
                                   ("cells", baseline.cells, candidate.cells),
                                   ("requests", baseline.requests, candidate.requests))
                if a != b]
    if tol.same_seed and baseline.seed != candidate.seed:
        mismatch.append(f"seed differs: baseline {baseline.seed}, candidate {candidate.seed}")
    if mismatch:
        return Verdict(status="mismatch", problems=[
            "the two runs are not of the same experiment: " + "; ".join(mismatch)], **head)

    cand = {d.name: d for d in candidate.designs}
    checks: list[Check] = []
    problems: list[str] = []
    notes: list[str] = []
    for b in baseline.designs:
        c = cand.get(b.name)
        if c is None:
            problems.append(f"design {b.name!r} is in the baseline but missing from the "
                            f"candidate (candidate has: {', '.join(sorted(cand)) or 'none'})")
            continue
        checks.extend(_design_checks(b, c, tol))
    extra = sorted(set(cand) - {d.name for d in baseline.designs})
    if extra:
        notes.append(f"not in the baseline, so not judged: {', '.join(extra)}")
    for ch in checks:
        if not ch.passed:
            problems.append(f"{ch.design}: {ch.figure} {_num(ch.candidate)} "
                            f"breaks {ch.rule} (baseline {_num(ch.baseline)}, "
                            f"limit {_num(ch.limit)})")
    return Verdict(status="fail" if problems else "pass", checks=checks,
                   problems=problems, notes=notes, **head)


def _design_checks(b: DesignResult, c: DesignResult, tol: Tolerances) -> list[Check]:
    out: list[Check] = []

    def add(figure, kind, bv, cv, limit, rule, ok, note=""):
        out.append(Check(design=b.name, figure=figure, kind=kind, baseline=bv,
                         candidate=cv, limit=limit, rule=rule, passed=ok, note=note))

    bs, cs = 100 * b.success_rate, 100 * c.success_rate
    lim = bs - tol.success_points
    add("builds succeeded (%)", "accuracy", bs, cs, lim,
        f">= baseline - {tol.success_points} points", cs >= lim - 1e-9)

    bv, cv = len(b.violations), len(c.violations)
    note = ""
    if cv and not bv:
        kinds = sorted({v.kind for v in c.violations})
        note = "new violations: " + ", ".join(kinds)
    add("constraint violations", "accuracy", bv, cv, bv, "<= baseline", cv <= bv, note)

    lim = b.upcalls + tol.upcalls
    add("upcalls", "accuracy", b.upcalls, c.upcalls, lim,
        "<= baseline" + (f" + {tol.upcalls}" if tol.upcalls else ""), c.upcalls <= lim)

    br, cr = packing_ratio(b), packing_ratio(c)
    if br is None or cr is None:
        add("hosts in use / lower bound", "accuracy", br, cr, None, "not judged", True,
            "packing bound not computed in " +
            " and ".join(n for n, r in (("baseline", br), ("candidate", cr)) if r is None))
    else:
        lim = br * (1 + tol.packing)
        add("hosts in use / lower bound", "accuracy", br, cr, lim,
            f"<= baseline x {1 + tol.packing:g}", cr <= lim + 1e-9)

    for name, bd, cd in (("scheduler latency p50 (ms)", b.scheduler_latency_ms.p50,
                          c.scheduler_latency_ms.p50),
                         ("scheduler latency p99 (ms)", b.scheduler_latency_ms.p99,
                          c.scheduler_latency_ms.p99)):
        lim = max(bd * (1 + tol.latency), bd + tol.latency_slack_ms)
        if tol.wall_clock:
            add(name, "speed", bd, cd, lim,
                f"<= baseline x {1 + tol.latency:g} (or + {tol.latency_slack_ms:g} ms)", cd <= lim)
        else:
            add(name, "speed", bd, cd, None, "not judged (wall clock; --judge-latency judges it)", True)

    bp, cp = b.placement_requests_per_build, c.placement_requests_per_build
    lim = bp * (1 + tol.placement_requests)
    add("Placement requests per build", "speed", bp, cp, lim,
        "<= baseline" + (f" x {1 + tol.placement_requests:g}" if tol.placement_requests else ""),
        cp <= lim + 1e-9)
    return out


def compare_files(baseline: str | os.PathLike, candidate: str | os.PathLike, *,
                  tolerances: Tolerances = Tolerances()) -> Verdict:
    """``compare`` on two JSON files written by ``billeting simulate``; a file
    that cannot be read or is not a run record is a mismatch (exit 2) with
    the reason, not a traceback."""
    runs, problems = [], []
    for role, path in (("baseline", baseline), ("candidate", candidate)):
        try:
            runs.append(load(Path(path).read_bytes()))
        except OSError as e:
            problems.append(f"cannot read the {role} {str(path)!r}: {e.strerror or e}")
        except (msgspec.DecodeError, msgspec.ValidationError) as e:
            problems.append(f"the {role} {str(path)!r} is not a simulation result: {e}")
    if problems:
        return Verdict(status="mismatch", baseline=str(baseline), candidate=str(candidate),
                       problems=problems)
    return compare(runs[0], runs[1], tolerances=tolerances)


def exit_status(verdict: Verdict) -> int:
    """0 when the candidate is at least as fast and accurate, 1 when it is
    not, 2 when the files do not describe the same experiment."""
    return {"pass": 0, "fail": 1, "mismatch": 2}[verdict.status]


def _num(v: float | None) -> str:
    if v is None:
        return "n/a"
    if float(v).is_integer():
        return f"{int(v):,}"
    return f"{v:,.3f}".rstrip("0").rstrip(".")


def render(verdict: Verdict, *, color: bool | None = None, width: int | None = None) -> str:
    """The verdict as text for a terminal: a rich table when ``color`` (or a
    TTY, when None), plain aligned columns otherwise."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    buf = io.StringIO()
    console = Console(file=buf, width=width, force_terminal=color,
                      no_color=color is False, highlight=False)
    plain = not console.is_terminal
    word = {"pass": "PASS: the candidate is at least as fast and accurate as the baseline",
            "fail": "FAIL: the candidate is not at least as fast and accurate as the baseline",
            "mismatch": "NOT COMPARABLE: the two runs are different experiments"}[verdict.status]
    lines = [word, f"  baseline:  {verdict.baseline}", f"  candidate: {verdict.candidate}", ""]
    if plain:
        rows = [("design", "figure", "kind", "baseline", "candidate", "limit", "rule", "")]
        for c in verdict.checks:
            rows.append((c.design, c.figure, c.kind, _num(c.baseline), _num(c.candidate),
                         _num(c.limit), c.rule, ("ok" if c.passed else "FAIL")
                         + (f" ({c.note})" if c.note else "")))
        if verdict.checks:
            widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
            for r in rows:
                lines.append("  ".join(s.ljust(w) for s, w in zip(r, widths)).rstrip())
            lines.append("")
    else:
        console.print("\n".join(lines), markup=False)
        lines = []
        if verdict.checks:
            t = Table(show_lines=False)
            for col in ("design", "figure", "kind", "baseline", "candidate", "limit", "rule", ""):
                t.add_column(col, justify="right" if col in ("baseline", "candidate", "limit")
                             else "left")
            for c in verdict.checks:
                mark = "[green]ok[/]" if c.passed else "[bold red]FAIL[/]"
                if c.note:
                    mark += f" ({escape(c.note)})"
                t.add_row(escape(c.design), c.figure, c.kind, _num(c.baseline), _num(c.candidate),
                          _num(c.limit), c.rule, mark)
            console.print(t)
    for p in verdict.problems:
        lines.append(f"problem: {p}")
    for n in verdict.notes:
        lines.append(f"note: {n}")
    if plain:
        return "\n".join(lines) + "\n"
    if lines:
        console.print("\n".join(lines), markup=False)
    return buf.getvalue()
