"""CORS for browser clients (docs/design/placement-http.md#cors), off unless origins are configured.

oslo.middleware's CORS layer does the work; it sits outside authentication,
so a preflight ``OPTIONS`` (which never carries a token) is answered 200
with the ``Access-Control-*`` headers for a configured origin, and requests
from any other origin get no ``Access-Control-Allow-Origin``.

The configuration lives in a private oslo.config object: building two apps
with different origins in one process (tests) must not share state through
the global ``cfg.CONF``.
"""
from __future__ import annotations

import re

from oslo_config import cfg
from oslo_middleware import cors

# Request headers every Placement client sends besides the CORS simple ones.
DEFAULT_ALLOW_HEADERS = ("X-Auth-Token", "OpenStack-API-Version", "X-OpenStack-Request-ID")
# Response headers a browser script may read.
EXPOSE_HEADERS = ("OpenStack-API-Version", "X-OpenStack-Request-ID", "Location", "Vary")
ALLOW_METHODS = ("GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS")

_ORIGIN = re.compile(r"^https?://[^/\s]+$")
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")


def check_origin(origin: str) -> None:
    """An origin is ``scheme://host[:port]`` with no path, or ``*``."""
    if origin != "*" and not _ORIGIN.match(origin):
        raise ValueError(f"invalid CORS origin {origin!r}: expected scheme://host[:port] "
                         "without a trailing slash, or *")


def check_header_name(name: str) -> None:
    if not _HEADER_NAME.match(name):
        raise ValueError(f"invalid CORS header name {name!r}")


class _CORS(cors.CORS):
    def process_response(self, response, request=None):
        response = super().process_response(response, request=request)
        # oslo's own preflight answer has no Content-Type; PEP 3333 validators
        # (and some proxies) expect one on a 200. Only preflights: Placement's
        # own body-less 201/204 answers must stay without one
        # (docs/design/placement-http.md#content-negotiation).
        is_preflight = request is not None and request.method == "OPTIONS"
        if is_preflight and "Content-Type" not in response.headers:
            response.headers["Content-Type"] = "text/plain; charset=UTF-8"
        return response


def cors_middleware(app, origins: list[str], allow_headers: list[str]):
    """Wrap ``app`` so ``origins`` may call it with the default and ``allow_headers``."""
    for origin in origins:
        check_origin(origin)
    for name in allow_headers:
        check_header_name(name)
    headers = list(dict.fromkeys([*DEFAULT_ALLOW_HEADERS, *allow_headers]))
    conf = cfg.ConfigOpts()
    conf([], project="billeting", default_config_files=[])
    conf.register_opts(cors.OPTS, "cors")
    conf.set_override("allowed_origin", list(origins), "cors")
    conf.set_override("allow_headers", headers, "cors")
    conf.set_override("expose_headers", list(EXPOSE_HEADERS), "cors")
    conf.set_override("allow_methods", list(ALLOW_METHODS), "cors")
    return _CORS(app, conf)
