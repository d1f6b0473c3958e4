"""One scenario over several seeds: each figure's spread per design.

A single run's difference between two designs may be the seed's luck (at
97 % fill the seed-to-seed spread of success is several tenths of a point).
Over seeds each figure becomes a spread -- min, median, max, mean and
standard deviation -- and a design is marked best on a figure only when it
is *separated*: its worst seed beats every other design's best seed. Then
the difference is larger than anything the seeds showed, not noise.
"""
from __future__ import annotations

import statistics

import msgspec

from billeting.sim.figures import FIGURES, Figure
from billeting.sim.results import RunResult


class FigureSpread(msgspec.Struct, frozen=True, kw_only=True):
    key: str               # figures.Figure.key
    label: str
    better: str | None     # "lower" | "higher" | None
    values: list[float | None]   # one per seed, in the order of SeedsResult.seeds
    min: float | None = None
    median: float | None = None
    max: float | None = None
    mean: float | None = None
    sd: float | None = None      # sample standard deviation; None below two values


class DesignSpread(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    design: str
    figures: list[FigureSpread]


class SeedsResult(msgspec.Struct, frozen=True, kw_only=True):
    scenario: str
    seeds: list[int]
    hosts: int
    cells: int
    requests: list[int]    # per seed (the arrivals are drawn from the seed)
    designs: list[DesignSpread]
    runs: list[str] = []   # where each seed's full result was written
    billeting_version: str = ""
    started_at: str = ""
    notes: list[str] = []


# Figures whose spread is reported (their number, not their text, is judged).
SPREAD_FIGURES: list[Figure] = list(FIGURES)


def spread(runs: list[RunResult], paths: list[str] | None = None) -> SeedsResult:
    """Each design's figures over ``runs`` (one per seed, same scenario).
    A design missing from some seed's run counts that seed as no value."""
    if not runs:
        raise ValueError("no runs to summarise")
    names: list[str] = []
    kinds: dict[str, str] = {}
    for r in runs:
        for d in r.designs:
            if d.name not in kinds:
                names.append(d.name)
                kinds[d.name] = d.design
    designs = []
    for name in names:
        per_seed = [next((d for d in r.designs if d.name == name), None) for r in runs]
        figs = [_summary(fig, [None if d is None else fig.value(d) for d in per_seed])
                for fig in SPREAD_FIGURES]
        designs.append(DesignSpread(name=name, design=kinds[name], figures=figs))
    first = runs[0]
    return SeedsResult(scenario=first.scenario, seeds=[r.seed for r in runs], hosts=first.hosts,
                       cells=first.cells, requests=[r.requests for r in runs], designs=designs,
                       runs=list(paths or []), billeting_version=first.billeting_version,
                       started_at=first.started_at,
                       notes=sorted({n for r in runs for n in r.notes}))


def _summary(fig: Figure, values: list[float | None]) -> FigureSpread:
    vals = [float(v) for v in values if v is not None]
    kw: dict = {}
    if vals:
        kw = dict(min=min(vals), median=statistics.median(vals), max=max(vals),
                  mean=statistics.fmean(vals), sd=statistics.stdev(vals) if len(vals) > 1 else None)
    return FigureSpread(key=fig.key, label=fig.label, better=fig.better,
                        values=[None if v is None else float(v) for v in values], **kw)


def separated(key: str, s: SeedsResult) -> set[int]:
    """Indexes of the design best on ``key`` beyond the seeds' noise: its
    worst seed is better than every other design's best. At most one."""
    spreads = [next(f for f in d.figures if f.key == key) for d in s.designs]
    better = spreads[0].better if spreads else None
    have = [(i, f) for i, f in enumerate(spreads) if f.min is not None]
    if better is None or len(have) < 2:
        return set()
    fig = next(f for f in SPREAD_FIGURES if f.key == key)
    for i, f in have:
        others = [g for j, g in have if j != i]
        apart = (all(f.max < g.min for g in others) if better == "lower"
                 else all(f.min > g.max for g in others))
        if apart and fig.needs_best_success and not _most_successful(i, s):
            return set()   # a cost cut by giving up builds wins nothing
        if apart:
            return {i}
    return set()


def _most_successful(i: int, s: SeedsResult) -> bool:
    med = [next(f for f in d.figures if f.key == "success_pct").median for d in s.designs]
    return med[i] is not None and all(m is None or med[i] >= m - 1e-12 for m in med)


def fmt(key: str, v: float | None) -> str:
    if v is None:
        return "n/a"
    fig = next(f for f in SPREAD_FIGURES if f.key == key)
    return fig.fmt(v)


def cell(f: FigureSpread) -> str:
    """median [min .. max], the way the table and the report print a spread."""
    if f.median is None:
        return "n/a"
    if f.min == f.max:
        return f"{fmt(f.key, f.median)} (all seeds)"
    return f"{fmt(f.key, f.median)} [{fmt(f.key, f.min)} .. {fmt(f.key, f.max)}]"


# Where a figure's text shows more than the number judged, the spread is of that number.
_SPREAD_LABEL = {"packing": "hosts in use / lower bound", "stranded": "stranded capacity (worst class, %)"}


def rows(s: SeedsResult) -> list[tuple[str, list[tuple[str, bool]]]]:
    out = []
    for n, fig in enumerate(SPREAD_FIGURES):
        win = separated(fig.key, s)
        label = _SPREAD_LABEL.get(fig.key, fig.label)
        out.append((label, [(cell(d.figures[n]), i in win) for i, d in enumerate(s.designs)]))
    return out


LEGEND = ("each cell: median [min .. max] over the seeds; * best beyond the seeds' noise "
          "(its worst seed beats every other design's best)")


def title(s: SeedsResult) -> str:
    req = sorted(set(s.requests))
    requests = f"{req[0]:,}" if len(req) == 1 else f"{req[0]:,}-{req[-1]:,}"
    return (f"{s.scenario}: {s.hosts:,} hosts in {s.cells} cell{'s' if s.cells != 1 else ''}, "
            f"{requests} requests, {len(s.seeds)} seeds ({', '.join(map(str, s.seeds))})")


def render(s: SeedsResult) -> str:
    """Plain aligned text: one row per figure, one column per design."""
    header = ["figure"] + [d.name for d in s.designs]
    body = [[label] + [text + (" *" if win else "") for text, win in cells] for label, cells in rows(s)]
    widths = [max(len(r[i]) for r in [header] + body) for i in range(len(header))]

    def line(r: list[str]) -> str:
        return "  ".join([r[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(r[1:], widths[1:])]).rstrip()

    out = [title(s), line(header), line(["-" * w for w in widths])] + [line(r) for r in body]
    out.append(LEGEND)
    out += [f"mean ± sd: {d.name}: " + "; ".join(
        f"{f.label} {fmt(f.key, f.mean)} ± {fmt(f.key, f.sd)}" for f in d.figures
        if f.mean is not None and f.sd is not None and f.key in ("success_pct", "retries", "packing"))
        for d in s.designs]
    out += [f"note: {n}" for n in s.notes]
    return "\n".join(out) + "\n"


def parse_seeds(text: str) -> list[int]:
    """``7,8,9`` or ``7-11`` (or a mix): distinct seeds in the order given.
    Raises ValueError with a message for the CLI."""
    seeds: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        try:
            a = int(lo)
            b = int(hi) if sep else a
        except ValueError:
            raise ValueError(f"{part!r} is not a seed or a range like 7-11") from None
        if b < a:
            raise ValueError(f"{part!r}: the range runs backwards")
        if b - a >= 1000:
            raise ValueError(f"{part!r}: at most 1000 seeds")
        seeds += [n for n in range(a, b + 1) if n not in seeds]
    if len(seeds) < 2:
        raise ValueError("name at least two seeds, e.g. 1,2,3 or 1-5")
    return seeds


def dump(s: SeedsResult) -> bytes:
    return msgspec.json.format(msgspec.json.encode(s), indent=1)


def load(data: bytes) -> SeedsResult:
    return msgspec.json.decode(data, type=SeedsResult)
