"""The error document every Billeting API answers with, and the problems
that exist only at the HTTP layer (docs/design/placement-http.md#errors).

Each service maps its own domain errors to a status at its edge; a handler
that has nothing but a status to say raises ``HTTPProblem``."""
from __future__ import annotations

from http import HTTPStatus

import orjson


class HTTPProblem(Exception):
    """An answer decided at the HTTP layer (400 for a bad body, 403, 405, 406,
    415 ...). ``code``: the service's error code, None for its default."""

    def __init__(self, status: int, detail: str, *, code: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.code = code
        self.headers = headers or {}


def title(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"


def error_document(status: int, detail: str, request_id: str | None, *,
                   code: str | None, extra: dict | None = None) -> bytes:
    """One-element ``errors`` list; ``code`` only when the caller passes one
    (Placement sends it from microversion 1.23, the scheduler API always)."""
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
