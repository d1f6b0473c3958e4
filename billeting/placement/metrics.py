"""Prometheus metrics of the Placement service.

Every metric lives in prometheus_client's default registry. Under a
pre-forking master each worker writes its values to memory-mapped files
(see ``billeting.serving.metrics``, which the master calls before forking),
and whichever worker answers ``GET /metrics`` adds them all up.

Label values come from a closed set (route templates, methods, status codes,
fixed reasons), never from a raw path or a client string, so the number of
series stays bounded.
"""
from __future__ import annotations

import weakref

from prometheus_client import REGISTRY, Counter, Gauge, Histogram

from billeting.serving import metrics as shared

# --- the metrics -------------------------------------------------------------------
_P = "billeting_placement_"


def _build() -> None:
    """(Re)create every metric in the default registry. Runs at import, and again
    when a master switches the process to multi-process mode after this module
    was imported (metric values are bound to their storage when built)."""
    global REQUESTS, LATENCY, CANDIDATES, CLAIM_CONFLICTS, RETRIES, RETRIES_EXHAUSTED, _ROUTES
    global SUMMARY_CACHE, SUMMARY_CACHE_ENTRIES, POOL_CHECKED_OUT, POOL_OPEN, POOL_SIZE
    for old in _BUILT:
        REGISTRY.unregister(old)
    _BUILT.clear()
    REQUESTS = Counter(
        _P + "http_requests", "HTTP requests answered, by route template, method and status.",
        ["route", "method", "status"])
    LATENCY = Histogram(
        _P + "http_request_duration_seconds",
        "Time from receiving a request to handing its response to the server, by route template and method.",
        ["route", "method"],
        buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0))
    CANDIDATES = Histogram(
        _P + "allocation_candidates_returned",
        "Allocation requests returned per GET /allocation_candidates (the _sum is the total returned).",
        buckets=(0, 1, 5, 10, 50, 100, 500, 1000, 5000, 10000, 50000))
    CLAIM_CONFLICTS = Counter(
        _P + "allocation_write_conflicts",
        "Allocation writes (PUT/POST /allocations, POST /reshaper) refused with 409: 'generation' for a "
        "provider or consumer generation conflict (placement.concurrent_update), 'capacity' for any other "
        "refusal (capacity, min/max unit, step size, missing inventory).",
        ["route", "reason"])
    RETRIES = Counter(
        _P + "transaction_retries",
        "Transactions re-run inside the server: 'generation' when a compare-and-set lost a race it may "
        "absorb, 'database' on a deadlock, serialization failure or lock timeout.",
        ["kind", "reason"])
    RETRIES_EXHAUSTED = Counter(
        _P + "transaction_retries_exhausted",
        "Transactions that still failed after every retry (the client got a 409).", ["kind"])
    SUMMARY_CACHE = Counter(
        _P + "summary_cache_lookups",
        "Provider summaries of large allocation-candidate answers found in the per-process cache ('hit') "
        "or read afresh ('miss').", ["result"])
    SUMMARY_CACHE_ENTRIES = Gauge(
        _P + "summary_cache_entries", "Providers held in the provider-summary caches (all worker processes).",
        multiprocess_mode="livesum")
    POOL_CHECKED_OUT = Gauge(
        _P + "db_pool_connections_in_use", "Database connections checked out of the pools (all worker processes).",
        multiprocess_mode="livesum")
    POOL_OPEN = Gauge(
        _P + "db_pool_connections_open", "Database connections the pools hold open (all worker processes).",
        multiprocess_mode="livesum")
    POOL_SIZE = Gauge(
        _P + "db_pool_size", "Configured pool size (connections kept open when idle), summed over worker processes.",
        multiprocess_mode="livesum")
    _BUILT.extend([REQUESTS, LATENCY, CANDIDATES, CLAIM_CONFLICTS, RETRIES, RETRIES_EXHAUSTED,
                   SUMMARY_CACHE, SUMMARY_CACHE_ENTRIES, POOL_CHECKED_OUT, POOL_OPEN, POOL_SIZE])
    _ROUTES = shared.RouteCounts(REQUESTS, LATENCY)


_BUILT: list = []
_build()
shared.on_rebuild(_build)

CLAIM_ROUTES = frozenset({"/allocations", "/allocations/{consumer_uuid}", "/reshaper"})
CONCURRENT_UPDATE = "placement.concurrent_update"


# --- what the rest of the code calls --------------------------------------------------

def observe_request(route: str, method: str, status: int, seconds: float) -> None:
    _ROUTES.observe(route, method, status, seconds)


def observe_candidates(returned: int) -> None:
    CANDIDATES.observe(returned)


def observe_claim_conflict(route: str, code: str | None) -> None:
    if route in CLAIM_ROUTES:
        CLAIM_CONFLICTS.labels(route, "generation" if code == CONCURRENT_UPDATE else "capacity").inc()


def observe_retry(*, write: bool, generation: bool) -> None:
    RETRIES.labels("write" if write else "read", "generation" if generation else "database").inc()


def observe_retries_exhausted(*, write: bool) -> None:
    RETRIES_EXHAUSTED.labels("write" if write else "read").inc()


def observe_summary_cache(*, hits: int, misses: int, entries: int) -> None:
    if hits:
        SUMMARY_CACHE.labels("hit").inc(hits)
    if misses:
        SUMMARY_CACHE.labels("miss").inc(misses)
    SUMMARY_CACHE_ENTRIES.set(entries)


_INSTRUMENTED: "weakref.WeakSet" = weakref.WeakSet()


def instrument_engine(engine) -> None:
    """Count the engine's pool use through SQLAlchemy pool events (once per engine)."""
    from sqlalchemy import event

    if engine in _INSTRUMENTED:
        return
    _INSTRUMENTED.add(engine)
    pool = engine.pool
    # Connections the pool made before it was instrumented (migrations, name sync).
    for gauge, method in ((POOL_SIZE, "size"), (POOL_OPEN, "checkedin"), (POOL_OPEN, "checkedout"),
                          (POOL_CHECKED_OUT, "checkedout")):
        count = getattr(pool, method, None)
        if callable(count):
            gauge.inc(count())
    event.listen(pool, "checkout", lambda *_: POOL_CHECKED_OUT.inc())
    event.listen(pool, "checkin", lambda *_: POOL_CHECKED_OUT.dec())
    event.listen(pool, "connect", lambda *_: POOL_OPEN.inc())
    event.listen(pool, "close", lambda *_: POOL_OPEN.dec())
    event.listen(pool, "close_detached", lambda *_: POOL_OPEN.dec())


def rebuild() -> None:
    """Re-create the metrics with the value storage prometheus_client has now
    (``prepare_multiprocess`` does this). Pool gauges of engines instrumented
    before start again from zero."""
    _build()


exposition = shared.exposition
