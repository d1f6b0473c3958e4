"""Assemble the scheduler API's WSGI stack, with the outer layers every API shares
(billeting.common.http).

Outermost first: request id (``x-openstack-request-id``) → auth (noauth2 or
keystone, ``GET /`` open) → context (401) → body sanity → routing (404/405)
→ handler. Errors use the shared error document, always with a ``code``:

    {"errors": [{"status": 409, "title": "Conflict", "detail": "...",
                 "code": "billeting.no_valid_host", "request_id": "req-...",
                 "explanation": {...}}]}
"""
from __future__ import annotations

import logging
import traceback

import falcon
from sqlalchemy.exc import DBAPIError

from billeting.common.http import auth
from billeting.common.http.context import context_from_environ
from billeting.common.http.errors import HTTPProblem, check_body_headers, error_document
from billeting.common.http.inputs import names_nothing, plausible_id
from billeting.common.keystone_auth import keystone_protected
from billeting.scheduler import errors
from billeting.scheduler.api import aggregates, hosts, openapi, root, selections, server_groups, topology, zones
from billeting.scheduler.api.base import Deps
from billeting.scheduler.api.policy import authorizer
from billeting.serving import metrics as serving_metrics

LOG = logging.getLogger(__name__)

ROUTES = [
    ("/", root.Root),
    ("/selections", selections.Selections),
    ("/server_groups", server_groups.ServerGroups),
    ("/server_groups/{uuid}", server_groups.ServerGroup),
    ("/topology", topology.Topology),
    ("/topology/{level}", topology.Level),
    ("/topology/{level}/{name}", topology.Domain),
    ("/availability_zones", zones.Zones),
    ("/availability_zones/{name}", zones.Zone),
    ("/aggregates", aggregates.Aggregates),
    ("/aggregates/{uuid}", aggregates.Aggregate),
    ("/hosts", hosts.Hosts),
    ("/hosts/{name}", hosts.Host),
]

class ApiMiddleware:
    def __init__(self, deps: Deps) -> None:
        self.deps = deps

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        env = req.env
        req.context.deps = self.deps
        req.context.auth = context_from_environ(env, env.get(auth.REQUEST_ID_KEY) or auth.new_request_id())
        identity = req.context.auth
        if not auth.is_root(env) and (identity.user_id is None or not all(
                plausible_id(v) for v in (identity.user_id, identity.project_id) if v is not None)):
            raise HTTPProblem(401, "The request you have made requires authentication.")
        # A NUL or edge whitespace in a segment: the same 404 on every backend (see names_nothing).
        if names_nothing(req.path):
            raise HTTPProblem(404, "The resource could not be found.")
        if "\x00" in req.query_string or "%00" in req.query_string:
            raise HTTPProblem(400, "Invalid query string parameters: NUL characters are not allowed.")
        check_body_headers(env)

    def process_resource(self, req, resp, resource, params) -> None:
        if resource is None or any(value == "" for value in params.values()):
            raise HTTPProblem(404, "The resource could not be found.")
        if req.method not in resource.METHODS:
            raise HTTPProblem(405, f"The method {req.method} is not allowed for this resource.",
                              headers={"Allow": ", ".join(resource.METHODS)})


def _render(req, resp, status: int, detail: str, code: str, *, headers: dict | None = None,
            extra: dict | None = None) -> None:
    auth_ctx = getattr(req.context, "auth", None)
    request_id = auth_ctx.request_id if auth_ctx else req.env.get(auth.REQUEST_ID_KEY)
    resp.status = status
    resp.content_type = "application/json"
    resp.data = error_document(status, detail, request_id, code=code, extra=extra)
    for name, value in (headers or {}).items():
        resp.set_header(name, value)


def _problem(req, exc: Exception) -> tuple[int, str, str, dict | None, dict | None]:
    """(status, detail, code, headers, extra) of the error document for ``exc``."""
    if isinstance(exc, HTTPProblem):
        return exc.status, exc.detail, exc.code or errors.UNDEFINED, exc.headers, None
    if isinstance(exc, falcon.HTTPError):
        if exc.status_code == 404:
            detail = "The resource could not be found."
        elif exc.status_code == 405:
            detail = f"The method {req.method} is not allowed for this resource."
        else:
            detail = exc.description or exc.title or "Error"
        return exc.status_code, detail, errors.UNDEFINED, dict(exc.headers or {}), None
    failure = errors.translate(exc)
    if failure is None:
        LOG.error("unexpected error handling %s %s\n%s", req.method, req.path, traceback.format_exc())
        return (500, "An unexpected error prevented the server from fulfilling your request.", errors.UNDEFINED,
                None, None)
    if isinstance(exc, DBAPIError):
        LOG.error("API database error handling %s %s: %s", req.method, req.path, exc)
    return failure.status, failure.detail, failure.code, None, failure.extra()


def _error(req, resp, exc: Exception, params) -> None:
    """The one error handler: the scheduler's errors carry their status and
    code (``errors.translate`` names those of Placement and the API database),
    the HTTP layer's problems theirs; anything else is a 500."""
    status, detail, code, headers, extra = _problem(req, exc)
    _render(req, resp, status, detail, code, headers=headers, extra=extra)


def make_falcon_app(deps: Deps) -> falcon.App:
    app = falcon.App(middleware=[ApiMiddleware(deps)], cors_enable=False)
    app.req_options.keep_blank_qs_values = True
    app.req_options.auto_parse_form_urlencoded = False
    app.req_options.strip_url_path_trailing_slash = False
    app.resp_options.default_media_type = None
    for path, resource_cls in ROUTES:
        app.add_route(path, resource_cls(deps))
    # Falcon's own handler for its HTTPError is more specific than one for
    # Exception, so both are named.
    app.add_error_handler((Exception, falcon.HTTPError), _error)
    return app


def _error_reply(environ, start_response, status: str, detail: str, headers: list[tuple[str, str]]):
    """An error document sent by a WSGI layer outside Falcon (``status`` is the status line)."""
    document = error_document(int(status[:3]), detail, environ.get(auth.REQUEST_ID_KEY), code=errors.UNDEFINED)
    start_response(status, headers + [("Content-Type", "application/json"), ("Content-Length", str(len(document)))])
    return [document]


class _OwnUnauthorized:
    """Re-render the auth layer's 401 in this API's error document.

    noauth2 and keystonemiddleware answer a missing or bad token with their
    own bodies (upstream Placement's, which ``billeting serve`` keeps for
    compatibility); a client of this API parses one format only. Headers
    such as ``WWW-Authenticate`` are kept."""

    DETAIL = "The request you have made requires authentication."

    def __init__(self, app) -> None:
        self.app = app

    def __call__(self, environ, start_response):
        caught: list = []

        def _start(status, headers, exc_info=None):
            if status.startswith("401"):
                caught.append((status, headers))
                return lambda data: None  # the body is replaced below
            return start_response(status, headers, exc_info)

        body = self.app(environ, _start)
        if not caught:
            return body
        if hasattr(body, "close"):
            body.close()
        status, headers = caught[0]
        kept = [(k, v) for k, v in headers if k.lower() not in ("content-type", "content-length")]
        return _error_reply(environ, start_response, status, self.DETAIL, kept)


class _OpenAPIDocument:
    """``GET /openapi.json``: the API's description, with no token (like ``GET /``)."""

    PATH = "/openapi.json"

    def __init__(self, app) -> None:
        self.app = app

    def __call__(self, environ, start_response):
        if environ.get("PATH_INFO") != self.PATH:
            return self.app(environ, start_response)
        method = environ.get("REQUEST_METHOD", "GET")
        if method not in ("GET", "HEAD"):
            return _error_reply(environ, start_response, "405 Method Not Allowed",
                                f"The method {method} is not allowed for this resource.", [("Allow", "GET")])
        document = openapi.document_bytes()
        start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(document)))])
        return [] if method == "HEAD" else [document]


class _Metrics:
    """``GET /metrics``: Prometheus text, with no token (like Placement's default:
    scrapers carry none, and the metrics are counts and timings, no tenant data)."""

    def __init__(self, app) -> None:
        self.app = app

    def __call__(self, environ, start_response):
        if environ.get("PATH_INFO") != serving_metrics.PATH:
            return self.app(environ, start_response)
        method = environ.get("REQUEST_METHOD", "GET")
        if method not in ("GET", "HEAD"):
            return _error_reply(environ, start_response, "405 Method Not Allowed",
                                f"The method {method} is not allowed for this resource.", [("Allow", "GET")])
        return serving_metrics.reply(environ, start_response)


class _RootPathFix:
    def __init__(self, app) -> None:
        self.app = app

    def __call__(self, environ, start_response):
        if not environ.get("PATH_INFO"):
            environ["PATH_INFO"] = "/"
        return self.app(environ, start_response)


def make_app(service, *, auth_strategy: str = "noauth2", config_file: str | None = None,
             policy_file: str | None = None, legacy_policy: bool = False):
    """The full WSGI stack around ``service`` (a ``SchedulerService``)."""
    deps = Deps(service=service, authorizer=authorizer(policy_file=policy_file, legacy=legacy_policy))
    wsgi = make_falcon_app(deps)
    if auth_strategy == "keystone":
        wsgi = keystone_protected(wsgi, config_file, auth.ROOT_PATHS)
    else:
        wsgi = auth.NoAuth2Middleware(wsgi)
    return auth.RequestIdMiddleware(_RootPathFix(_Metrics(_OpenAPIDocument(_OwnUnauthorized(wsgi)))))
