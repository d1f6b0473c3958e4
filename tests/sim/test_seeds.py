"""Multi-seed mode: each figure's spread over seeds, best only beyond noise."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from msgspec.structs import replace

from billeting.sim import seeds, seeds_html

from .factory import design, run

ROOT = Path(__file__).resolve().parents[2]


def _runs(successes_a, successes_b):
    return [replace(run(design("a", succeeded=sa), design("b", succeeded=sb)), seed=i + 1)
            for i, (sa, sb) in enumerate(zip(successes_a, successes_b))]


def _fig(s, name, key):
    d = next(d for d in s.designs if d.name == name)
    return next(f for f in d.figures if f.key == key)


def test_spread_has_every_seed_and_its_summary():
    s = seeds.spread(_runs([990, 1000, 995], [980, 985, 970]))
    f = _fig(s, "a", "success_pct")
    assert s.seeds == [1, 2, 3]
    assert f.values == [99.0, 100.0, 99.5]
    assert (f.min, f.median, f.max) == (99.0, 99.5, 100.0)
    assert f.mean == pytest.approx(99.5) and f.sd == pytest.approx(0.5)
    assert seeds.cell(f) == "99.50% [99.00% .. 100.00%]"


def test_best_is_marked_only_when_its_worst_seed_beats_every_other_best():
    apart = seeds.spread(_runs([990, 1000, 995], [980, 985, 970]))
    assert seeds.separated("success_pct", apart) == {0}
    # b's best seed (99.2%) beats a's worst (99.0%): noise, nobody marked.
    overlap = seeds.spread(_runs([990, 1000, 995], [980, 992, 970]))
    assert seeds.separated("success_pct", overlap) == set()
    table = seeds.render(overlap)
    line = next(ln for ln in table.splitlines() if ln.startswith("builds succeeded"))
    assert "*" not in line
    line = next(ln for ln in seeds.render(apart).splitlines() if ln.startswith("builds succeeded"))
    assert line.count("*") == 1 and "99.50% [99.00% .. 100.00%] *" in line


def test_a_design_missing_from_a_seed_counts_as_no_value():
    runs = _runs([990, 1000], [980, 985])
    runs[1] = replace(runs[1], designs=runs[1].designs[:1])
    f = _fig(seeds.spread(runs), "b", "success_pct")
    assert f.values == [98.0, None] and f.sd is None and f.median == 98.0


def test_result_round_trips_and_the_report_has_its_table_and_axis_titles(tmp_path):
    s = seeds.spread(_runs([990, 1000, 995], [980, 985, 970]), ["x/seed-1", "x/seed-2", "x/seed-3"])
    assert seeds.load(seeds.dump(s)) == s
    page = seeds_html.write(s, tmp_path / "report.html").read_text()
    assert 'id="spread"' in page and "99.50% [99.00% .. 100.00%] ✓" in page
    figs = json.loads(page.split("const FIGURES = ", 1)[1].split(";\n", 1)[0])
    assert set(figs) == {k for k, _ in seeds_html.PLOTS}
    for fig in figs.values():
        assert fig["layout"]["yaxis"]["title"]["text"] and fig["layout"]["xaxis"]["title"]["text"]
        assert [len(t["y"]) for t in fig["data"]] == [3, 3]


def test_the_seeds_report_is_self_contained_and_keeps_a_hostile_name_text():
    """The same page as a single run's report: plotly inline once, only our two scripts."""
    import plotly.offline

    evil = '<script>alert("x")</script>'
    runs = [replace(r, scenario=f"s{evil}", designs=[replace(r.designs[0], name=evil), *r.designs[1:]])
            for r in _runs([990, 1000, 995], [980, 985, 970])]
    page = seeds_html.render(seeds.spread(runs))
    js = plotly.offline.get_plotlyjs()
    assert page.count(js) == 1
    rest = page.replace(js, "")
    assert rest.lower().count("<script") == 2 and 'alert("x")</script>' not in rest
    assert "<title>billeting simulate: s&lt;script&gt;" in rest
    assert '<th style="border-top:4px solid #1f77b4">&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;</th>' in rest


@pytest.mark.parametrize("text, seeds_", [("1-3,5", [1, 2, 3, 5]), ("7, 7,8", [7, 8])])
def test_seed_lists(text, seeds_):
    assert seeds.parse_seeds(text) == seeds_


@pytest.mark.parametrize("text", ["3-1", "x", "7", "", "1-5000"])
def test_bad_seed_lists_are_refused(text):
    with pytest.raises(ValueError):
        seeds.parse_seeds(text)


def _simulate(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "billeting.cli", "simulate", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=900)


@pytest.mark.parametrize("flags", [["--seeds", "4"], ["--seeds", "1,2", "--seed", "3"],
                                   ["--seeds", "1,2", "--baseline", "scenarios/baselines/ci-small.json"]])
def test_cli_refuses_bad_seed_flags_before_running(flags, tmp_path):
    done = _simulate("scenarios/ci-small.toml", "--out", str(tmp_path), *flags)
    assert done.returncode == 2 and "--seeds" in done.stderr, done.stderr
    assert not any(tmp_path.iterdir())


def test_cli_runs_each_seed_and_writes_the_spread(tmp_path):
    done = _simulate("scenarios/ci-small.toml", "--seeds", "11,12", "--designs", "scheduler-claims",
                     "--out", str(tmp_path), "--quiet")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "2 seeds (11, 12)" in done.stdout and "median [min .. max]" in done.stdout
    s = seeds.load((tmp_path / "seeds.json").read_bytes())
    assert s.seeds == [11, 12] and [d.name for d in s.designs] == ["scheduler-claims"]
    for seed in (11, 12):
        one = json.loads((tmp_path / f"seed-{seed}" / "result.json").read_text())
        assert one["seed"] == seed and one["designs"][0]["packing"] is not None
    # Each seed's value is the one its own result holds.
    first = json.loads((tmp_path / "seed-11" / "result.json").read_text())["designs"][0]
    assert _fig(s, "scheduler-claims", "upcalls").values[0] == first["upcalls"]
    assert (tmp_path / "report.html").stat().st_size > 1_000_000   # plotly embedded


@pytest.mark.skipif(__import__("shutil").which("chromium") is None, reason="no chromium on this machine")
def test_seed_plots_draw_with_axis_titles_in_a_real_browser(tmp_path):
    import re
    s = seeds.spread(_runs([990, 1000, 995], [980, 985, 970]))
    path = seeds_html.write(s, tmp_path / "r.html")
    out = subprocess.run(
        ["chromium", "--headless", "--no-sandbox", "--disable-gpu",
         "--host-resolver-rules=MAP * ~NOTFOUND", "--virtual-time-budget=5000",
         "--dump-dom", path.as_uri()], capture_output=True, text=True, timeout=120).stdout
    starts = sorted((out.index(f'id="plot-{key}"'), key) for key, _ in seeds_html.PLOTS)
    for (start, key), (end, _) in zip(starts, starts[1:] + [(len(out), None)]):
        part = out[start:end]
        assert '<svg class="main-svg"' in part, f"plot {key} was not drawn"
        drawn = {a for a, _ in re.findall(r'<text class="(x|y)title"[^>]*>([^<]+)</text>', part)}
        assert drawn == {"x", "y"}, f"plot {key} lacks axis titles"


def test_a_cost_cut_by_giving_up_builds_is_not_marked():
    # b makes far fewer Placement requests per build on every seed, but loses
    # more builds: as in the single-run table, it wins nothing for that.
    runs = [replace(run(design("a", succeeded=1000, placement_per_build=3.0),
                        design("b", succeeded=950, placement_per_build=1.0)), seed=i) for i in (1, 2)]
    s = seeds.spread(runs)
    assert seeds.separated("placement_per_build", s) == set()
    assert seeds.separated("success_pct", s) == {0}
