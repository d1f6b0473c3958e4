"""How the simulator's HTML reports draw a plot: one colour per design,
escaped trace names, axis titles plotly.js shows, one layout. Shared by the
run report (``report_html``) and the seeds report (``seeds_html``)."""
from __future__ import annotations

import html

# One colour per design, in the order of the run, the same in every plot.
PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b",
           "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"]


def color(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def label(name: str) -> str:
    # Plotly draws trace names and categories through its own small HTML
    # dialect; entities keep a name like "<b>" literal.
    return html.escape(name, quote=False)


def axis(title: str, **kw) -> dict:
    # plotly.js takes an axis title as {"text": ...}; a plain string is dropped.
    # automargin: long design names, drawn slanted, push the title down
    # instead of running into it.
    return dict(title=dict(text=title), automargin=True, **kw)


def layout(title: str, **kw) -> dict:
    # The title is an HTML heading above the plot (see report_html.render):
    # inside the plot it collides with plotly's toolbar on narrow screens.
    # The legend sits above the plot: below it, slanted design names and
    # the x axis title ran into it.
    base = dict(meta=dict(title=title), template="plotly_white", height=390,
                margin=dict(l=60, r=20, t=56, b=40),
                legend=dict(orientation="h", x=0, y=1.02, yanchor="bottom"), font=dict(size=12))
    base.update(kw)
    return base
