"""The explanatory paragraph, on synthetic runs."""
from msgspec.structs import replace

from billeting.sim.narrative import explain

from .factory import design, run, three_designs


def test_seeds_argument_in_numbers():
    text = explain(three_designs())
    assert "For the same 1,000 instances, legacy called the scheduler back 74 times" in text
    assert "96.90% of its builds succeeded (31 ended in ERROR)" in text
    assert ("scheduler-claims, which claims in the scheduler with 2 alternates, retried "
            in text)
    assert "on the alternates inside their cells, none upcalled, and 100.00% succeeded" in text
    assert "3.10 percentage points more builds succeeding than legacy" in text
    # Where each design's conflicts were absorbed.
    assert "58 in legacy (on the computes" in text
    assert "21 in scheduler-claims (in the scheduler, which fell back" in text
    assert "no constraint violations in any design" in text


def test_no_difference_is_said_honestly():
    r = run(design("legacy", upcalls=0), design("scheduler-claims", upcalls=0,
                                                knobs={"alternates": 2}))
    text = explain(r)
    assert "legacy needed no upcalls at this load" in text
    assert "does not show the rescheduling cost" in text
    assert "same within 0.1 percentage point" in text
    assert "needed no retries, none upcalled" in text


def test_scheduler_claims_worse_and_upcalling_is_not_hidden():
    r = run(design("legacy", upcalls=5, succeeded=999),
            design("scheduler-claims", upcalls=3, succeeded=980, retried=10))
    text = explain(r)
    assert "but 3 still went back to the scheduler" in text
    assert "fewer builds succeeding than legacy" in text
    assert "did not pay off" in text


def test_latency_difference_in_numbers():
    r = run(design("legacy", latency_ms=4.0, latency_sigma=0.0),
            design("scheduler-claims", latency_ms=6.0, latency_sigma=0.0))
    text = explain(r)
    assert "scheduler call of scheduler-claims took 50% longer than that of legacy (p50 6.0 ms vs 4.0 ms" in text
    assert "measured one call at a time on this machine while the designs ran one after another" in text
    assert "not of the design" in text and "slower" not in text and "faster" not in text
    r = run(design("legacy", latency_ms=4.0, latency_sigma=0.0),
            design("scheduler-claims", latency_ms=4.1, latency_sigma=0.0))
    assert "took about as long as that of legacy" in explain(r)


def test_violations_are_called_out():
    r = run(design("legacy"), design("scheduler-claims", violations=2))
    assert "found constraint violations -- 2 in scheduler-claims (capacity)" in explain(r)


def test_other_designs_described_one_by_one():
    r = run(design("scheduler-claims-0alt", kind="scheduler-claims", retried=0),
            design("pack", kind="conductor-claims"))
    text = explain(r)
    assert "scheduler-claims (scheduler-claims-0alt): 100.00% of 1,000 builds" in text
    assert "conductor-claims (pack), where the super conductor" in text
    assert "Placement refused no claims in any design." in text


def test_packing_sentence_and_missing_bound():
    d = design("a", hosts_in_use=101, lp_bound=101, compaction=101)
    assert "101 hosts against a lower bound of 101, and a packing on 101 was found (optimal)" in explain(run(d))
    d = replace(d, packing=None)
    assert "Packing" not in explain(run(d))


def test_empty_run():
    assert "nothing to explain" in explain(replace(run(), designs=[]))


def test_seeds_target_holds_or_not():
    assert "for this design (at least 99.9% of builds succeed with no upcall) holds" in \
        explain(three_designs())
    r = run(design("legacy", upcalls=5), design("scheduler-claims", succeeded=998))
    assert "does not hold" in explain(r)


def test_every_design_is_mentioned_once():
    r = run(design("legacy", upcalls=4), design("scheduler-claims-0alt", kind="scheduler-claims",
                                                  knobs={"alternates": 0}),
            design("scheduler-claims-2alt", kind="scheduler-claims", knobs={"alternates": 2}),
            design("conductor-claims"))
    text = explain(r)
    assert "scheduler-claims (scheduler-claims-0alt), which claims in the scheduler with 0 " \
        "alternates" in text
    assert "scheduler-claims (scheduler-claims-2alt) with 2 alternates: 100.00% of 1,000" in text
    assert text.count("where the super conductor claims") == 1


def test_packing_says_optimum_only_when_it_is_proven():
    from billeting.sim.packing import EXACT, HEURISTIC, LP
    from billeting.sim.results import PackingBound
    exact = replace(design("a"), packing=PackingBound(hosts_in_use=27, lp_bound=12, compaction=12, solver="s",
                                                      lower_method=EXACT, upper_method=EXACT, exact=True))
    assert "a 27 hosts; the fewest they fit on is 12, solved exactly (125% above the optimum)" in explain(run(exact))
    approx = replace(design("a"), packing=PackingBound(hosts_in_use=27, lp_bound=12, compaction=14, solver="s",
                                                       lower_method=LP, upper_method=HEURISTIC))
    text = explain(run(approx))
    assert ("a 27 hosts against a lower bound of 12 (LP relaxation), and a packing on 14 was found "
            "(heuristic) (125% above the lower bound)") in text
    assert "optimum" not in text
