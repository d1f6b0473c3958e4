"""One self-contained HTML report of a run: the summary table, the
explanatory paragraph and plots of the designs side by side.

Self-contained means it opens from a file with no network: plotly's
JavaScript is embedded inline once, and every figure's data is inline JSON.
Everything that came from the run (design names, error texts, notes) is
escaped -- in HTML text with ``html.escape`` and inside the inline scripts by
escaping ``<``, ``>`` and ``&`` in the JSON -- so a hostile name stays text.
"""
from __future__ import annotations

import html
import json
import os
import tempfile
from pathlib import Path

from billeting.sim.figures import extra_attempts
from billeting.sim.narrative import explain
from billeting.sim.plot_style import axis, color, label, layout
from billeting.sim.results import DesignResult, RunResult
from billeting.sim.table import HOSTS_LEGEND, rows, workload

# The plots, in the order they are laid out (two per row); the ids are
# stable so tests and readers can find them.
PLOTS = [
    ("builds", "Builds: succeeded vs failed"),
    ("retries", "Retries: upcalls, claim conflicts, retried builds"),
    ("latency", "Scheduler latency (ms, real time; designs ran one after another)"),
    ("active", "Time to ACTIVE (s, virtual)"),
    ("fill", "Fleet fill over time (virtual)"),
    ("packing", "Packing: hosts in use vs the bounds"),
]


def _fig_builds(run: RunResult) -> dict:
    names = [label(d.name) for d in run.designs]
    ok = [100 * d.succeeded / d.requested if d.requested else 100.0 for d in run.designs]
    err = [100 * d.errored / d.requested if d.requested else 0.0 for d in run.designs]
    other = [max(0.0, 100 - o - e) for o, e in zip(ok, err)]
    # Both rates on the green bar: the red sliver on top is too thin to label.
    data = [
        dict(type="bar", name="succeeded", x=names, y=ok, marker=dict(color="#2ca02c"),
             text=[f"{o:.2f}% succeeded<br>{e:.2f}% ERROR" for o, e in zip(ok, err)],
             textposition="inside", insidetextanchor="end", textangle=0),
        dict(type="bar", name="ERROR", x=names, y=err, marker=dict(color="#d62728"),
             hovertemplate="%{y:.2f}% ERROR<extra></extra>"),
    ]
    if any(v > 1e-6 for v in other):
        data.append(dict(type="bar", name="neither (not finished)", x=names, y=other,
                         marker=dict(color="#bbbbbb")))
    # Success rates near 100% are what matter: zoom in on the top of the bar.
    lowest = min(ok, default=100.0)
    floor = max(0.0, min(90.0, lowest - 5)) if lowest > 50 else 0.0
    return dict(data=data, layout=layout(
        PLOTS[0][1], barmode="stack",
        xaxis=axis("design"), yaxis=axis("% of builds", range=[floor, 100.5]),
        annotations=[dict(text=f"axis starts at {floor:.0f}%", showarrow=False, xref="paper",
                          yref="paper", x=0, y=1.06, xanchor="left", font=dict(size=10, color="#666"))]
        if floor else []))


def _fig_retries(run: RunResult) -> dict:
    names = [label(d.name) for d in run.designs]
    extra = [extra_attempts(d) for d in run.designs]
    data = [
        dict(type="bar", name="upcalls to the scheduler", x=names,
             y=[d.upcalls for d in run.designs], marker=dict(color="#d62728")),
        dict(type="bar", name="claim conflicts (409)", x=names,
             y=[d.claim_conflicts for d in run.designs], marker=dict(color="#ff7f0e")),
        dict(type="bar", name="retries (build attempts after the first)", x=names, y=extra,
             marker=dict(color="#1f77b4")),
    ]
    return dict(data=data, layout=layout(PLOTS[1][1], barmode="group",
                                           xaxis=axis("design"), yaxis=axis("count")))


def _fig_box(run: RunResult, key: str, title: str, unit: str, log: bool) -> dict:
    data = []
    for i, d in enumerate(run.designs):
        dist = d.scheduler_latency_ms if key == "latency" else d.time_to_active_s
        if not dist.sample:
            continue
        data.append(dict(type="box", name=label(d.name), y=dist.sample, boxpoints=False,
                         marker=dict(color=color(i)), line=dict(color=color(i)),
                         hovertemplate=f"%{{y:.2f}} {unit}<extra></extra>"))
        # p99 from the full data, which the sample's whiskers may miss.
        data.append(dict(type="scatter", mode="markers", x=[label(d.name)], y=[dist.p99],
                         marker=dict(symbol="diamond-open", size=11, color=color(i)),
                         name=f"p99 {label(d.name)}", showlegend=False,
                         hovertemplate=f"p99 %{{y:.2f}} {unit}<extra></extra>"))
    return dict(data=data, layout=layout(
        title, showlegend=False, xaxis=axis("design"),
        yaxis=_log_axis(unit, [v for d in run.designs for v in (
            d.scheduler_latency_ms.sample if key == "latency" else d.time_to_active_s.sample)])
        if log else axis(unit),
        annotations=[dict(text="box: p25-p75, line: median, ◇: p99", showarrow=False,
                          xref="paper", yref="paper", x=0, y=1.06, xanchor="left",
                          font=dict(size=10, color="#666"))]))


def _log_axis(unit: str, values: list[float]) -> dict:
    """A log axis labelled 1-2-5 in plain numbers (plotly's own minor labels
    print "2" for 20, which reads wrong)."""
    pos = [v for v in values if v > 0]
    if not pos:
        return axis(unit, type="log")
    lo, hi = min(pos), max(pos)
    ticks, decade = [], 1e-3
    while decade <= hi * 10:
        ticks += [m * decade for m in (1, 2, 5) if lo / 2 <= m * decade <= hi * 2]
        decade *= 10
    return axis(unit, type="log", tickvals=ticks, ticktext=[f"{t:g}" for t in ticks])


# Designs that reach the same fill draw the same line: each design also gets
# its own dash and marker symbol, and its markers sit at points of their own
# along the line, so a line under another still shows.
DASHES = ["solid", "dash", "dot", "dashdot", "longdash", "longdashdot"]
SYMBOLS = ["circle", "square", "diamond", "triangle-up", "x", "star", "cross", "triangle-down"]
_MARKS = 12   # markers per line


def _marker_sizes(n: int, i: int, designs: int) -> list[int]:
    step = max(1, n // _MARKS)
    offset = (i * step) // max(1, designs)
    return [8 if j % step == offset else 0 for j in range(n)]


def _fig_fill(run: RunResult) -> dict:
    data = []
    for i, d in enumerate(run.designs):
        if not d.fill:
            continue
        t = [p.t_s / 60 for p in d.fill]
        style = dict(line=dict(color=color(i), width=2, dash=DASHES[i % len(DASHES)]),
                     marker=dict(symbol=SYMBOLS[i % len(SYMBOLS)], color=color(i),
                                 size=_marker_sizes(len(t), i, len(run.designs))),
                     mode="lines+markers", legendgroup=f"d{i}")
        data.append(dict(type="scatter", name=label(d.name), x=t,
                         y=[100 * p.vcpu_fill for p in d.fill], yaxis="y",
                         hovertemplate="VCPU %{y:.1f}%<extra>%{fullData.name}</extra>", **style))
        data.append(dict(type="scatter", name=f"{label(d.name)} memory", x=t,
                         y=[100 * p.memory_fill for p in d.fill], yaxis="y2", showlegend=False,
                         hovertemplate="memory %{y:.1f}%<extra>%{fullData.name}</extra>", **style))
    # VCPU above, memory below, on one time axis.
    return dict(data=data, layout=layout(
        PLOTS[4][1], xaxis=axis("minutes (virtual)", anchor="y2"),
        yaxis=axis("VCPU %", range=[0, 100], domain=[0.55, 1]),
        yaxis2=axis("memory %", range=[0, 100], domain=[0, 0.45])))


def _fig_packing(run: RunResult) -> dict:
    ds = [d for d in run.designs if d.packing is not None]
    if not ds:
        return dict(data=[], layout=layout(PLOTS[5][1]))
    names = [label(d.name) for d in ds]

    def series(attr: str) -> list[int | None]:
        return [getattr(d.packing, attr) for d in ds]

    data = [
        dict(type="bar", name="hosts in use", x=names, y=series("hosts_in_use"),
             marker=dict(color="#1f77b4"), text=series("hosts_in_use"), textposition="outside"),
        dict(type="bar", name="upper bound (a legal packing found)", x=names,
             y=series("compaction"), marker=dict(color="#9467bd"),
             text=series("compaction"), textposition="outside"),
        dict(type="bar", name="lower bound (none can use fewer)", x=names, y=series("lp_bound"),
             marker=dict(color="#7f7f7f"), text=series("lp_bound"), textposition="outside"),
    ]
    top = max((v for attr in ("hosts_in_use", "compaction", "lp_bound")
               for v in series(attr) if v is not None), default=1)
    # Headroom so the numbers above the bars are not cut off.
    return dict(data=data, layout=layout(PLOTS[5][1], barmode="group",
                                           xaxis=axis("design"),
                                           yaxis=axis("hosts", range=[0, top * 1.12])))


def _no_data(fig: dict) -> dict:
    if not fig["data"]:
        fig["layout"]["annotations"] = [dict(
            text="no data in this run", showarrow=False, xref="paper", yref="paper",
            x=0.5, y=0.5, font=dict(size=14, color="#888"))]
        fig["layout"]["xaxis"] = dict(visible=False)
        fig["layout"]["yaxis"] = dict(visible=False)
        fig["layout"].pop("yaxis2", None)
    return fig


def _figures(run: RunResult) -> dict[str, dict]:
    figs = {
        "builds": _fig_builds(run),
        "retries": _fig_retries(run),
        "latency": _fig_box(run, "latency", PLOTS[2][1], "ms", log=True),
        "active": _fig_box(run, "active", PLOTS[3][1], "s", log=False),
        "fill": _fig_fill(run),
        "packing": _fig_packing(run),
    }
    return {k: _no_data(f) for k, f in figs.items()}


def _script_json(obj) -> str:
    """JSON safe inside a <script> element: no '</script>', no '<!--'."""
    return (json.dumps(obj, separators=(",", ":"), default=float)
            .replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e"))


def design_table(names: list[str], table_rows, *, table_id: str = "") -> str:
    """One column per design (topped with its colour), one row per figure;
    ``table_rows``: (label, [(text, best on the row), ...]) pairs."""
    e = html.escape
    head = "".join(f'<th style="border-top:4px solid {color(i)}">{e(name)}</th>' for i, name in enumerate(names))
    body = "".join(
        f"<tr><th>{e(row_label)}</th>" + "".join(
            f'<td class="{"win" if win else ""}">{e(text)}{" ✓" if win else ""}</td>' for text, win in cells)
        + "</tr>" for row_label, cells in table_rows)
    id_attr = f' id="{e(table_id)}"' if table_id else ""
    return (f'<table class="summary"{id_attr}><thead><tr><th>figure</th>{head}</tr></thead>'
            f"<tbody>{body}</tbody></table>")


def _summary_table(run: RunResult) -> str:
    return (design_table([d.name for d in run.designs], rows(run))
            + f'<p class="legend">✓ best on that row; {html.escape(HOSTS_LEGEND)}.</p>')


def _bound_text(d: DesignResult) -> str:
    e = html.escape
    p = d.packing
    if p is None:
        return "not computed"
    if not p.lower_method:
        return e(p.solver)
    low = "?" if p.lp_bound is None else f"{p.lp_bound:,}"
    up = "?" if p.compaction is None else f"{p.compaction:,}"
    return (f"lower {low} ({e(p.lower_method)}), upper {up} ({e(p.upper_method or 'none found')})"
            f"{'; the optimum' if p.exact else ''} &mdash; {e(p.solver)}")


def _details(d: DesignResult, i: int) -> str:
    e = html.escape
    knobs = ", ".join(f"{e(k)}={e(str(v))}" for k, v in d.knobs.items()) or "defaults"
    errs = "".join(f"<li>{n:,} × {e(reason)}</li>"
                   for reason, n in sorted(d.error_reasons.items(), key=lambda kv: -kv[1]))
    viol = "".join(
        f"<li>{e(v.kind)}{' at ' + e(v.level) if v.level else ''}: {e(v.detail)}"
        f"{' (' + e(v.instance) + ' on ' + e(v.host or '?') + ')' if v.instance else ''}</li>"
        for v in d.violations[:20])
    if len(d.violations) > 20:
        viol += f"<li>… and {len(d.violations) - 20:,} more</li>"
    spread = ", ".join(f"{e(k)} {v:.2f}" for k, v in d.anti_affinity_spread.items())
    stranded = ", ".join(f"{e(k)} {100 * v:.1f}%" for k, v in d.stranded.items())
    solver = _bound_text(d)
    return (f'<div class="design" style="border-left:5px solid {color(i)}">'
            f"<h3>{e(d.name)} <small>{e(d.design)}; {knobs}</small></h3>"
            f"<p>{d.requested:,} instances requested, {d.succeeded:,} ACTIVE, {d.errored:,} ERROR; "
            f"{d.placement_requests:,} Placement requests; run took {d.wall_s:.1f} s.</p>"
            f"<p>Stranded capacity: {stranded or 'n/a'}. Anti-affinity spread: "
            f"{spread or 'n/a'}.</p><p>Packing bounds: {solver}.</p>"
            + (f"<p>Why builds ended in ERROR:</p><ul>{errs}</ul>" if errs else "")
            + (f'<p class="bad">Constraint violations:</p><ul>{viol}</ul>' if viol
               else "<p>No constraint violations.</p>")
            + "</div>")


_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;
 color:#222;background:#fafafa}
main{max-width:1320px;margin:0 auto;padding:16px 24px 48px}
h1{font-size:24px;margin:8px 0 4px}h2{font-size:18px;margin:28px 0 8px}
h3{font-size:15px;margin:4px 0}h3 small{font-weight:normal;color:#666}
.meta{color:#555;margin:0 0 8px}
.notes{background:#fff3cd;border:1px solid #e0c36a;padding:6px 12px 6px 30px;border-radius:4px}
.notes li{margin:2px 0}
p.explain{background:#fff;border:1px solid #ddd;padding:12px 16px;line-height:1.5;
 border-radius:4px}
table.summary{border-collapse:collapse;background:#fff;font-size:14px}
table.summary th,table.summary td{border:1px solid #ddd;padding:5px 12px}
table.summary td{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
table.summary tbody th{text-align:left;font-weight:normal;color:#333}
td.win{background:#e6f4ea;color:#137333;font-weight:600}
.legend{color:#666;font-size:12px;margin:4px 0}
.grid{display:grid;grid-template-columns:repeat(2,minmax(0,1fr));gap:16px}
@media (max-width:1000px){.grid{grid-template-columns:1fr}}
.card{background:#fff;border:1px solid #ddd;border-radius:4px}
.card h3{margin:10px 14px 0}.plot{min-height:390px}
.designs{display:grid;grid-template-columns:repeat(auto-fit,minmax(380px,1fr));gap:12px}
.design{background:#fff;border:1px solid #ddd;padding:8px 12px;border-radius:4px;
 font-size:13px}
.design ul{margin:4px 0 4px 18px;padding:0}.bad{color:#b00020;font-weight:600}
"""


def page(title: str, main: str, figures: dict) -> str:
    """A self-contained HTML document: the head (styles, plotly's JavaScript
    inline), ``main`` (HTML, already escaped) and each of ``figures`` drawn
    into the element ``plot-<key>`` of ``main``. Every report is one."""
    import plotly.offline

    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(title)}</title>
<style>{_CSS}</style>
<script>{plotly.offline.get_plotlyjs()}</script>
</head><body><main>
{main}
</main>
<script>
const FIGURES = {_script_json(figures)};
for (const [key, fig] of Object.entries(FIGURES)) {{
  Plotly.newPlot("plot-" + key, fig.data, fig.layout,
                 {{displaylogo: false, responsive: true}});
}}
</script>
</body></html>
"""


def render(run: RunResult) -> str:
    """The whole report as one HTML document (a string)."""
    e = html.escape
    figs = _figures(run)
    plots = "".join(f'<div class="card"><h3>{e(title)}</h3>'
                    f'<div class="plot" id="plot-{key}"></div></div>'
                    for key, title in PLOTS)
    notes = "".join(f"<li>{e(n)}</li>" for n in run.notes)
    designs = "".join(_details(d, i) for i, d in enumerate(run.designs))
    title = f"billeting simulate: {run.scenario}"
    return page(title, f"""<h1>{e(title)}</h1>
<p class="meta">{run.hosts:,} hosts in {run.cells:,} cell{'s' if run.cells != 1 else ''},
{e(workload(run))}, seed {run.seed}; {len(run.designs)} design{'s' if len(run.designs) != 1 else ''};
billeting {e(run.billeting_version)}, started {e(run.started_at)}.</p>
{f'<ul class="notes">{notes}</ul>' if notes else ''}
<h2>What this run shows</h2>
<p class="explain">{e(explain(run))}</p>
<h2>Designs side by side</h2>
{_summary_table(run)}
<h2>Plots</h2>
<div class="grid">{plots}</div>
<h2>Per design</h2>
<div class="designs">{designs}</div>""", figs)


def write(run: RunResult, path: str | os.PathLike) -> Path:
    """Write the report atomically (a half-written report is never left)."""
    return write_atomic(render(run), path)


def write_atomic(text: str, path: str | os.PathLike) -> Path:
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent or ".", prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)   # mkstemp makes it owner-only
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    return path
