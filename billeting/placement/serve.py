"""Serve the Placement API: ``Settings`` → ``ServeOptions`` and the app loader.

The master only binds the socket and supervises; each worker builds its own
engine and WSGI stack after the fork, so no database connection is ever
shared between processes.
"""
from __future__ import annotations

import functools
import logging

from billeting.config import Settings
from billeting.serving import ErrorBody, ServeOptions, WSGIApp

LOG = logging.getLogger("billeting")


def render_server_error(status: int, code: str, detail: str) -> ErrorBody:
    """Errors the HTTP server answers itself (malformed, too large, too slow),
    in the Placement format with a request id of their own (docs/design/placement-http.md#errors,
    #request-ids).
    Placement shows a ``code`` only from microversion 1.23, and a request
    never parsed has negotiated none: ``code`` is left out."""
    from billeting.common.http.auth import new_request_id
    from billeting.common.http.errors import error_document

    request_id = new_request_id()
    return ErrorBody("application/json", error_document(status, detail, request_id, code=None),
                     (("x-openstack-request-id", request_id),))


def serve_options(settings: Settings, **hooks) -> ServeOptions:
    return ServeOptions(
        host=settings.host, port=settings.port, workers=settings.workers, threads=settings.threads,
        header_timeout=settings.header_timeout, body_timeout=settings.body_timeout,
        keepalive_timeout=settings.keepalive_timeout, graceful_timeout=settings.graceful_timeout,
        max_body_size=settings.max_body_size, log_level=settings.log_level, process_name="billeting",
        on_ready=lambda url: LOG.info("ready: %s", url), render_error=render_server_error, **hooks)


def run(settings: Settings) -> None:
    """Serve until a signal: workers share one directory of metric files,
    which the master removes when it stops."""
    from billeting import serving
    from billeting.serving import metrics

    serving.run(serve_options(settings, **metrics.master_hooks(LOG)), functools.partial(load_app, settings))


def load_app(settings: Settings) -> WSGIApp:
    """Runs in each worker after the fork."""
    from billeting.placement.api.app import make_app
    from billeting.common.db.engine import make_engine

    engine = make_engine(settings.db_url, pool_size=max(2, settings.threads))
    return make_app(settings, engine)
