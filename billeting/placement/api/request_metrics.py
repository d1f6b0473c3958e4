"""The outermost WSGI layer: every request counted and timed by route template.

Routes are labelled by their template (``/resource_providers/{uuid}``), never
by the raw path, so uuids and names do not become label values; a path that
matches no route is ``unmatched`` and an unusual method is ``other``.
"""
from __future__ import annotations

from billeting.placement import metrics
from billeting.serving import metrics as shared
from billeting.serving.metrics import UNMATCHED, RouteLabels

__all__ = ["ERROR_CODE_KEY", "UNMATCHED", "RouteLabels", "instrument"]

# Set by the error renderer (app.py) so that 409s on allocation writes can be
# told apart: generation conflicts versus capacity refusals.
ERROR_CODE_KEY = "billeting.error_code"


def _observe(environ, route: str, method: str, status: int, seconds: float) -> None:
    metrics.observe_request(route, method, status, seconds)
    if status == 409:
        metrics.observe_claim_conflict(route, environ.get(ERROR_CODE_KEY))


def instrument(app, routes: RouteLabels):
    """``app`` with every request counted and timed."""
    return shared.RequestMetrics(app, routes, _observe)
