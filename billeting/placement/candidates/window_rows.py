"""A small window of providers read whole: inventories and traits come with
the providers, capacity is tested in Python and the summaries are made from
the same rows.

A sampled decision asks for a dozen candidates. Testing their capacity in
SQL and then reading their inventories again for the summaries read every
inventory row twice (and joined the resource class table for the names):
about half of what a decision cost the database. Here the window's
statement returns, beside its providers, every inventory row of the window
(one index range scan on (provider, class)) and, when the answer shows
traits, every trait row of the window (an index-only range scan); nothing
more is read for the answer. Standard class and trait names come from
``names``' cache; a custom name is read from the database whenever one
appears (custom classes can be renamed, so no custom name is cached).

Only for small windows (``MAX_WINDOW``, and below the size from which the
summary cache serves an answer, ``summary_cache.MIN_SCOPE``): beyond it,
one row per inventory costs more to send and decode than the set-based
capacity test with one joined row (``sql.serving_window``), and the
summaries come from the cache.

The capacity test is the one of ``sql.serves`` and ``sql.fits_usage``,
written in Python with the same arithmetic: ``(total - reserved) *
allocation_ratio`` is a double in both, and amounts stay far below 2**53,
where a double holds every integer exactly.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from orjson import Fragment
from sqlalchemy import (
    BigInteger, Boolean, Connection, Float, Integer, cast, func, literal_column, null, select, union_all,
)

from billeting.placement.candidates import names, sql
from billeting.placement.candidates.model import ProviderSummary

# Windows of up to this many providers are read whole (see the module doc).
MAX_WINDOW = 256

_EMPTY_OBJECT = Fragment(b"{}")
_EMPTY_LIST = Fragment(b"[]")


@dataclass(slots=True, frozen=True)
class Stock:
    """One inventory row of a window: what the capacity test and the summary need."""

    resource_class_id: int
    total: int
    reserved: int
    min_unit: int
    max_unit: int
    step_size: int
    allocation_ratio: float
    used: int

    @property
    def capacity(self) -> float:
        return (self.total - self.reserved) * self.allocation_ratio

    def takes(self, amount: int) -> bool:
        """``sql.serves`` for this row: one allocation of ``amount`` fits."""
        return (self.min_unit <= amount <= self.max_unit
                and (self.step_size == 1 or amount % self.step_size == 0)
                and self.used + amount <= self.capacity)


@dataclass(slots=True)
class Window:
    """What the window statements returned, by provider id, over every window of a scan."""

    stock: dict[int, dict[int, Stock]]
    trait_ids: dict[int, list[int]]


def new_window() -> Window:
    return Window({}, {})


# Columns after the provider columns and the verdict, in every part of the
# union: (item id, total, reserved, min_unit, max_unit, step_size, ratio, used).
def _detail_columns(inv=None):
    if inv is None:
        return (cast(null(), Integer), cast(null(), BigInteger), cast(null(), BigInteger),
                cast(null(), BigInteger), cast(null(), BigInteger), cast(null(), BigInteger),
                cast(null(), Float), cast(null(), BigInteger))
    return (inv.c.resource_class_id, inv.c.total, inv.c.reserved, inv.c.min_unit, inv.c.max_unit,
            inv.c.step_size, inv.c.allocation_ratio, inv.c.used)


def statement(plan: sql.Plan, scanned, low, provider_columns: tuple, ok, with_traits: bool):
    """The window's providers with their verdict (kind 0), its inventory rows
    (kind 1) and, ``with_traits``, its trait rows (kind 2), as one UNION ALL
    of rows laid out (kind, *provider_columns, ok, *detail columns); kinds 1
    and 2 carry the provider id in the first provider column. The window is
    every provider id in (``low``, its last id]."""
    plan.mark("window_rows", with_traits)
    if not plan.build:
        return None
    inv, rpt = sql.INV, sql.RPT
    last = select(func.max(scanned.c.id)).scalar_subquery()
    blanks = tuple(cast(null(), c.type) for c in provider_columns[1:])
    parts = [
        select(literal_column("0").label("kind"), *provider_columns, ok.label("ok"), *_detail_columns()),
        select(literal_column("1"), inv.c.resource_provider_id, *blanks, cast(null(), Boolean),
               *_detail_columns(inv))
        .where(inv.c.resource_provider_id > low, inv.c.resource_provider_id <= last),
    ]
    if with_traits:
        nothing = _detail_columns()[1:]
        parts.append(select(literal_column("2"), rpt.c.resource_provider_id, *blanks, cast(null(), Boolean),
                            rpt.c.trait_id, *nothing)
                     .where(rpt.c.resource_provider_id > low, rpt.c.resource_provider_id <= last))
    return union_all(*parts)


def split(result_rows: Iterable, window: Window, width: int) -> list:
    """The kind-0 rows (provider columns and verdict, ``width`` + 1 values), in
    id order; kinds 1 and 2 go into ``window``."""
    providers = []
    stock, trait_ids = window.stock, window.trait_ids
    for row in result_rows:
        kind = row[0]
        if kind == 0:
            providers.append(row[1:width + 2])
            stock.setdefault(row[1], {})
        elif kind == 1:
            stock.setdefault(row[1], {})[row[width + 2]] = Stock(*row[width + 2:])
        else:
            trait_ids.setdefault(row[1], []).append(row[width + 2])
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
              ) -> dict[int, ProviderSummary]:
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
    by_id: dict[int, ProviderSummary] = {}
    for provider_id, uuid, parent_id, root_id, *_ in rows:
        # Names are [A-Z0-9_] only: nothing to escape.
        entries = [f'"{rc_name[rc]}":{{"capacity":{int(item.capacity)},"used":{item.used}}}'
                   for rc, item in sorted(stock.get(provider_id, {}).items())
                   if classes is None or rc in classes]
        resources = Fragment("{" + ",".join(entries) + "}") if entries else _EMPTY_OBJECT
        own = trait_ids.get(provider_id)
        traits = (Fragment("[" + ",".join(sorted(f'"{trait_name[t]}"' for t in own)) + "]")
                  if with_traits and own else _EMPTY_LIST)
        by_id[provider_id] = ProviderSummary(
            uuid=uuid, parent_uuid=uuid_of.get(parent_id) if parent_id is not None else None,
            root_uuid=uuid_of.get(root_id, uuid), resources=resources, traits=traits)
    return by_id
