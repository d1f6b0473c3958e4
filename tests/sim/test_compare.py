"""--compare: at least as fast and accurate, figure by figure."""
import pytest
from msgspec.structs import replace

from billeting.sim.compare import Tolerances, compare, exit_status, render
from billeting.sim.results import Violation, dump, load

from .factory import design, run, three_designs


def test_identical_runs_pass():
    base = three_designs()
    v = compare(base, load(dump(base)))
    assert v.status == "pass" and exit_status(v) == 0
    assert not v.problems
    # Every design judged on every figure, each with its limit shown.
    assert {c.design for c in v.checks} == {"legacy", "conductor-claims", "scheduler-claims"}
    assert all(c.passed for c in v.checks)
    assert "PASS" in render(v, color=False)


def _with_latency(d, **kw):
    return replace(d, scheduler_latency_ms=replace(d.scheduler_latency_ms, **kw))


def _with_packing(d, **kw):
    return replace(d, packing=replace(d.packing, **kw))


@pytest.mark.parametrize("change, figure", [
    (lambda d: replace(d, succeeded=d.succeeded - 10, errored=10), "builds succeeded"),
    (lambda d: replace(d, violations=[Violation(kind="anti-affinity", level="rack",
                                                detail="2 members in rack r1")]),
     "constraint violations"),
    (lambda d: replace(d, upcalls=1), "upcalls"),
    (lambda d: _with_packing(d, hosts_in_use=110), "hosts in use / lower bound"),
    (lambda d: _with_latency(d, p50=d.scheduler_latency_ms.p50 * 1.5), "scheduler latency p50"),
    (lambda d: _with_latency(d, p99=d.scheduler_latency_ms.p99 * 1.5), "scheduler latency p99"),
    (lambda d: replace(d, placement_requests_per_build=3.2), "Placement requests per build"),
])
def test_each_regression_alone_fails_naming_the_figure(change, figure):
    base = run(design("scheduler-claims", latency_ms=4.0))
    cand = run(change(base.designs[0]))
    v = compare(base, cand, tolerances=Tolerances(wall_clock=True))
    assert v.status == "fail" and exit_status(v) == 1
    failed = [c.figure for c in v.failed]
    assert len(failed) == 1 and failed[0].startswith(figure), failed
    assert any(figure in p for p in v.problems)
    out = render(v, color=False)
    assert "FAIL" in out and figure in out


def test_new_violation_kinds_are_named():
    base = run(design("a"))
    v = compare(base, run(design("a", violations=2)))
    assert "new violations: capacity" in v.failed[0].note


def test_within_tolerance_passes():
    base = run(design("d", latency_ms=4.0, succeeded=1000))
    # 0.05 points fewer successes is inside the 0.1-point tolerance only for
    # a large run: use 2,000 requests and 1 failure.
    base = run(design("d", requested=2000, succeeded=2000, latency_ms=4.0), requests=2000)
    cand = run(design("d", requested=2000, succeeded=1999, latency_ms=4.4), requests=2000)
    assert compare(base, cand).status == "pass"
    assert compare(base, cand, tolerances=Tolerances(success_points=0.0)).status == "fail"


def test_better_candidate_passes():
    base = run(design("d", upcalls=10, succeeded=950, latency_ms=8.0, hosts_in_use=120))
    cand = run(design("d", upcalls=0, succeeded=1000, latency_ms=3.0, hosts_in_use=100))
    assert compare(base, cand).status == "pass"


def test_missing_design_fails_clearly():
    base = three_designs()
    cand = run(*[d for d in base.designs if d.name != "legacy"])
    v = compare(base, cand)
    assert v.status == "fail"
    assert any("'legacy' is in the baseline but missing from the candidate" in p
               for p in v.problems)


def test_extra_design_is_noted_not_judged():
    base = run(design("a"))
    v = compare(base, run(design("a"), design("b")))
    assert v.status == "pass"
    assert any("b" in n for n in v.notes)


@pytest.mark.parametrize("kw", [dict(scenario="other"), dict(seed=7), dict(hosts=5)])
def test_different_experiment_is_a_mismatch(kw):
    v = compare(run(design("a")), run(design("a"), **kw))
    assert v.status == "mismatch" and exit_status(v) == 2
    assert "not of the same experiment" in v.problems[0]
    assert "NOT COMPARABLE" in render(v, color=False)


def test_packing_not_computed_is_said_not_failed():
    base = run(design("a", lp_bound=None, compaction=None))
    v = compare(base, run(design("a")))
    pk = [c for c in v.checks if c.figure.startswith("hosts in use")][0]
    assert pk.passed and "not computed in baseline" in pk.note


def test_rich_render_escapes_markup_in_names():
    base = run(design("[bold]x"))
    out = render(compare(base, base), color=True)
    assert "[bold]x" in out


def test_compare_files(tmp_path):
    from billeting.sim.compare import compare_files
    from billeting.sim.results import dump
    a = tmp_path / "a.json"
    a.write_bytes(dump(three_designs()))
    assert compare_files(a, a).status == "pass"
    v = compare_files(a, tmp_path / "missing.json")
    assert v.status == "mismatch" and "cannot read the candidate" in v.problems[0]
    bad = tmp_path / "bad.json"
    bad.write_text('{"scenario": 1}')
    v = compare_files(bad, a)
    assert exit_status(v) == 2 and "baseline" in v.problems[0]
    assert "not a simulation result" in v.problems[0]
    assert "NOT COMPARABLE" in render(v, color=False)


def test_latency_within_five_percent_is_a_tie_in_the_table():
    from billeting.sim.figures import FIGURES, winners
    fig = next(f for f in FIGURES if f.key == "latency_p50")
    a, b = design("a", latency_ms=4.0, latency_sigma=0), design("b", latency_ms=4.1,
                                                                 latency_sigma=0)
    assert winners(fig, [a, b]) == set()
    c = design("c", latency_ms=5.0, latency_sigma=0)
    assert winners(fig, [a, c]) == {0}


def test_cli_compare_refuses_a_negative_latency_tolerance(tmp_path, capsys):
    from billeting.cli import main
    a = tmp_path / "a.json"
    a.write_bytes(dump(three_designs()))
    assert main(["simulate", "--compare", str(a), str(a), "--latency-tolerance", "-1"]) == 2
    assert "--latency-tolerance" in capsys.readouterr().err
