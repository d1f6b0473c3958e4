"""The Placement error document and the domain-exception → HTTP mapping
(docs/design/placement-http.md#errors)."""
from __future__ import annotations

from http import HTTPStatus

import orjson

from billeting.placement import errors as domain


class HTTPProblem(domain.PlacementError):
    """An error that only exists at the HTTP layer (403, 405, 406, 415 ...)."""

    def __init__(self, status: int, detail: str, *, code: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(detail, code=code)
        self.status = status
        self.headers = headers or {}


def status_for(exc: domain.PlacementError) -> int:
    if isinstance(exc, HTTPProblem):
        return exc.status
    if isinstance(exc, domain.NotFound):
        return 404
    if isinstance(exc, domain.Conflict):
        return 409
    return 400


def title(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"


def error_document(status: int, detail: str, request_id: str | None, *,
                   code: str | None, extra: dict | None = None) -> bytes:
    """One-element ``errors`` list; ``code`` only when the caller passes one
    (i.e. a microversion ≥ 1.23 was negotiated)."""
    err: dict = {"status": status, "title": title(status), "detail": detail}
    if code is not None:
        err["code"] = code
    if request_id:
        err["request_id"] = request_id
    if extra:
        err.update(extra)
    return orjson.dumps({"errors": [err]})


def bad_request(detail: str, code: str | None = None) -> HTTPProblem:
    return HTTPProblem(400, detail, code=code)


def method_not_allowed(method: str, allowed: tuple[str, ...] | None = None) -> HTTPProblem:
    """405 naming the method, as upstream's; ``Allow`` unless the route
    exists only at other microversions."""
    headers = {"Allow": ", ".join(allowed)} if allowed else None
    return HTTPProblem(405, f"The method {method} is not allowed for this resource.", headers=headers)


def check_body_headers(env: dict) -> None:
    """A request's body headers make sense: an integer ``Content-Length``,
    and a ``Content-Type`` whenever there is a body (both APIs answer 400)."""
    length = env.get("CONTENT_LENGTH")
    if length:
        try:
            size = int(length)
        except ValueError:
            raise HTTPProblem(400, "content-length header must be an integer") from None
        if size > 0 and not env.get("CONTENT_TYPE"):
            raise HTTPProblem(400, "content-type header required when content-length > 0")


def not_found(detail: str = "The resource could not be found.") -> HTTPProblem:
    return HTTPProblem(404, detail)
