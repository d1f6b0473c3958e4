"""The figures of built runs whose true values follow from the scenario:
every build fails, or every build on one bad host fails, so each design's
attempts and retries per instance are known before the run."""
from collections import Counter

import pytest

from billeting.sim import report_html, runner, scenario, table, workload
from billeting.sim.figures import FIGURES, winners
from billeting.sim.narrative import explain
from billeting.sim.report_html import _figures

FLEET = """
name = "truth"
seed = 3
candidates_limit = 50
[fleet]
cells = 1
hosts_per_rack = 2
[[fleet.hosts]]
name = "h"
count = {hosts}
vcpus = 16
memory_mb = 32768
disk_gb = 1000
[[flavors]]
name = "fits"
vcpus = 1
memory_mb = 512
root_gb = 1
weight = 1
{extra_flavors}
[arrivals]
requests = {requests}
rate_per_s = 0.05
[lifetimes]
distribution = "forever"
[failures]
build_failure_pct = {pct}
bad_hosts = {bad}
[timing]
build_s = 5
"""

# Bigger than any host: the scheduler finds no host, no build is tried.
# "pair" makes two instances per request, so requests and instances differ.
HUGE = """
[[flavors]]
name = "pair"
vcpus = 1
memory_mb = 512
root_gb = 1
instances = 2
weight = 1
[[flavors]]
name = "huge"
vcpus = 64
memory_mb = 512
root_gb = 1
weight = 4
"""

EVERY_BUILD_FAILS_DESIGNS = """
[[designs]]
name = "legacy"
design = "legacy"
max_attempts = 3
[[designs]]
name = "conductor-claims"
design = "conductor-claims"
alternates = 1
[[designs]]
name = "scheduler-claims"
design = "scheduler-claims"
alternates = 1
"""


def _load(tmp_path, designs: str, **kw) -> scenario.Scenario:
    path = tmp_path / "truth.toml"
    path.write_text(FLEET.format(**kw) + designs)
    return scenario.load(path)


@pytest.fixture(scope="module")
def every_build_fails(tmp_path_factory):
    s = _load(tmp_path_factory.mktemp("fails"), EVERY_BUILD_FAILS_DESIGNS, hosts=4, requests=24,
              pct=100.0, bad=0, extra_flavors=HUGE)
    flavors = Counter(a.flavor.name for a in workload.generate(s) for _ in range(a.count))
    return s, runner.run(s), flavors["fits"] + flavors["pair"], flavors["huge"]


def test_attempts_and_retries_count_what_was_tried(every_build_fails):
    _, run, fits, huge = every_build_fails
    assert fits and huge >= fits         # enough never-built ones to sink the old mean to 1 or below
    # legacy: 3 attempts (max_attempts); the cell designs: the host and 1 alternate.
    for d, attempts in zip(run.designs, (3, 2, 2)):
        assert d.succeeded == 0 and d.errored == fits + huge, d.name
        assert d.never_built == huge, d.name
        assert d.attempts_per_build.count == fits, d.name
        assert d.attempts_per_build.mean == attempts, d.name
        assert d.retries == (attempts - 1) * fits, d.name


def test_retries_of_failed_builds_are_reported(every_build_fails):
    _, run, fits, _ = every_build_fails
    retries = {t["name"]: t["y"] for t in _figures(run)["retries"]["data"]}
    assert retries["retries (build attempts after the first)"] == [2 * fits, fits, fits]
    text = explain(run)
    assert "needed no retries" not in text
    assert f"retried {fits:,} build attempts on the alternates" in text
    assert f"made {fits:,} extra attempts" in text


def test_giving_up_does_not_win_the_cost_rows(tmp_path):
    # One host of two fails every build: with no alternate an instance that
    # lands there ends in ERROR after 1 attempt; with 1 it is built on the
    # other host after 2.
    s = _load(tmp_path, """
[[designs]]
name = "gives-up"
design = "scheduler-claims"
alternates = 0
[[designs]]
name = "retries"
design = "scheduler-claims"
alternates = 1
""", hosts=2, requests=12, pct=0.0, bad=1, extra_flavors="")
    run = runner.run(s)
    gives_up, retries = run.designs
    assert retries.success_rate == 1.0 and gives_up.errored > 0
    assert gives_up.attempts_per_build.mean == 1.0 and gives_up.retries == 0
    assert retries.retries == gives_up.errored     # every instance on the bad host moved once
    assert retries.attempts_per_build.mean > 1.0
    by_key = {f.key: f for f in FIGURES}
    for key in ("attempts", "retries", "claim_conflicts", "placement_per_build", "stranded"):
        assert 0 not in winners(by_key[key], run.designs), key
    assert winners(by_key["success_pct"], run.designs) == {1}


def _axes(layout: dict) -> dict[str, dict]:
    return {k: v for k, v in layout.items() if k.startswith(("xaxis", "yaxis"))}


def test_every_plot_axis_has_a_title_plotly_reads(every_build_fails):
    _, run, _, _ = every_build_fails
    for key, fig in _figures(run).items():
        axes = _axes(fig["layout"])
        assert axes, key
        for name, axis in axes.items():
            if axis.get("visible") is False:
                continue
            assert isinstance(axis.get("title"), dict) and axis["title"]["text"], (key, name)


def test_fill_lines_of_equal_designs_stay_apart(every_build_fails):
    # Every build fails here, so every design's fill lies on 0 most of the time.
    _, run, _, _ = every_build_fails
    vcpu = [t for t in _figures(run)["fill"]["data"] if t["yaxis"] == "y"]
    assert len(vcpu) == 3 and all(t["y"].count(0.0) > len(t["y"]) / 2 for t in vcpu)
    assert len({t["line"]["dash"] for t in vcpu}) == 3
    assert len({t["marker"]["symbol"] for t in vcpu}) == 3
    marked = [{t["x"][j] for j, size in enumerate(t["marker"]["size"]) if size} for t in vcpu]
    assert all(marked)
    assert not (marked[0] & marked[1] or marked[0] & marked[2] or marked[1] & marked[2])


def test_header_and_paragraph_count_the_same_unit(every_build_fails):
    s, run, fits, huge = every_build_fails
    arrivals = workload.generate(s)
    instances = sum(a.count for a in arrivals)
    assert instances == fits + huge and instances != len(arrivals)
    html = report_html.render(run)
    said = f"{len(arrivals):,} requests for {instances:,} instances"
    assert said in html and said in table.render(run, color=False)
    assert f"For the same {instances:,} instances" in html
    assert f"{instances:,} requests" not in html


def test_design_cards_show_only_the_knobs_a_design_uses(every_build_fails):
    _, run, _, _ = every_build_fails
    legacy, conductor, sched = run.designs
    assert "alternates" not in legacy.knobs and "alternates_from" not in legacy.knobs
    assert "ranked" not in sched.knobs and conductor.knobs["ranked"] == 10
    assert sched.knobs["alternates"] == 1 and "candidate_sample" in legacy.knobs
    html = report_html.render(run)
    card = html[html.index("<h3>legacy <small>"):]
    card = card[:card.index("</small>")]
    assert "max_attempts=3" in card and "alternates" not in card


def test_stranded_names_no_class_when_nothing_is_stranded(every_build_fails):
    _, run, _, _ = every_build_fails
    stranded = next(f for f in FIGURES if f.key == "stranded")
    for d in run.designs:
        assert set(d.stranded.values()) == {0.0}, d.name
        assert stranded.show(d) == "0.0% (none)"
    assert winners(stranded, run.designs) == set()
