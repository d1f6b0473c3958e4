"""WSGI layers outside the application: request ids and authentication.

Both auth modes end in the same place: identity headers (``X-User-Id``,
``X-Project-Id``, ``X-Roles`` ...) that ``context_from_environ`` reads.
"""
from __future__ import annotations

import uuid

from billeting.placement.api import negotiation

REQUEST_ID_KEY = "billeting.request_id"
ROOT_PATHS = ("", "/")


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


class NoAuth2Middleware:
    """Testing-only authentication: the token names the user (docs/design/placement-http.md#authentication).

    ``X-Auth-Token: user[:project]``; ``admin`` gets the admin role unless the
    request names its own ``X-Roles``. No token is a 401.
    """

    def __init__(self, app) -> None:
        self.app = app

    def __call__(self, environ, start_response):
        token = environ.get("HTTP_X_AUTH_TOKEN")
        if not token:
            if is_root(environ):
                return self.app(environ, start_response)
            return negotiation.unauthorized(environ, start_response)
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


def keystone_middleware(app, config_file: str | None):
    """Wrap ``app`` in keystonemiddleware's ``auth_token``, skipping the root document.

    The middleware reads its ``[keystone_authtoken]`` section from
    ``config_file`` through a private oslo.config object (never the global
    ``cfg.CONF``, and never files found by oslo.config's default search).
    keystonemiddleware accepts such an object under the ``oslo_config_config``
    key and registers its own options on it.
    """
    from keystonemiddleware import auth_token
    from oslo_config import cfg

    class _RootExempt(auth_token.AuthProtocol):
        def __call__(self, environ, start_response):
            if is_root(environ):
                return self._app(environ, start_response)
            return super().__call__(environ, start_response)

    conf = cfg.ConfigOpts()
    conf([], project="billeting", default_config_files=[config_file] if config_file else [])
    return _RootExempt(app, {"oslo_config_config": conf})
