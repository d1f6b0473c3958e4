"""Paged listings (``limit``, ``marker`` and the ``*_links`` "next" link),
shared by every compute API collection that pages."""
from __future__ import annotations

import datetime
import itertools
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar
from urllib.parse import urlencode

import falcon

from billeting.api.compute.errors import bad_request

T = TypeVar("T")


def limit_of(params) -> int | None:
    """The ``limit`` query parameter: None when absent, a 400 unless a
    non-negative integer."""
    return count_of(params, "limit")


def count_of(params, name: str) -> int | None:
    """A count in the query (``limit``, ``offset``): None when absent, a 400
    unless a non-negative integer."""
    value = params.get(name)
    if value is None:
        return None
    try:
        n = int(value)
    except ValueError:
        raise bad_request(f"{name} param must be an integer") from None
    if n < 0:
        raise bad_request(f"{name} param must be positive")
    return n


def timestamp(key: str, text: str) -> datetime.datetime:
    """An ISO 8601 time in the query (``changes-since``, ``changes-before``) as
    an aware UTC datetime (naive ones are UTC), or a 400."""
    try:
        value = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise bad_request(f"Invalid input for query parameters {key}. Value: {text}. "
                          f"'{text}' is not a 'date-time'") from None
    return value if value.tzinfo else value.replace(tzinfo=datetime.timezone.utc)


def time_window(params, changes_before: bool) -> tuple[datetime.datetime | None, datetime.datetime | None]:
    """(``changes-since``, ``changes-before``) of the query, either None when
    absent; ``changes_before`` says whether the microversion takes the second
    (2.66). A window that ends before it starts is a 400, as in Nova."""
    since = timestamp("changes-since", params["changes-since"]) if params.get("changes-since") else None
    before = None
    if changes_before and params.get("changes-before"):
        before = timestamp("changes-before", params["changes-before"])
        if since is not None and since > before:
            raise bad_request("The value of changes-since must be less than or equal to changes-before.")
    return since, before


def in_window(text: str | None, since: datetime.datetime | None, before: datetime.datetime | None) -> bool:
    """Whether a body's time (``updated``, ``updated_at``) lies in the window
    ``time_window`` read; a body without one lies in none."""
    if not text:
        return False
    when = timestamp("updated", text)
    return (since is None or when >= since) and (before is None or when <= before)


def next_link(req: falcon.Request, path: str, limit: int, marker: str) -> list[dict]:
    """The "next" link of a page cut at ``marker``: the same query (every
    filter kept, as Nova does, so a client that follows it gets the same
    listing's next page), with ``limit`` and ``marker`` set."""
    kept = {k: v for k, v in req.params.items() if k not in ("limit", "marker")}
    query = urlencode({**kept, "limit": limit, "marker": marker}, doseq=True)
    return [{"rel": "next", "href": f"{req.prefix}/v2.1/{path}?{query}"}]


def page(items: Iterable[T], req: falcon.Request, path: str, id_of: Callable[[T], str],
         missing: str | None = None) -> tuple[list[T], list[dict]]:
    """A listing's page by its query: what follows ``marker`` (a 400, ``missing``,
    when absent), cut at ``limit``; (the page, its next link). ``items`` is
    read lazily and only as far as the page needs (one more tells whether a
    next page exists), so a generator of costly bodies builds only those."""
    limit = limit_of(req.params)
    marker = req.params.get("marker")
    rest = iter(items) if marker is None else after(items, marker, id_of, missing)
    if limit is None:
        return list(rest), []
    taken = list(itertools.islice(rest, min(limit, sys.maxsize - 1) + 1))
    if len(taken) <= limit:
        return taken, []
    taken = taken[:limit]
    return taken, next_link(req, path, limit, id_of(taken[-1])) if taken else []


def after(items: Iterable[T], marker: str, id_of: Callable[[T], str], missing: str | None = None) -> Iterator[T]:
    """What follows the item ``marker`` in ``items``, lazily; a 400 (``missing``,
    else Nova's usual text) when ``items`` do not hold it."""
    rest = iter(items)
    for item in rest:
        if id_of(item) == marker:
            yield from rest
            return
    raise bad_request(missing or f"marker [{marker}] not found")
