"""WSGI layers outside an API's application: request ids and noauth2.

Both auth modes (noauth2 here, keystonemiddleware through
billeting.common.keystone_auth) end in the same place: identity headers
(``X-User-Id``, ``X-Project-Id``, ``X-Roles`` ...) that
``context_from_environ`` reads.
"""
from __future__ import annotations

import uuid

from billeting.common.http.errors import error_document

REQUEST_ID_KEY = "billeting.request_id"
ROOT_PATHS = frozenset({"", "/"})


def new_request_id() -> str:
    return f"req-{uuid.uuid4()}"


class RequestIdMiddleware:
    """Outermost layer: every response gets ``x-openstack-request-id``.

    Also rewrites a missing or ``*/*`` Accept to ``application/json`` so
    errors from inner layers come back as JSON (docs/design/placement-http.md#processing-order item 1).
    """

    def __init__(self, app) -> None:
        self.app = app

    def __call__(self, environ, start_response):
        request_id = new_request_id()
        environ[REQUEST_ID_KEY] = request_id
        accept = environ.get("HTTP_ACCEPT")
        if not accept or accept.strip() == "*/*":
            environ["HTTP_ACCEPT"] = "application/json"

        def _start(status, headers, exc_info=None):
            headers = [h for h in headers if h[0].lower() != "x-openstack-request-id"]
            headers.append(("x-openstack-request-id", request_id))
            return start_response(status, headers, exc_info)

        return self.app(environ, _start)


def is_root(environ) -> bool:
    return environ.get("PATH_INFO", "") in ROOT_PATHS


def unauthorized(environ: dict, start_response):
    """The 401 for a request without a token, in the error document."""
    body = error_document(401, "The request you have made requires authentication.",
                          environ.get(REQUEST_ID_KEY), code=None)
    start_response("401 Unauthorized", [("Content-Type", "application/json"),
                                        ("Content-Length", str(len(body)))])
    return [body]


class NoAuth2Middleware:
    """Testing-only authentication: the token names the user (docs/design/placement-http.md#authentication).

    ``X-Auth-Token: user[:project]``; ``admin`` gets the admin role unless the
    request names its own ``X-Roles``. No token is a 401, answered by
    ``unauthorized`` (a WSGI app: Placement's keeps upstream's body).
    """

    def __init__(self, app, unauthorized=unauthorized) -> None:
        self.app = app
        self.unauthorized = unauthorized

    def __call__(self, environ, start_response):
        token = environ.get("HTTP_X_AUTH_TOKEN")
        if not token:
            if is_root(environ):
                return self.app(environ, start_response)
            return self.unauthorized(environ, start_response)
        user_id, _, project_id = token.partition(":")
        project_id = project_id or user_id
        environ["HTTP_X_USER_ID"] = user_id
        if "HTTP_X_ROLES" not in environ:
            environ["HTTP_X_ROLES"] = "admin" if user_id == "admin" else ""
        if environ.get("HTTP_OPENSTACK_SYSTEM_SCOPE"):
            environ.pop("HTTP_X_PROJECT_ID", None)
        elif not environ.get("HTTP_X_PROJECT_ID"):
            environ["HTTP_X_PROJECT_ID"] = project_id
        return self.app(environ, start_response)
