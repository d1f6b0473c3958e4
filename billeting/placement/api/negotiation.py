"""Content negotiation for error bodies and the ``Accept`` check, as upstream.

Upstream renders its errors with WebOb, which picks HTML, JSON or plain
text from the ``Accept`` header (offering ``text/html`` before
``application/json``). A browser (``text/html,...``) therefore gets an HTML
page and ``Accept: text/plain`` a plain-text one; only clients that accept
JSON get the Placement error document. WebOb is already installed
(keystonemiddleware depends on it), so its own Accept parser and page
templates are used rather than imitated: the pages come out exactly as
upstream's, and so does the JSON ``detail`` (WebOb's tag stripping, which
turns the newlines of multi-line messages into spaces).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from webob import exc as webob_exc
from webob.acceptparse import AcceptValidHeader, create_accept_header

JSON = "application/json"
HTML = "text/html"
PLAIN = "text/plain"
_OFFERS = [HTML, JSON]

# A 404 with only this text is one upstream raises without a message of its
# own (unknown route, too old a microversion): its pages show none.
NOT_FOUND = "The resource could not be found."
# Upstream's 405 page names the method (WebOb's template), then says this.
METHOD_NOT_ALLOWED = "The method specified is not allowed for this resource."


# What upstream answers a HEAD request's error with: no body, WebOb's
# default type.
HEAD_CONTENT_TYPE = "text/html; charset=UTF-8"


@dataclass(frozen=True, slots=True)
class Page:
    content_type: str  # with charset, as WebOb sends it
    body: bytes


@lru_cache(maxsize=256)
def _error_body_type(accept: str) -> str:
    offers = create_accept_header(accept).acceptable_offers(_OFFERS)
    return offers[0][0] if offers else PLAIN


def error_body_type(environ: dict) -> str:
    """``application/json``, ``text/html`` or ``text/plain`` for an error.

    A missing or ``*/*`` Accept has already been rewritten to JSON by the
    request-id layer (docs/design/placement-http.md#processing-order), so those and plain
    JSON need no parsing.
    """
    accept = environ.get("HTTP_ACCEPT")
    if not accept or accept == JSON:
        return JSON
    return _error_body_type(accept)


@lru_cache(maxsize=256)
def _takes_json(accept: str) -> bool:
    header = create_accept_header(accept)
    # An unparsable header counts as absent, as upstream's check has it.
    if not isinstance(header, AcceptValidHeader):
        return True
    return bool(header.acceptable_offers([JSON]))


def accepts_json(accept: str | None) -> bool:
    """False only when a valid ``Accept`` header rules JSON out (406)."""
    if not accept or accept == JSON:
        return True
    return _takes_json(accept)


def json_detail(detail: str) -> str:
    """The ``detail`` text as upstream's JSON carries it after its generic
    explanation: newlines become spaces and markup is dropped."""
    if not detail or ("\n" not in detail and "<" not in detail and "\r" not in detail):
        return detail
    return webob_exc.strip_tags(detail)


def _page_detail(status: int, detail: str | None, allow: bool) -> str | None:
    if status == 405:
        # A method the route never takes; a route too new for the requested
        # microversion answers 405 without Allow and without this message.
        return METHOD_NOT_ALLOWED if allow else None
    if status == 404 and detail == NOT_FOUND:
        return None
    return detail


def render(environ: dict, kind: str, status: int, detail: str | None, *, allow: bool = False) -> Page:
    """An HTML or plain-text page for an error, as WebOb renders it
    (``allow``: the response carries an ``Allow`` header)."""
    error_class = webob_exc.status_map.get(status, webob_exc.HTTPInternalServerError)
    error = error_class(detail=_page_detail(status, detail, allow))
    if kind == HTML:
        return Page("text/html; charset=UTF-8", error.html_body(environ).encode("utf-8"))
    return Page("text/plain; charset=UTF-8", error.plain_body(environ).encode("utf-8"))


def unauthorized(environ: dict, start_response):
    """noauth2's 401 for a request without a token, as upstream's (WebOb's
    own rendering: its JSON is ``{"message", "code", "title"}``, not the
    Placement error document)."""
    return webob_exc.HTTPUnauthorized()(environ, start_response)
