"""Endpoints for operators, beside the Placement API: ``GET /openapi.json``,
``GET /healthcheck`` and ``GET /metrics``.

They are not Placement resources: no microversion, no Placement policy rule.
Who may call them:

* ``/openapi.json`` and ``/healthcheck`` need no token, like ``GET /``: the
  document describes the public API and holds no data; a load balancer
  probing health has no Keystone token.
* ``/metrics`` is open by default (Prometheus scrapers carry no token, and
  the metrics hold counts and timings by route template, never tenant data);
  with ``metrics_access = policy`` it needs a token that the
  ``billeting:metrics`` policy rule admits (admin or service by default).

Errors use the Placement error format.
"""
from __future__ import annotations

import logging

import orjson
from sqlalchemy import text

from billeting.placement import metrics
from billeting.common.http import auth
from billeting.common.http.context import context_from_environ
from billeting.common.http.errors import error_document, title

LOG = logging.getLogger(__name__)

OPENAPI_PATH = "/openapi.json"
HEALTHCHECK_PATH = "/healthcheck"
METRICS_PATH = "/metrics"
OPERATOR_PATHS = (OPENAPI_PATH, HEALTHCHECK_PATH, METRICS_PATH)
METRICS_RULE = "billeting:metrics"
_READ_METHODS = ("GET", "HEAD")


def _reply(environ, start_response, status: int, body: bytes, content_type: str | None,
           extra: list[tuple[str, str]] | None = None):
    headers = list(extra or [])
    if content_type:
        headers.append(("Content-Type", content_type))
    headers.append(("Content-Length", str(len(body))))
    start_response(f"{status} {title(status)}", headers)
    return [b"" if environ.get("REQUEST_METHOD") == "HEAD" else body]


def _error(environ, start_response, status: int, detail: str, extra: list[tuple[str, str]] | None = None):
    body = error_document(status, detail, environ.get(auth.REQUEST_ID_KEY), code=None)
    return _reply(environ, start_response, status, body, "application/json", extra)


def _method_not_allowed(environ, start_response):
    return _error(environ, start_response, 405, "The method specified is not allowed for this resource.",
                  [("Allow", ", ".join(_READ_METHODS))])


class PublicEndpoints:
    """In front of authentication: the endpoints that need no token."""

    def __init__(self, app, deps, openapi_document: bytes) -> None:
        self.app = app
        self.engine = deps.engine
        self.metrics_open = deps.settings.metrics_access == "open"
        self.openapi_document = openapi_document
        metrics.instrument_engine(deps.engine)

    def __call__(self, environ, start_response):
        path = environ.get("PATH_INFO", "")
        if path == OPENAPI_PATH:
            handler = self._openapi
        elif path == HEALTHCHECK_PATH:
            handler = self._healthcheck
        elif path == METRICS_PATH and self.metrics_open:
            handler = _metrics
        else:
            return self.app(environ, start_response)
        if environ.get("REQUEST_METHOD") not in _READ_METHODS:
            return _method_not_allowed(environ, start_response)
        return handler(environ, start_response)

    def _openapi(self, environ, start_response):
        return _reply(environ, start_response, 200, self.openapi_document, "application/json")

    def _healthcheck(self, environ, start_response):
        try:
            with self.engine.connect() as conn:
                conn.execute(text("SELECT 1")).scalar_one()
        except Exception as exc:  # noqa: BLE001 - whatever stops SELECT 1 means "unhealthy"
            # The reason goes to the log only: it may name hosts and users.
            LOG.warning("healthcheck: the database did not answer SELECT 1: %s: %s",
                        type(exc).__name__, str(exc).splitlines()[0] if str(exc) else "")
            return _error(environ, start_response, 503, "The database did not answer.")
        return _reply(environ, start_response, 200, orjson.dumps({"status": "ok"}), "application/json")


def _metrics(environ, start_response):
    body, content_type = metrics.exposition()
    return _reply(environ, start_response, 200, body, content_type)


class ProtectedMetrics:
    """Behind authentication: ``GET /metrics`` for callers the policy admits
    (only installed when ``metrics_access = policy``)."""

    def __init__(self, app, deps) -> None:
        self.app = app
        self.authorizer = deps.authorizer

    def __call__(self, environ, start_response):
        if environ.get("PATH_INFO") != METRICS_PATH:
            return self.app(environ, start_response)
        if environ.get("REQUEST_METHOD") not in _READ_METHODS:
            return _method_not_allowed(environ, start_response)
        ctx = context_from_environ(environ, environ.get(auth.REQUEST_ID_KEY) or auth.new_request_id())
        if ctx.user_id is None:
            return _error(environ, start_response, 401, "The request you have made requires authentication.")
        if not self.authorizer.allowed(ctx, METRICS_RULE):
            return _error(environ, start_response, 403, f"Policy does not allow {METRICS_RULE} to be performed.")
        return _metrics(environ, start_response)
