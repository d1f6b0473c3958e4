"""Placement's handler helpers: microversion gates, the provider-first body
rule, cache headers. The helpers every service shares (bodies, query strings,
policy checks) live in billeting.common.http.util and are re-exported here,
so Placement's handlers find everything under one name."""
from __future__ import annotations

import datetime as dt
from email.utils import format_datetime

import falcon
import orjson

from billeting.common.http.errors import HTTPProblem, method_not_allowed
from billeting.common.http.util import (  # noqa: F401 - re-exported to Placement's modules
    JSON,
    authorize,
    ctx,
    href,
    location,
    query_all,
    query_last,
    query_pairs,
    read_json,
    require_json_content,
    send_empty,
    validate,
    validate_query,
)
from billeting.common.uuids import is_uuid_like, normalize_uuid  # noqa: F401 - re-exported to Placement's modules
from billeting.placement import providers
from billeting.placement.api import negotiation
from billeting.placement.store.tx import run_read


# --- microversion ---------------------------------------------------------

def mv(req: falcon.Request) -> tuple[int, int]:
    return req.context.mv


def require_version(req: falcon.Request, minimum: tuple[int, int], *, status: int = 404) -> None:
    """Answer as if the route did not exist when the version is too old."""
    if req.context.mv < minimum:
        if status == 405:
            raise method_not_allowed(req.method)
        raise HTTPProblem(404, "The resource could not be found.")


# --- request bodies -------------------------------------------------------

def require_accept_json(req: falcon.Request) -> None:
    if not negotiation.accepts_json(req.env.get("HTTP_ACCEPT")):
        raise HTTPProblem(406, "Only application/json is provided")


def read_json_for_provider(req: falcon.Request, schema: dict | None, engine, uuid: str) -> object:
    """``read_json`` for a write on provider ``uuid``, where a missing provider
    (404) must win over a bad body (400) (docs/design/placement-http.md#processing-order).
    The provider is only looked up when the body is bad: a good body goes on to the write, whose
    transaction finds the provider (or not) anyway."""
    try:
        return read_json(req, schema)
    except HTTPProblem:
        run_read(engine, lambda conn: providers.require(conn, uuid))
        raise


# --- responses ------------------------------------------------------------

def http_date(when: dt.datetime | None) -> str:
    when = when or providers.utcnow()
    return format_datetime(when.replace(tzinfo=dt.UTC), usegmt=True)


def send_json(req: falcon.Request, resp: falcon.Response, body: object, *,
              status: int = 200, last_modified: dt.datetime | None = None,
              cache_headers: bool = True) -> None:
    resp.status = status
    resp.content_type = JSON
    resp.data = orjson.dumps(body)
    if cache_headers:
        set_cache_headers(req, resp, last_modified)


def set_cache_headers(req: falcon.Request, resp: falcon.Response,
                      last_modified: dt.datetime | None) -> None:
    if req.context.mv >= (1, 15):
        resp.set_header("Cache-Control", "no-cache")
        resp.set_header("Last-Modified", http_date(last_modified))


def newest(*stamps: dt.datetime | None) -> dt.datetime | None:
    present = [s for s in stamps if s is not None]
    return max(present) if present else None
