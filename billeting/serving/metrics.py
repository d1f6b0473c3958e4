"""Prometheus plumbing every service shares: multi-process value files,
the exposition, and per-route request counting.

A pre-forking master calls, one function each:

    handle = prepare_multiprocess()   # in the master, before forking workers
    on_worker_exit(pid)               # whenever a worker process has ended
    handle.cleanup()                  # when the master exits

prometheus_client decides where a metric's values live (private memory, or
memory-mapped files in ``PROMETHEUS_MULTIPROC_DIR`` that any worker's
``GET /metrics`` adds up) when the metric is built. So each service's
metrics module builds its metrics in a function it hands to
``on_rebuild``; ``prepare_multiprocess`` sets the directory and runs those
functions again, so that the forked workers inherit file-backed metrics
even when the master built them first (it builds the app once to check
its configuration).
"""
from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass

ENV = "PROMETHEUS_MULTIPROC_DIR"
PATH = "/metrics"

_REBUILDS: list[Callable[[], None]] = []


def on_rebuild(build: Callable[[], None]) -> Callable[[], None]:
    """Register ``build`` (which (re)creates a module's metrics) to be run again
    when the process switches to multi-process mode; returns it."""
    if build not in _REBUILDS:
        _REBUILDS.append(build)
    return build


@dataclass(frozen=True, slots=True)
class MultiprocessDir:
    """The directory a master created for its workers' metric files."""

    path: str
    owner_pid: int

    def cleanup(self) -> None:
        """Remove the directory. A no-op in any other process than its creator:
        a forked worker unwinding through the master's stack must not remove it."""
        if os.getpid() != self.owner_pid:
            return
        shutil.rmtree(self.path, ignore_errors=True)
        if os.environ.get(ENV) == self.path:
            del os.environ[ENV]


def prepare_multiprocess(parent: str | None = None) -> MultiprocessDir:
    """Create a fresh, empty directory for the workers' metric files and point
    prometheus_client at it (through the environment the workers inherit)."""
    path = tempfile.mkdtemp(prefix="billeting-metrics-", dir=parent)
    os.environ[ENV] = path
    values = sys.modules.get("prometheus_client.values")
    if values is not None:
        values.ValueClass = values.get_value_class()
    for build in _REBUILDS:
        build()
    return MultiprocessDir(path=path, owner_pid=os.getpid())


def on_worker_exit(pid: int) -> None:
    """A worker has ended: drop its live gauges from the sums. Its counters
    and histograms stay counted."""
    if os.environ.get(ENV):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(pid)


def master_hooks(log) -> dict:
    """For a master about to fork: a fresh metrics directory (logged, as
    "metrics: workers write to ...") and the ``ServeOptions`` hooks that
    drop a dead worker's live gauges and remove the directory at exit."""
    handle = prepare_multiprocess()
    log.info("metrics: workers write to %s", handle.path)
    return {"on_worker_exit": on_worker_exit, "on_exit": handle.cleanup}


def exposition() -> tuple[bytes, str]:
    """The text exposition of every metric (summed over workers in multi-process mode)."""
    from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

    if os.environ.get(ENV):
        from prometheus_client import multiprocess

        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        return generate_latest(registry), CONTENT_TYPE_LATEST
    return generate_latest(), CONTENT_TYPE_LATEST


def reply(environ, start_response):
    """``GET``/``HEAD /metrics`` as a WSGI answer."""
    body, content_type = exposition()
    start_response("200 OK", [("Content-Type", content_type), ("Content-Length", str(len(body)))])
    return [b"" if environ.get("REQUEST_METHOD") == "HEAD" else body]


# --- per-route request counting --------------------------------------------------------

UNMATCHED = "unmatched"
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"})
_PARAMETER = re.compile(r"\\\{[a-z_]+\\\}")  # a "{name}" once re.escape'd


class RouteLabels:
    """Maps a request path to the template of the route it would reach, so
    uuids and names never become label values."""

    def __init__(self, templates: list[str]) -> None:
        self._exact = {t: t for t in templates if "{" not in t}
        # One regular expression for every template with parameters: the name
        # of the group that matched says which (a parameter is one non-empty segment).
        patterned = [t for t in templates if "{" in t]
        self._templates = {f"t{i}": t for i, t in enumerate(patterned)}
        self._pattern = re.compile("|".join(
            f"(?P<t{i}>{_PARAMETER.sub('[^/]+', re.escape(t))})" for i, t in enumerate(patterned)))

    def label(self, path: str) -> str:
        found = self._exact.get(path or "/")
        if found is not None:
            return found
        matched = self._pattern.fullmatch(path) if self._templates else None
        return self._templates[matched.lastgroup] if matched else UNMATCHED


# (environ, route template, method, status, seconds)
Observer = Callable[[dict, str, str, int, float], None]


class RouteCounts:
    """A service's request counter (route, method, status) and latency
    histogram (route, method), with their labelled children kept:
    ``labels()`` costs more than the increment itself, and the combinations
    are few. Made again with the metrics when they are rebuilt."""

    def __init__(self, requests, latency) -> None:
        self.requests, self.latency = requests, latency
        self._children: dict[tuple[str, str, int], tuple] = {}

    def observe(self, route: str, method: str, status: int, seconds: float) -> None:
        key = (route, method, status)
        children = self._children.get(key)
        if children is None:
            children = self._children[key] = (self.requests.labels(route, method, str(status)),
                                              self.latency.labels(route, method))
        children[0].inc()
        children[1].observe(seconds)


class RequestMetrics:
    """The outermost WSGI layer: hands every request's route template,
    method (``other`` when unusual), status and duration to ``observe``."""

    def __init__(self, app, routes: RouteLabels, observe: Observer) -> None:
        self.app = app
        self.routes = routes
        self.observe = observe

    def __call__(self, environ, start_response):
        started = time.perf_counter()
        statuses: list[str] = []

        def _start(status, headers, exc_info=None):
            statuses.append(status)
            return start_response(status, headers, exc_info)

        try:
            return self.app(environ, _start)
        finally:
            route = self.routes.label(environ.get("PATH_INFO", ""))
            method = environ.get("REQUEST_METHOD", "GET")
            status = int(statuses[-1][:3]) if statuses else 500
            self.observe(environ, route, method if method in METHODS else "other", status,
                         time.perf_counter() - started)
