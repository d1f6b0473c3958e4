"""Errors in Nova's format: ``{"itemNotFound": {"code": 404, "message": "..."}}``."""
from __future__ import annotations

import logging

import falcon
import orjson

LOG = logging.getLogger(__name__)

FAULT_NAMES = {400: "badRequest", 401: "unauthorized", 403: "forbidden", 404: "itemNotFound",
               405: "badMethod", 409: "conflictingRequest", 413: "overLimit", 415: "badMediaType",
               429: "overLimit", 501: "notImplemented", 503: "serviceUnavailable"}


class NovaError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def bad_request(message: str) -> NovaError:
    return NovaError(400, message)


def not_found(message: str) -> NovaError:
    return NovaError(404, message)


def forbidden(message: str = "Policy doesn't allow this operation to be performed.") -> NovaError:
    return NovaError(403, message)


def conflict(message: str) -> NovaError:
    return NovaError(409, message)


def document(status: int, message: str) -> bytes:
    return orjson.dumps({FAULT_NAMES.get(status, "computeFault"): {"code": status, "message": message}})


def _reply(resp: falcon.Response, status: int, message: str) -> None:
    resp.status = status
    resp.content_type = "application/json"
    resp.data = document(status, message)


def handle_nova(req, resp, exc: NovaError, params) -> None:
    _reply(resp, exc.status, exc.message)


def handle_http(req, resp, exc: falcon.HTTPError, params) -> None:
    status = exc.status_code
    message = exc.description or exc.title or "error"
    if status == 404 and exc.description is None:
        message = "The resource could not be found."
    if status == 405:
        message = "The method specified is not allowed for this resource."
    _reply(resp, status, message)


def handle_any(req, resp, exc: Exception, params) -> None:
    if isinstance(exc, falcon.HTTPError):
        handle_http(req, resp, exc, params)
        return
    from billeting.messaging import BusUnavailable
    from billeting.common.db.outage import unavailable_reason
    from billeting.placement_client.client import PlacementUnavailable

    # Placement or the bus down: as for the database below.
    for kind, what in ((PlacementUnavailable, "Placement"), (BusUnavailable, "The message bus")):
        if isinstance(exc, kind):
            LOG.warning("%s unavailable on %s %s: %s", what, req.method, req.path, exc)
            resp.set_header("Retry-After", "1")
            _reply(resp, 503, f"{what} is unavailable. Please retry.")
            return
    reason = unavailable_reason(exc)
    if reason is not None:
        # An exhausted or unreachable database is an outage the client may
        # retry, not a bug: 503 in Nova's format, and a one-line log.
        LOG.warning("database unavailable on %s %s: %s (%s)", req.method, req.path, reason, exc.__class__.__name__)
        resp.set_header("Retry-After", "1")
        _reply(resp, 503, f"The database is unavailable: {reason}. Please retry.")
        return
    from sqlalchemy.exc import DataError

    if isinstance(exc, DataError):
        # A value the database cannot keep (too long, out of range): the
        # request's fault, which the schemas should have caught first.
        LOG.warning("a value did not fit the database on %s %s: %s", req.method, req.path, exc.orig)
        _reply(resp, 400, "Invalid input: a value of the request is too long or out of range.")
        return
    LOG.exception("unexpected error on %s %s", req.method, req.path)
    _reply(resp, 500, "Unexpected API Error. Please report this at the Billeting issue tracker.")


def render_server_error(status: int, code: str, detail: str):
    """Errors the HTTP front answers itself (malformed, too large, too slow),
    in Nova's format like every other compute API error, with a request id
    of their own as every compute API answer has. Nova's ``code`` is the
    status, so the serving layer's ``code`` is not shown."""
    from billeting.api.compute.context import new_request_id
    from billeting.serving.options import ErrorBody

    request_id = new_request_id()
    return ErrorBody("application/json", document(status, detail),
                     (("x-openstack-request-id", request_id), ("x-compute-request-id", request_id)))
