"""Prometheus counters of the cell conductor, labelled by cell.

They live in prometheus_client's default registry of the process the
conductor runs in: ``billeting up`` (the all-in-one) serves them on the
compute API's ``GET /metrics``; a standalone ``billeting conductor`` serves
them with ``--metrics-port``.
"""
from __future__ import annotations

from prometheus_client import REGISTRY, Counter

from billeting.serving import metrics as shared

_P = "billeting_conductor_"
_BUILT: list = []


def _build() -> None:
    global RESCHEDULES, BUILD_FAILURES
    for old in _BUILT:
        REGISTRY.unregister(old)
    _BUILT.clear()
    RESCHEDULES = Counter(
        _P + "reschedules", "Failed builds handed on, by cell and result: 'cast' (built on an alternate), "
        "'error' (no alternate left: the instance is in ERROR), 'stale' (it had moved on), 'raced' (another "
        "handler of the same reschedule won).", ["cell", "result"])
    BUILD_FAILURES = Counter(
        _P + "build_failures", "Build attempts the conductor found lost (their compute down or silent), by cell.",
        ["cell"])
    _BUILT.extend([RESCHEDULES, BUILD_FAILURES])


_build()
shared.on_rebuild(_build)


def observe_reschedule(cell: str, result: str) -> None:
    RESCHEDULES.labels(cell, result).inc()


def observe_build_failure(cell: str) -> None:
    BUILD_FAILURES.labels(cell).inc()
