"""The outermost WSGI layer: every request counted and timed by route template.

Routes are labelled by their template (``/resource_providers/{uuid}``), never
by the raw path, so uuids and names do not become label values; a path that
matches no route is ``unmatched`` and an unusual method is ``other``.
"""
from __future__ import annotations

import re
import time

from billeting.placement import metrics

# Set by the error renderer (app.py) so that 409s on allocation writes can be
# told apart: generation conflicts versus capacity refusals.
ERROR_CODE_KEY = "billeting.error_code"
UNMATCHED = "unmatched"
_PARAMETER = re.compile(r"\\\{[a-z_]+\\\}")  # a "{name}" once re.escape'd
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"})


class RouteLabels:
    """Maps a request path to the template of the route it would reach."""

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
        matched = self._pattern.fullmatch(path)
        return self._templates[matched.lastgroup] if matched else UNMATCHED


class RequestMetrics:
    def __init__(self, app, routes: RouteLabels) -> None:
        self.app = app
        self.routes = routes

    def __call__(self, environ, start_response):
        started = time.perf_counter()
        statuses: list[str] = []

        def _start(status, headers, exc_info=None):
            statuses.append(status)
            return start_response(status, headers, exc_info)

        try:
            return self.app(environ, _start)
        finally:
            self._observe(environ, statuses, time.perf_counter() - started)

    def _observe(self, environ, statuses: list[str], seconds: float) -> None:
        route = self.routes.label(environ.get("PATH_INFO", ""))
        method = environ.get("REQUEST_METHOD", "GET")
        status = int(statuses[-1][:3]) if statuses else 500
        metrics.observe_request(route, method if method in _METHODS else "other", status, seconds)
        if status == 409:
            metrics.observe_claim_conflict(route, environ.get(ERROR_CODE_KEY))
