"""The self-contained HTML report."""
import re
import shutil
import stat
import subprocess

import plotly.offline
import pytest
from msgspec.structs import replace

from billeting.sim import report_html
from billeting.sim.results import load

from .factory import design, run, three_designs
from .make_fixture import PATH

EVIL = '<script>alert("x")</script>'


def _outside_plotly(html: str) -> str:
    js = plotly.offline.get_plotlyjs()
    assert html.count(js) == 1          # embedded inline, exactly once
    return html.replace(js, "")


def test_self_contained_with_every_design_and_plot():
    r = three_designs()
    html = report_html.render(r)
    rest = _outside_plotly(html)
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", rest, re.I)
    assert not re.search(r"<(script|link|img|iframe)[^>]+(src|href)=", rest, re.I)
    assert "@import" not in rest and "url(" not in rest
    for d in r.designs:
        assert re.search(rf'<th style="border-top:4px solid #[0-9a-f]+">{d.name}</th>', rest)
        assert f"<h3>{d.name} <small>" in rest
    for key, title in report_html.PLOTS:
        assert f'id="plot-{key}"' in rest
    for key in ("builds", "retries", "latency", "active", "fill", "packing"):
        assert f'"{key}":{{"data":' in rest
    assert "What this run shows" in rest and "called the scheduler back 74 times" in rest


def test_hostile_design_name_stays_text():
    r = run(design(EVIL), design("legacy", upcalls=3), scenario=f"s{EVIL}")
    r = replace(r, notes=[EVIL])
    rest = _outside_plotly(report_html.render(r))
    # Only our own two <script> elements (plotly, then the figures) remain.
    assert rest.lower().count("<script") == 2
    assert 'alert("x")</script>' not in rest
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in rest


def test_missing_optional_data_still_renders():
    d = replace(design("bare"), packing=None, fill=[], stranded={}, violations=[],
                anti_affinity_spread={})
    d = replace(d, time_to_active_s=replace(d.time_to_active_s, sample=[]))
    html = report_html.render(run(d))
    assert "not computed" in html


def test_write_is_atomic_and_readable(tmp_path):
    out = report_html.write(three_designs(), tmp_path / "r.html")
    assert out.read_text().startswith("<!DOCTYPE html>")
    assert out.stat().st_mode & stat.S_IRGRP
    assert [p.name for p in tmp_path.iterdir()] == ["r.html"]


def test_fixture_is_marked_synthetic_and_loads():
    r = load(PATH.read_bytes())
    assert r.scenario.startswith("SYNTHETIC")
    assert any("not a measured result" in n for n in r.notes)
    assert len(r.designs) == 3


def test_empty_plots_say_no_data():
    d = replace(design("bare"), packing=None, fill=[])
    html = report_html.render(run(d))
    assert html.count("no data in this run") == 2


@pytest.mark.skipif(shutil.which("chromium") is None, reason="no chromium on this machine")
def test_plots_draw_in_a_real_browser_without_network(tmp_path):
    # Headless Chromium with every host name unresolvable: if the report
    # needed the network, plotly would not load and no plot would be drawn.
    path = report_html.write(three_designs(), tmp_path / "r.html")
    out = subprocess.run(
        ["chromium", "--headless", "--no-sandbox", "--disable-gpu",
         "--host-resolver-rules=MAP * ~NOTFOUND", "--virtual-time-budget=5000",
         "--dump-dom", path.as_uri()],
        capture_output=True, text=True, timeout=120).stdout
    for key, _ in report_html.PLOTS:
        m = re.search(rf'<div class="plot js-plotly-plot" id="plot-{key}"', out)
        assert m, f"plot {key} was not drawn"
    assert out.count('<svg class="main-svg"') >= len(report_html.PLOTS)
    # Every axis title is drawn (plotly.js drops a title given as a plain string).
    starts = sorted((out.index(f'id="plot-{key}"'), key) for key, _ in report_html.PLOTS)
    for (start, key), (end, _) in zip(starts, starts[1:] + [(len(out), None)]):
        drawn = re.findall(r'<text class="(x|y|y2)title"[^>]*>([^<]+)</text>', out[start:end])
        axes = {a for a, _ in drawn}
        assert {"x", "y"} <= axes, f"plot {key} has no axis titles: {drawn}"
    fill = out[out.index('id="plot-fill"'):]
    assert re.search(r'<text class="y2title"[^>]*>memory %</text>', fill)
