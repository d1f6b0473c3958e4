"""Paged listings (``limit``, ``marker`` and the ``*_links`` "next" link),
shared by every compute API collection that pages."""
from __future__ import annotations

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


def next_link(req: falcon.Request, path: str, limit: int, marker: str) -> list[dict]:
    """The "next" link of a page cut at ``marker``: the same query (every
    filter kept, as Nova does, so a client that follows it gets the same
    listing's next page), with ``limit`` and ``marker`` set."""
    kept = {k: v for k, v in req.params.items() if k not in ("limit", "marker")}
    query = urlencode({**kept, "limit": limit, "marker": marker}, doseq=True)
    return [{"rel": "next", "href": f"{req.prefix}/v2.1/{path}?{query}"}]


def page(items: list[T], req: falcon.Request, path: str, id_of: Callable[[T], str],
         missing: str | None = None) -> tuple[list[T], list[dict]]:
    """A listing's page by its query: what follows ``marker`` (a 400, ``missing``,
    when absent), cut at ``limit``; (the page, its next link)."""
    marker = req.params.get("marker")
    if marker is not None:
        items = list(after(items, marker, id_of, missing))
    return cut(items, req, path, limit_of(req.params), id_of)


def cut(items: list[T], req: falcon.Request, path: str, limit: int | None,
        id_of: Callable[[T], str]) -> tuple[list[T], list[dict]]:
    """(the first ``limit`` of ``items``, the next link when more follow)."""
    if limit is None or len(items) <= limit:
        return items, []
    items = items[:limit]
    return items, next_link(req, path, limit, id_of(items[-1])) if items else []


def after(items: Iterable[T], marker: str, id_of: Callable[[T], str], missing: str | None = None) -> Iterator[T]:
    """What follows the item ``marker`` in ``items``, lazily; a 400 (``missing``,
    else Nova's usual text) when ``items`` do not hold it."""
    rest = iter(items)
    for item in rest:
        if id_of(item) == marker:
            yield from rest
            return
    raise bad_request(missing or f"marker [{marker}] not found")
