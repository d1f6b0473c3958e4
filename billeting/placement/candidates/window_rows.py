"""A small window of providers read whole: each provider's stock and traits
come with the providers, capacity is tested in Python and the summaries are
made from the same rows.

A sampled decision asks for a dozen candidates. Testing their capacity in
SQL and then reading their inventories again for the summaries read every
inventory row twice (and joined the resource class table for the names).
Here the window's statement returns each provider with its stock (every
inventory with its usage in one column, ``placement/stock.py``) and, when
the answer shows traits, every trait row of the window (an index-only range
scan); nothing more is read for the answer. A provider whose stock is not
known (NULL) has its inventory rows read in one more statement. Standard
class and trait names come from ``names``' cache; a custom name is read
from the database whenever one appears (custom classes can be renamed, so
no custom name is cached).

Only for small windows (``MAX_WINDOW``, and below the size from which the
summary cache serves an answer, ``summary_cache.MIN_SCOPE``): beyond it,
decoding every provider's stock costs more than the set-based capacity test
with one joined row (``sql.serving_window``), and the summaries come from
the cache.

The capacity test is the one of ``sql.serves`` and ``sql.fits_usage``,
written in Python with the same arithmetic: ``(total - reserved) *
allocation_ratio`` is a double in both, and amounts stay far below 2**53,
where a double holds every integer exactly.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from orjson import Fragment
from sqlalchemy import Boolean, Connection, Integer, Text, cast, func, literal_column, null, select, union_all

from billeting.placement import stock as provider_stock
from billeting.placement.candidates import names, sql
from billeting.placement.candidates.model import EngineSummary
from billeting.placement.stock import Stock

# Windows of up to this many providers are read whole (see the module doc).
MAX_WINDOW = 256

_EMPTY_OBJECT = Fragment(b"{}")
_EMPTY_LIST = Fragment(b"[]")


@dataclass(slots=True)
class Window:
    """What the window statements returned, by provider id, over every window of a scan."""

    stock: dict[int, dict[int, Stock]]
    trait_ids: dict[int, list[int]]


def new_window() -> Window:
    return Window({}, {})


def statement(plan: sql.Plan, scanned, low, provider_columns: tuple, ok, with_traits: bool):
    """The window's providers with their verdict and stock (kind 0) and,
    ``with_traits``, its trait rows (kind 2), as one UNION ALL of rows laid
    out (kind, *provider_columns, ok, stock, trait id); kind 2 carries the
    provider id in the first provider column. The window is every provider
    id in (``low``, its last id]."""
    plan.mark("window_rows", with_traits)
    if not plan.build:
        return None
    rpt = sql.RPT
    blanks = tuple(cast(null(), c.type) for c in provider_columns[1:])
    parts = [select(literal_column("0").label("kind"), *provider_columns, ok.label("ok"),
                    scanned.c.stock.label("stock"), cast(null(), Integer).label("item"))]
    if with_traits:
        last = select(func.max(scanned.c.id)).scalar_subquery()
        parts.append(select(literal_column("2"), rpt.c.resource_provider_id, *blanks, cast(null(), Boolean),
                            cast(null(), Text), rpt.c.trait_id)
                     .where(rpt.c.resource_provider_id > low, rpt.c.resource_provider_id <= last))
    return union_all(*parts)


def split(conn: Connection, result_rows: Iterable, window: Window, width: int) -> list:
    """The kind-0 rows (provider columns and verdict, ``width`` + 1 values), in
    id order; their stock and the kind-2 rows go into ``window`` (the stock
    of a provider that has none stored is read from its inventory rows)."""
    providers = []
    stock, trait_ids = window.stock, window.trait_ids
    unknown = []
    for row in result_rows:
        if row[0] == 0:
            providers.append(row[1:width + 2])
            text = row[width + 2]
            if text is None:
                unknown.append(row[1])
            else:
                stock[row[1]] = provider_stock.decode(text)
        else:
            trait_ids.setdefault(row[1], []).append(row[width + 3])
    if unknown:
        stock.update(provider_stock.read(conn, unknown))
    providers.sort(key=lambda r: r[0])  # (already in id order, in practice)
    return providers


def serves(window: Window, provider_id: int, resources: dict[int, int]) -> bool:
    """The provider can take every ``resources`` amount (``sql.serving_window``'s test)."""
    have = window.stock.get(provider_id, {})
    for rc_id, amount in resources.items():
        row = have.get(rc_id)
        if row is None or not row.takes(amount):
            return False
    return True


def summaries(conn: Connection, window: Window, rows: list, classes, with_traits: bool
              ) -> dict[int, EngineSummary]:
    """Summaries of the providers of ``rows`` (laid out as
    ``summary_cache.row_columns``), from what their windows returned; the
    same content as ``summaries.load`` gives. ``classes`` limits the
    resources shown (mv < 1.27)."""
    stock, trait_ids = window.stock, window.trait_ids
    ids = [row[0] for row in rows]
    rc_name = names.rc_names(conn, {rc for p in ids for rc in stock.get(p, ())})
    trait_name = (names.trait_names(conn, {t for p in ids for t in trait_ids.get(p, ())})
                  if with_traits else {})
    uuid_of = {row[0]: row[1] for row in rows}
    by_id: dict[int, EngineSummary] = {}
    for provider_id, uuid, parent_id, root_id, *_ in rows:
        # Names are [A-Z0-9_] only: nothing to escape.
        entries = [f'"{rc_name[rc]}":{{"capacity":{int(item.capacity)},"used":{item.used}}}'
                   for rc, item in sorted(stock.get(provider_id, {}).items())
                   if classes is None or rc in classes]
        resources = Fragment("{" + ",".join(entries) + "}") if entries else _EMPTY_OBJECT
        own = trait_ids.get(provider_id)
        traits = (Fragment("[" + ",".join(sorted(f'"{trait_name[t]}"' for t in own)) + "]")
                  if with_traits and own else _EMPTY_LIST)
        by_id[provider_id] = EngineSummary(
            uuid=uuid, parent_uuid=uuid_of.get(parent_id) if parent_id is not None else None,
            root_uuid=uuid_of.get(root_id, uuid), resources=resources, traits=traits)
    return by_id
