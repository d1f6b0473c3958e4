"""Transactions every service shares count their retries only where asked:
Placement's module counts them in Placement's metrics, the shared one in
nobody's, so another service's retries never show as Placement's."""
from __future__ import annotations

from sqlalchemy import create_engine

from billeting.common.db import tx as shared
from billeting.placement import metrics
from billeting.placement.store import tx as placement_tx


def _retries() -> float:
    return sum(sample.value for family in metrics.RETRIES.collect() for sample in family.samples
               if sample.name.endswith("_total"))


def _flaky(failures: int):
    seen = {"n": 0}

    def work(conn):
        seen["n"] += 1
        if seen["n"] <= failures:
            raise shared.Retry("lost a compare-and-set")
        return seen["n"]
    return work


def test_the_shared_transactions_count_nothing_of_placements(tmp_path):
    engine = create_engine(f"sqlite:///{tmp_path / 'x.sqlite'}")
    before = _retries()
    assert shared.run_write(engine, _flaky(2)) == 3
    assert _retries() == before


def test_placements_transactions_count_in_placements_metrics(tmp_path):
    engine = create_engine(f"sqlite:///{tmp_path / 'x.sqlite'}")
    before = _retries()
    assert placement_tx.run_write(engine, _flaky(2)) == 3
    assert _retries() == before + 2


def test_an_observer_hears_every_retry_and_the_exhaustion(tmp_path):
    engine = create_engine(f"sqlite:///{tmp_path / 'x.sqlite'}")
    heard = []

    class Observer:
        def retried(self, *, write, generation):
            heard.append(("retried", write, generation))

        def exhausted(self, *, write):
            heard.append(("exhausted", write))

    try:
        shared.run_read(engine, _flaky(99), observer=Observer())
    except shared.RetriesExhausted as exc:
        assert exc.reason == "lost a compare-and-set"
    else:
        raise AssertionError("a unit of work that always asks for a retry must run out of them")
    assert heard == [("retried", False, True)] * 3 + [("exhausted", False)]
    # One class, whichever module raised it: the services' handlers catch both.
    assert placement_tx.RetriesExhausted is shared.RetriesExhausted
