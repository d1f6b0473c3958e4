"""Concurrent requests with one Placement query decided together: the
batching itself (``coalesce.Coalescer``) and the scheduler's batch decision
(one candidates query, one claim transaction, fall-back when it loses)."""
from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from billeting.placement_client import claims
from billeting.placement_client.inprocess import InProcessPlacementClient
from billeting.placement_client.model import AllocationRequest, ProviderResources
from billeting.scheduler import ConsumerConflict, NoValidHost, SchedulerSettings
from billeting.scheduler.coalesce import Coalescer
from billeting.scheduler.nova import Flavor, request_from_nova
from tests.scheduler.fleet import new_uuids

SMALL = Flavor(vcpus=2, memory_mb=2048, root_gb=10)
WAIT_S = 20


def req(flavor=SMALL, instances=None, **kw):
    return request_from_nova(flavor, instance_uuids=instances or new_uuids(1), project_id="proj",
                             user_id="user", **kw)


def until(condition, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.005)


# --- the batching -------------------------------------------------------------------

class Recorder:
    """A ``decide`` that records its batches; the first batch waits for ``gate``."""

    def __init__(self, answer=lambda item: item * 10) -> None:
        self.batches: list[list] = []
        self.gate = threading.Event()
        self.answer = answer

    def __call__(self, items):
        self.batches.append(list(items))
        if len(self.batches) == 1:
            assert self.gate.wait(WAIT_S)
        return [self.answer(i) for i in items]


def run_all(coalescer, calls):
    """Start ``calls`` (key, item) in threads; the first one first."""
    pool = ThreadPoolExecutor(len(calls))
    first = pool.submit(coalescer.run, *calls[0])
    until(lambda: coalescer._waiting, "the first batch to start")
    rest = [pool.submit(coalescer.run, *c) for c in calls[1:]]
    return pool, first, rest


def test_a_lone_request_is_decided_at_once_in_a_batch_of_one():
    decide = Recorder()
    decide.gate.set()
    assert Coalescer(decide).run("q", 4) == 40
    assert decide.batches == [[4]]


def test_requests_that_arrive_while_one_is_decided_form_the_next_batch():
    decide = Recorder()
    coalescer = Coalescer(decide)
    pool, first, rest = run_all(coalescer, [("q", 1), ("q", 2), ("q", 3), ("q", 4)])
    until(lambda: coalescer.waiting() == 3, "three requests to queue")
    decide.gate.set()
    assert first.result(WAIT_S) == 10
    assert sorted(f.result(WAIT_S) for f in rest) == [20, 30, 40]
    assert decide.batches[0] == [1] and sorted(decide.batches[1]) == [2, 3, 4] and len(decide.batches) == 2
    assert coalescer.waiting() == 0 and not coalescer._waiting
    pool.shutdown()


def test_another_query_does_not_wait():
    decide = Recorder()
    coalescer = Coalescer(decide)
    pool, first, _ = run_all(coalescer, [("q", 1)])
    assert coalescer.run("other", 5) == 50  # while the first batch is still held at its gate
    decide.gate.set()
    assert first.result(WAIT_S) == 10
    pool.shutdown()


def test_a_batch_holds_at_most_max_batch_requests():
    decide = Recorder()
    coalescer = Coalescer(decide, max_batch=2)
    pool, first, rest = run_all(coalescer, [("q", i) for i in range(1, 6)])
    until(lambda: coalescer.waiting() == 4, "four requests to queue")
    decide.gate.set()
    assert sorted(f.result(WAIT_S) for f in [first, *rest]) == [10, 20, 30, 40, 50]
    assert [len(b) for b in decide.batches] == [1, 2, 2]
    pool.shutdown()


def test_each_caller_gets_its_own_outcome_and_only_its_own_exception():
    decide = Recorder(lambda i: ValueError(f"bad {i}") if i == 3 else i)
    coalescer = Coalescer(decide)
    pool, first, rest = run_all(coalescer, [("q", 1), ("q", 2), ("q", 3)])
    until(lambda: coalescer.waiting() == 2, "two requests to queue")
    decide.gate.set()
    outcomes = {}
    for f in rest:
        try:
            outcomes[f.result(WAIT_S)] = "ok"
        except ValueError as exc:
            outcomes[str(exc)] = "raised"
    assert first.result(WAIT_S) == 1 and outcomes == {2: "ok", "bad 3": "raised"}
    pool.shutdown()


def test_a_decide_that_fails_fails_its_batch_only_and_nobody_hangs():
    calls = []

    def decide(items):
        calls.append(list(items))
        if len(calls) == 1:
            assert gate.wait(WAIT_S)
            raise RuntimeError("broken")
        return list(items)

    gate = threading.Event()
    coalescer = Coalescer(decide)
    pool, first, rest = run_all(coalescer, [("q", 1), ("q", 2)])
    until(lambda: coalescer.waiting() == 1, "a request to queue")
    gate.set()
    with pytest.raises(RuntimeError):
        first.result(WAIT_S)
    assert rest[0].result(WAIT_S) == 2
    assert coalescer.run("q", 3) == 3
    pool.shutdown()


def test_callers_of_a_batch_that_come_back_are_gathered_into_one_batch():
    # Without gathering, the first caller back would go alone and the other
    # two queue behind it: batches of one and of two in turn.
    decide = Recorder()
    coalescer = Coalescer(decide, gather_share=1e6, gather_max_s=WAIT_S)
    pool, first, rest = run_all(coalescer, [("q", 1), ("q", 2), ("q", 3), ("q", 4)])
    until(lambda: coalescer.waiting() == 3, "three requests to queue")
    decide.gate.set()
    assert sorted(f.result(WAIT_S) for f in [first, *rest]) == [10, 20, 30, 40]
    assert [len(b) for b in decide.batches] == [1, 3]
    back = pool.submit(coalescer.run, "q", 5)  # the first of the three back
    until(lambda: "q" in coalescer._waiting, "the first caller back to lead")
    others = [pool.submit(coalescer.run, "q", i) for i in (6, 7)]
    assert sorted(f.result(WAIT_S) for f in [back, *others]) == [50, 60, 70]
    assert sorted(decide.batches[2]) == [5, 6, 7] and len(decide.batches) == 3
    pool.shutdown()


def test_a_leader_gathers_no_longer_than_its_window():
    decide = Recorder()
    coalescer = Coalescer(decide, gather_share=1e6, gather_max_s=0.05)
    pool, first, rest = run_all(coalescer, [("q", 1), ("q", 2), ("q", 3)])
    until(lambda: coalescer.waiting() == 2, "two requests to queue")
    decide.gate.set()
    assert sorted(f.result(WAIT_S) for f in [first, *rest]) == [10, 20, 30]
    # Only one of the three callers comes back: it is decided alone once
    # the window (50 ms here) is over, not left waiting for the others.
    assert coalescer.run("q", 4) == 40
    assert decide.batches[-1] == [4] and not coalescer._waiting
    pool.shutdown()


def test_a_lone_request_long_after_a_batch_is_decided_at_once():
    decide = Recorder()
    coalescer = Coalescer(decide, gather_share=0.0)
    pool, first, rest = run_all(coalescer, [("q", 1), ("q", 2), ("q", 3)])
    until(lambda: coalescer.waiting() == 2, "two requests to queue")
    decide.gate.set()
    assert sorted(f.result(WAIT_S) for f in [first, *rest]) == [10, 20, 30]
    assert coalescer.run("q", 4) == 40  # a window of nothing: no wait for the second caller
    assert decide.batches[-1] == [4] and not coalescer._expected
    pool.shutdown()


# --- the scheduler's batch decision -----------------------------------------------------

class Gated(InProcessPlacementClient):
    """Counts candidates queries and claim transactions; the first query
    waits for ``gate`` so that the test can queue requests behind it.
    ``before_post`` runs before each ``POST /allocations``."""

    def __init__(self, engine, settings) -> None:
        super().__init__(engine, settings)
        self.queries = 0
        self.posts: list[int] = []
        self.puts = 0
        self.gate = threading.Event()
        self.before_post = None

    def allocation_candidates(self, query):
        self.queries += 1
        if self.queries == 1:
            assert self.gate.wait(WAIT_S)
        return super().allocation_candidates(query)

    def post_allocations(self, writes):
        self.posts.append(len(writes))
        if self.before_post is not None:
            self.before_post()
        return super().post_allocations(writes)

    def put_allocations(self, consumer_uuid, write, *, version=None):
        self.puts += 1
        return super().put_allocations(consumer_uuid, write, version=version)


@pytest.fixture
def gated(engine, settings):
    return Gated(engine, settings)


def decide_together(scheduler, client, requests, alternates=0):
    """The first request alone (held at the gate), then ``requests`` queued
    behind it and decided as one batch. Returns (the first request's line,
    per request its line ``[chosen, alternate, ...]`` or the exception)."""
    pool = ThreadPoolExecutor(len(requests) + 1)
    first = pool.submit(scheduler.select_destinations, req(), alternates)
    until(lambda: client.queries == 1, "the first query")
    futures = [pool.submit(scheduler.select_destinations, r, alternates) for r in requests]
    until(lambda: scheduler._together.waiting() == len(requests), "the requests to queue")
    client.gate.set()
    outcomes = []
    for f in futures:
        try:
            [line] = f.result(WAIT_S)
            outcomes.append(line)
        except (NoValidHost, ConsumerConflict) as exc:
            outcomes.append(exc)
    [line] = first.result(WAIT_S)
    pool.shutdown()
    return line, outcomes


def test_queued_requests_share_one_query_and_one_claim_and_spread(fleet, gated, make_scheduler):
    for i in range(6):
        fleet.host(f"h{i}")
    scheduler = make_scheduler(client=gated)
    requests = [req() for _ in range(4)]
    alone, outcomes = decide_together(scheduler, gated, requests, alternates=2)
    version = alone[0].allocation_request_version
    assert version
    assert gated.queries == 2 and gated.posts == [4] and gated.puts == 1  # the lone first request: one PUT
    chosen = [line[0] for line in outcomes]
    # Each request ranked after the ones before it consumed their picks:
    # a spreading weigher sends every one to another host.
    assert len({s.nodename for s in chosen}) == 4
    for request, line in zip(requests, outcomes):
        assert line[0].claimed and line[0].consumer_uuid == request.instance_uuids[0]
        assert len(line) == 3 and all(not s.claimed for s in line[1:])
        # Every Selection names the microversion its allocation request came in.
        assert all(s.allocation_request_version == version for s in line)
        assert line[0].nodename not in {s.nodename for s in line[1:]}
        held = gated.get_allocations(request.instance_uuids[0])
        assert set(held.allocations) == {line[0].compute_node_uuid}
        assert (held.project_id, held.user_id) == ("proj", "user")


def test_requests_alike_but_for_their_owner_are_ranked_apart_and_claimed_together(fleet, gated,
                                                                                  make_scheduler):
    for i in range(8):
        fleet.host(f"h{i}")
    scheduler = make_scheduler(client=gated)
    owners = [("a", "ua"), ("b", "ub"), ("a", "ua"), ("b", "ub")]
    requests = [request_from_nova(SMALL, instance_uuids=new_uuids(1), project_id=p, user_id=u)
                for p, u in owners]
    _, outcomes = decide_together(scheduler, gated, requests, alternates=2)
    assert gated.posts == [4]
    chosen = {line[0].nodename for line in outcomes}
    assert len(chosen) == 4
    for (project, user), request, line in zip(owners, requests, outcomes):
        held = gated.get_allocations(request.instance_uuids[0])
        assert (held.project_id, held.user_id) == (project, user)
        assert set(held.allocations) == {line[0].compute_node_uuid}
        # An alternate is never a host another request of the batch was given.
        assert len(line) == 3 and not {s.nodename for s in line[1:]} & chosen


def test_a_request_the_batch_left_no_room_for_gets_no_valid_host(fleet, gated, make_scheduler):
    for i in range(3):
        fleet.host(f"h{i}", vcpus=2)  # one instance each; the first request takes one
    scheduler = make_scheduler(client=gated)
    requests = [req() for _ in range(3)]
    _, outcomes = decide_together(scheduler, gated, requests)
    placed = [o for o in outcomes if isinstance(o, list)]
    refused = [o for o in outcomes if isinstance(o, NoValidHost)]
    assert len(placed) == 2 and len(refused) == 1
    assert gated.posts == [2]
    loser = requests[outcomes.index(refused[0])]
    assert not gated.get_allocations(loser.instance_uuids[0]).allocations
    assert all(fleet.usage(f"h{i}") == {"DISK_GB": 10, "MEMORY_MB": 2048, "VCPU": 2} for i in range(3))


def test_a_lost_batch_claim_is_decided_again_request_by_request(fleet, gated, make_scheduler, placement):
    for i in range(4):
        fleet.host(f"h{i}", vcpus=2)  # one instance each
    scheduler = make_scheduler(client=gated)
    requests = [req() for _ in range(2)]

    def another_scheduler_takes_all_but_one_free_host():
        gated.before_post = None
        free = sorted(name for name in fleet.hosts if not fleet.usage(name))
        assert len(free) == 3  # the first request took one
        for name in free[:-1]:
            assert claims.claim(placement, new_uuids(1)[0], AllocationRequest(allocations={
                fleet.hosts[name]: ProviderResources({"VCPU": 2, "MEMORY_MB": 2048, "DISK_GB": 10})}),
                project_id="other", user_id="other").ok

    gated.before_post = another_scheduler_takes_all_but_one_free_host
    _, outcomes = decide_together(scheduler, gated, requests)
    # The batch's two claims could not both land, so each request was
    # decided again on its own: one gets the last free host, one is refused.
    assert gated.posts == [2] and gated.queries == 4
    placed = [o for o in outcomes if isinstance(o, list)]
    refused = [o for o in outcomes if isinstance(o, NoValidHost)]
    assert len(placed) == 1 and len(refused) == 1
    loser = requests[outcomes.index(refused[0])]
    assert not placement.get_allocations(loser.instance_uuids[0]).allocations
    assert all(fleet.usage(name) == {"DISK_GB": 10, "MEMORY_MB": 2048, "VCPU": 2} for name in fleet.hosts)


def test_an_instance_that_already_holds_allocations_fails_alone(fleet, gated, make_scheduler, placement):
    for i in range(4):
        fleet.host(f"h{i}")
    scheduler = make_scheduler(client=gated)
    gated.gate.set()
    [[earlier]] = scheduler.select_destinations(req())
    gated.queries, gated.gate = 0, threading.Event()
    again = req(instances=[earlier.consumer_uuid])
    fresh = req()
    _, outcomes = decide_together(scheduler, gated, [again, fresh])
    assert isinstance(outcomes[0], ConsumerConflict)
    assert isinstance(outcomes[1], list) and outcomes[1][0].claimed
    assert set(placement.get_allocations(earlier.consumer_uuid).allocations) == {earlier.compute_node_uuid}


def test_without_coalescing_every_request_asks_placement(fleet, gated, make_scheduler):
    for i in range(4):
        fleet.host(f"h{i}")
    gated.gate.set()
    scheduler = make_scheduler(SchedulerSettings(coalesce_requests=False), client=gated)
    assert scheduler._together is None
    with ThreadPoolExecutor(4) as pool:
        lines = list(pool.map(lambda _: scheduler.select_destinations(req()), range(4)))
    assert gated.queries == 4 and gated.posts == [] and gated.puts == 4
    assert all(line.claimed for [[line]] in lines)
