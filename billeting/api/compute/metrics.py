"""Prometheus metrics of the compute API: requests by route template,
method and status. Under ``billeting compute-api serve`` every worker
writes to the master's multi-process directory (``billeting.serving.metrics``)
and ``GET /metrics`` (no token) adds them up."""
from __future__ import annotations

from prometheus_client import REGISTRY, Counter, Histogram

from billeting.serving import metrics as shared

_P = "billeting_compute_api_"
_BUILT: list = []


def _build() -> None:
    global REQUESTS, LATENCY, _ROUTES
    for old in _BUILT:
        REGISTRY.unregister(old)
    _BUILT.clear()
    REQUESTS = Counter(_P + "http_requests", "HTTP requests answered, by route template, method and status.",
                       ["route", "method", "status"])
    LATENCY = Histogram(_P + "http_request_duration_seconds",
                        "Time from receiving a request to handing its response to the server, by route "
                        "template and method.", ["route", "method"],
                        buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0))
    _BUILT.extend([REQUESTS, LATENCY])
    _ROUTES = shared.RouteCounts(REQUESTS, LATENCY)


_build()
shared.on_rebuild(_build)


def observe_request(environ, route: str, method: str, status: int, seconds: float) -> None:
    _ROUTES.observe(route, method, status, seconds)


class Endpoint:
    """``GET /metrics`` in front of the API, with no token (scrapers carry none;
    the metrics are counts and timings by route, no tenant data)."""

    def __init__(self, app, not_allowed) -> None:
        self.app = app
        self.not_allowed = not_allowed  # (environ, start_response): the API's own 405

    def __call__(self, environ, start_response):
        if environ.get("PATH_INFO") != shared.PATH:
            return self.app(environ, start_response)
        if environ.get("REQUEST_METHOD") not in ("GET", "HEAD"):
            return self.not_allowed(environ, start_response)
        return shared.reply(environ, start_response)
