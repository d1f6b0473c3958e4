"""Assemble the WSGI application: routes, middleware and the outer layers.

Processing order (docs/design/placement-http.md#processing-order), outermost
first: request metrics → request id → operator endpoints that need no token (/openapi.json, /healthcheck, open
/metrics) → CORS → auth → /metrics under policy → context (401) → catch-all
500 → microversion (400/406) → body-length sanity → routing (404/405) → handler.
"""
from __future__ import annotations

import logging
import traceback
from dataclasses import dataclass

import falcon
from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError

from billeting.config import Settings
from billeting.placement import errors as domain
from billeting.placement import openapi
from billeting.common.http import auth
from billeting.placement.api import microversion, negotiation
from billeting.common.http.context import context_from_environ
from billeting.common.keystone_auth import keystone_protected
from billeting.common.http.errors import HTTPProblem, check_body_headers, error_document, method_not_allowed
from billeting.placement.api.operator_endpoints import OPERATOR_PATHS, ProtectedMetrics, PublicEndpoints
from billeting.placement.api.policy import Authorizer
from billeting.placement.api.request_metrics import ERROR_CODE_KEY, RouteLabels, instrument
from billeting.placement.api.routes import load_routes
from billeting.common.db.outage import unavailable_reason
from billeting.placement.store.tx import RetriesExhausted

LOG = logging.getLogger(__name__)


@dataclass
class Deps:
    """What handlers need, built once per process."""

    settings: Settings
    engine: Engine
    authorizer: Authorizer


class PlacementMiddleware:
    """Context, microversion and request sanity, before routing."""

    def __init__(self, deps: Deps) -> None:
        self.deps = deps

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        env = req.env
        req.context.deps = self.deps
        req.context.mv = None
        req.context.auth = context_from_environ(env, env.get(auth.REQUEST_ID_KEY) or auth.new_request_id())
        if req.context.auth.user_id is None and not auth.is_root(env):
            raise HTTPProblem(401, "The request you have made requires authentication.")
        try:
            req.context.mv = microversion.parse_header(req.get_header(microversion.HEADER))
        except microversion.BadVersion as exc:
            raise HTTPProblem(400, str(exc)) from None
        except microversion.UnacceptableVersion as exc:
            raise _VersionNotAcceptable(str(exc)) from None
        check_body_headers(env)

    def process_resource(self, req, resp, resource, params) -> None:
        # Falcon matches "/resource_providers/" to "{uuid}" with an empty
        # value; Placement routes are exact, so that is an unknown path.
        if resource is None or any(value == "" for value in params.values()):
            raise HTTPProblem(404, "The resource could not be found.")
        if req.method not in resource.METHODS:
            raise method_not_allowed(req.method, resource.METHODS)

    def process_response(self, req, resp, resource, req_succeeded) -> None:
        version = getattr(req.context, "mv", None)
        if version is not None:
            resp.set_header("OpenStack-API-Version", f"placement {microversion.to_str(version)}")
            resp.set_header("Vary", "openstack-api-version")


class _VersionNotAcceptable(HTTPProblem):
    def __init__(self, detail: str) -> None:
        super().__init__(406, detail)


def _render(req: falcon.Request, resp: falcon.Response, status: int, detail: str,
            code: str | None, headers: dict[str, str] | None = None, extra: dict | None = None) -> None:
    version = getattr(req.context, "mv", None)
    send_code = code if version is not None and version >= (1, 23) else None
    auth_ctx = getattr(req.context, "auth", None)
    request_id = auth_ctx.request_id if auth_ctx else req.env.get(auth.REQUEST_ID_KEY)
    req.env[ERROR_CODE_KEY] = code  # for the metrics: why a write was refused
    resp.status = status
    kind = negotiation.error_body_type(req.env) if req.method != "HEAD" else None
    if kind is None:
        resp.content_type = negotiation.HEAD_CONTENT_TYPE
        resp.data = b""
    elif kind == negotiation.JSON:
        resp.content_type = "application/json"
        resp.data = error_document(status, negotiation.json_detail(detail), request_id,
                                   code=send_code, extra=extra)
    else:
        page = negotiation.render(req.env, kind, status, detail, allow="Allow" in (headers or {}))
        resp.content_type = page.content_type
        resp.data = page.body
    for name, value in (headers or {}).items():
        resp.set_header(name, value)


def status_for(exc: domain.PlacementError) -> int:
    """The HTTP status a domain error answers with (the in-process client maps it the same way)."""
    if isinstance(exc, domain.NotFound):
        return 404
    if isinstance(exc, domain.Conflict):
        return 409
    return 400


def _handle_placement_error(req, resp, exc: domain.PlacementError, params) -> None:
    _render(req, resp, status_for(exc), exc.detail, exc.code)


def _handle_http_problem(req, resp, exc: HTTPProblem, params) -> None:
    if isinstance(exc, _VersionNotAcceptable):
        extra = {"max_version": microversion.to_str(microversion.MAX_VERSION),
                 "min_version": microversion.to_str(microversion.MIN_VERSION)}
        _render(req, resp, exc.status, exc.detail, None, extra=extra)
        return
    _render(req, resp, exc.status, exc.detail, exc.code or domain.UNDEFINED, exc.headers)


def _handle_retries_exhausted(req, resp, exc: RetriesExhausted, params) -> None:
    _render(req, resp, 409,
            f"Inventory and/or allocations changed while attempting to allocate: {exc.reason}",
            domain.CONCURRENT_UPDATE)


def _handle_falcon_error(req, resp, exc: falcon.HTTPError, params) -> None:
    if isinstance(exc, falcon.HTTPNotFound) or exc.status_code == 404:
        detail = "The resource could not be found."
    elif exc.status_code == 405:
        detail = f"The method {req.method} is not allowed for this resource."
    else:
        detail = exc.description or exc.title or "Error"
    _render(req, resp, exc.status_code, detail, domain.UNDEFINED, dict(exc.headers or {}))


def _handle_database_error(req, resp, exc: DBAPIError, params) -> None:
    reason = unavailable_reason(exc)
    if reason is None:
        _handle_unexpected(req, resp, exc, params)
        return
    # The driver's own words name hosts and ports: for the log, not the client.
    LOG.warning("database unavailable during %s %s: %s", req.method, req.path,
                str(exc.orig).strip().splitlines()[0] if str(exc.orig).strip() else type(exc.orig).__name__)
    _render(req, resp, 503, f"The database is unavailable: {reason}; retry later.", domain.UNDEFINED)


def _handle_unexpected(req, resp, exc: Exception, params) -> None:
    LOG.error("unexpected error handling %s %s\n%s", req.method, req.path, traceback.format_exc())
    _render(req, resp, 500, "An unexpected error prevented the server from fulfilling your request.",
            domain.UNDEFINED)


def make_falcon_app(deps: Deps) -> falcon.App:
    app = falcon.App(middleware=[PlacementMiddleware(deps)], cors_enable=False)
    app.req_options.keep_blank_qs_values = True
    app.req_options.auto_parse_form_urlencoded = False
    app.req_options.strip_url_path_trailing_slash = False
    # Only bodies get a Content-Type (docs/design/placement-http.md#content-negotiation):
    # handlers set it explicitly.
    app.resp_options.default_media_type = None
    routes, _missing = load_routes()
    for path, resource_cls in routes:
        app.add_route(path, resource_cls(deps))
    # Registration order matters: Falcon picks the most specific handler.
    app.add_error_handler(Exception, _handle_unexpected)
    app.add_error_handler(falcon.HTTPError, _handle_falcon_error)
    app.add_error_handler(domain.PlacementError, _handle_placement_error)
    app.add_error_handler(HTTPProblem, _handle_http_problem)
    app.add_error_handler(RetriesExhausted, _handle_retries_exhausted)
    app.add_error_handler(DBAPIError, _handle_database_error)
    return app


class _RootPathFix:
    """Serve the version document for the bare mount point (empty PATH_INFO),
    and take a path some WSGI servers (httpx's in-process transport, for one)
    hand over already decoded: PEP 3333 wants the raw bytes as latin-1, and
    Falcon fails on anything else (a 500 for ``/resource_providers/☃``)."""

    def __init__(self, app) -> None:
        self.app = app

    def __call__(self, environ, start_response):
        path = environ.get("PATH_INFO")
        if not path:
            environ["PATH_INFO"] = "/"
        elif not path.isascii():
            try:
                path.encode("latin-1")
            except UnicodeEncodeError:
                environ["PATH_INFO"] = path.encode("utf-8").decode("latin-1")
        return self.app(environ, start_response)


def make_app(settings: Settings, engine: Engine):
    """The full WSGI stack for ``settings``."""
    deps = Deps(settings=settings, engine=engine,
                authorizer=Authorizer(policy_file=settings.policy_file, legacy=settings.legacy_policy,
                                      enforce_scope=settings.enforce_scope))
    wsgi = make_falcon_app(deps)
    if settings.metrics_access == "policy":
        wsgi = ProtectedMetrics(wsgi, deps)
    if settings.auth == "keystone":
        wsgi = keystone_protected(wsgi, settings.config_file, auth.ROOT_PATHS)
    else:
        wsgi = auth.NoAuth2Middleware(wsgi, negotiation.unauthorized)
    wsgi = _RootPathFix(wsgi)
    if settings.cors_origins:
        from billeting.placement.api.cors import cors_middleware

        wsgi = cors_middleware(wsgi, settings.cors_origins, settings.cors_allow_headers)
    wsgi = PublicEndpoints(wsgi, deps, openapi.document_bytes())
    templates = [path for path, _ in load_routes()[0]] + list(OPERATOR_PATHS)
    return instrument(auth.RequestIdMiddleware(wsgi), RouteLabels(templates))
