"""The HTML report of a multi-seed run (``sim.seeds.SeedsResult``): the
spread table and, per figure, every seed's value as a point over a box, so
how far designs stand apart can be seen against how far seeds scatter."""
from __future__ import annotations

import html
import os
from pathlib import Path

from billeting.sim.plot_style import axis, color, label, layout
from billeting.sim.report_html import design_table, page, write_atomic
from billeting.sim.seeds import LEGEND, SeedsResult, rows, title

# Figures plotted, with their axis titles.
PLOTS = [
    ("success_pct", "builds succeeded (%)"),
    ("retries", "retries (attempts after the first)"),
    ("upcalls", "upcalls to the scheduler"),
    ("claim_conflicts", "claim conflicts (409)"),
    ("latency_p50", "scheduler latency p50 (ms, real time)"),
    ("packing", "hosts in use / lower bound"),
]


def _fig(s: SeedsResult, key: str, ytitle: str) -> dict:
    data = []
    for i, d in enumerate(s.designs):
        f = next(f for f in d.figures if f.key == key)
        pts = [(seed, v) for seed, v in zip(s.seeds, f.values) if v is not None]
        data.append(dict(type="box", name=label(d.name), y=[v for _, v in pts],
                         text=[f"seed {seed}" for seed, _ in pts], boxpoints="all", pointpos=0,
                         jitter=0.3, marker=dict(color=color(i)), line=dict(color=color(i))))
    return dict(data=data, layout=layout(ytitle, showlegend=False, xaxis=axis("design"),
                                          yaxis=axis(ytitle)))


def render(s: SeedsResult) -> str:
    e = html.escape
    figs = {key: _fig(s, key, ytitle) for key, ytitle in PLOTS}
    plots = "".join(f'<div class="card"><h3>{e(ytitle)}</h3><div class="plot" id="plot-{key}"></div></div>'
                    for key, ytitle in PLOTS)
    runs = "".join(f"<li>seed {seed}: {e(path)}</li>" for seed, path in zip(s.seeds, s.runs))
    notes = "".join(f"<li>{e(n)}</li>" for n in s.notes)
    name = f"billeting simulate: {s.scenario} over {len(s.seeds)} seeds"
    return page(name, f"""<h1>{e(name)}</h1>
<p class="meta">{e(title(s))}; billeting {e(s.billeting_version)}, started {e(s.started_at)}.</p>
{f'<ul class="notes">{notes}</ul>' if notes else ''}
<h2>Spread over the seeds</h2>
{design_table([d.name for d in s.designs], rows(s), table_id="spread")}
<p class="legend">{e(LEGEND)}. Scheduler latency is wall-clock time measured one call at a
time while the designs ran one after another, so it also carries the machine's load.</p>
<h2>Every seed</h2>
<div class="grid">{plots}</div>
<h2>Each seed's full result</h2>
<ul>{runs}</ul>""", figs)


def write(s: SeedsResult, path: str | os.PathLike) -> Path:
    return write_atomic(render(s), path)
