"""Prometheus metrics of the scheduler (any front door: HTTP, RPC, Python).

Values live in prometheus_client's default registry; under ``billeting
scheduler serve`` every worker writes them to the master's multi-process
directory (``billeting.serving.metrics``) and ``GET /metrics`` adds them up.
Labels come from closed sets only: front doors, fall-back kinds, reasons.
"""
from __future__ import annotations

import contextvars
from contextlib import contextmanager

from prometheus_client import REGISTRY, Counter, Histogram

from billeting.serving import metrics as shared

_P = "billeting_scheduler_"
FRONT_DOORS = ("http", "rpc", "python")
# Why a request found no host (see ``no_valid_host_reason``).
NO_VALID_HOST_REASONS = ("unsatisfiable", "no_candidates", "filtered", "claims_lost")
# A claim of several instances refused as a whole, then retried claim by claim:
# one request's instances ("instances"), or a coalesced batch of requests ("coalesced").
FALLBACK_KINDS = ("instances", "coalesced")

_BUILT: list = []


def _build() -> None:
    global DECISIONS, PLACED, CLAIMS_LOST, FALLBACKS, BATCH_SIZE, NO_VALID_HOST, SAMPLE_GROWN, RPC_QUEUE_WAIT
    global ORPHANS_SWEPT
    for old in _BUILT:
        REGISTRY.unregister(old)
    _BUILT.clear()
    DECISIONS = Histogram(
        _P + "decision_duration_seconds",
        "Time to answer a select_destinations (placed or not), by front door (http, rpc, python).",
        ["front_door"], buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0))
    PLACED = Counter(_P + "instances_placed", "Instances given a claimed host.")
    CLAIMS_LOST = Counter(
        _P + "claims_lost", "Claims Placement refused (another scheduler took the capacity); the next "
        "ranked host was tried.")
    FALLBACKS = Counter(
        _P + "claim_fallbacks", "Claims of several instances refused as a whole and made again one by one: "
        "'instances' of one request, or a 'coalesced' batch of requests.", ["kind"])
    BATCH_SIZE = Histogram(
        _P + "coalesced_batch_size", "Requests decided together in one coalesced batch.",
        buckets=(1, 2, 4, 8, 16, 32))
    NO_VALID_HOST = Counter(
        _P + "no_valid_host", "Requests answered NoValidHost, by reason: 'unsatisfiable' (impossible whatever "
        "the fleet), 'no_candidates' (Placement offered none), 'filtered' (the filters removed every "
        "offered host), 'claims_lost' (every claim lost a race).", ["reason"])
    SAMPLE_GROWN = Counter(
        _P + "candidate_sample_grown", "Decisions made again on a larger candidate sample because the "
        "filters left too few hosts in a truncated one.")
    RPC_QUEUE_WAIT = Histogram(
        _P + "rpc_queue_wait_seconds", "Time from a select_destinations message being sent to a scheduler "
        "thread taking it (the sender's clock against ours).",
        buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0))
    ORPHANS_SWEPT = Counter(
        _P + "orphaned_claims_swept", "Instances whose claims a scheduler released because the request that "
        "made them was left unanswered by a scheduler process that stopped.")
    _BUILT.extend([DECISIONS, PLACED, CLAIMS_LOST, FALLBACKS, BATCH_SIZE, NO_VALID_HOST, SAMPLE_GROWN,
                   RPC_QUEUE_WAIT, ORPHANS_SWEPT])
    # Every labelled series from the start, so a scrape shows zeros, not gaps.
    for door in FRONT_DOORS:
        DECISIONS.labels(door)
    for kind in FALLBACK_KINDS:
        FALLBACKS.labels(kind)
    for reason in NO_VALID_HOST_REASONS:
        NO_VALID_HOST.labels(reason)


_build()
shared.on_rebuild(_build)

# The front door of the select_destinations running on this thread.
_door: contextvars.ContextVar[str] = contextvars.ContextVar("billeting_scheduler_front_door", default="python")


@contextmanager
def front_door(name: str):
    """Decisions made inside are counted under ``name`` (``http``, ``rpc``)."""
    token = _door.set(name)
    try:
        yield
    finally:
        _door.reset(token)


def observe_decision(seconds: float) -> None:
    DECISIONS.labels(_door.get()).observe(seconds)


def observe_placed(instances: int) -> None:
    PLACED.inc(instances)


def observe_claims_lost(lost: int) -> None:
    if lost:
        CLAIMS_LOST.inc(lost)


def observe_fallback(kind: str) -> None:
    FALLBACKS.labels(kind).inc()


def observe_batch(size: int) -> None:
    BATCH_SIZE.observe(size)


def observe_sample_grown() -> None:
    SAMPLE_GROWN.inc()


def observe_orphans_swept(instances: int) -> None:
    ORPHANS_SWEPT.inc(instances)


def observe_rpc_queue_wait(seconds: float) -> None:
    RPC_QUEUE_WAIT.observe(max(0.0, seconds))  # clocks of two hosts may disagree a little


def no_valid_host_reason(explanation) -> str:
    """One of ``NO_VALID_HOST_REASONS`` for an ``Explanation``."""
    if not explanation.query:
        return "unsatisfiable"
    if explanation.claims_lost:
        return "claims_lost"
    if not explanation.hosts_offered:
        return "no_candidates"
    return "filtered"


def observe_no_valid_host(explanation) -> None:
    NO_VALID_HOST.labels(no_valid_host_reason(explanation)).inc()
