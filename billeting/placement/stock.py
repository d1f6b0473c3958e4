"""A provider's stock: all its inventories, with their usage, in one row.

``resource_providers.stock`` holds, as one JSON text, every inventory row of
the provider with its kept usage (``inventories.used``). A sampled candidate
search can then read a window of providers as one row each, instead of one
provider row and one row per inventory: on PostgreSQL that is 2 rows read
per candidate instead of 8 (an index entry and a table row each).

Why it stays exact. Every writer of a provider's inventory rows (claims,
releases, inventory changes, reshapes) calls ``refresh`` before it commits,
and ``refresh`` recomputes the text from the inventory rows while holding
the provider row's lock. Writers of one provider therefore commit in the
order they took that lock, and each recomputes from a statement that sees
every earlier commit (READ COMMITTED on PostgreSQL and MySQL; SQLite has one
writer at a time) together with its own changes: the last commit always
leaves the text equal to the rows. A writer that takes the lock before it
touches the inventory rows (``lock``) also keeps releases from deadlocking
with claims, which lock the provider first (their generation
compare-and-set).

The text is a cache for reads only. Claims still admit from the summed
allocation rows (``allocations``), so a text that is wrong (a server older
than migration 0006 writing during a rolling upgrade, a repair made around
Placement) can make an answer list a host that is full or miss one that
fits, never overcommit. NULL means "not known": readers fall back to the
inventory rows. ``billeting placement audit`` reports texts out of step and
``--fix`` recounts them.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import orjson
from sqlalchemy import Connection, Text, bindparam, cast, func, select, update

from billeting.common.db.keys import Keyed, match
from billeting.placement.store import tables as t

_rp, _inv = t.resource_providers, t.inventories


@dataclass(slots=True, frozen=True)
class Stock:
    """One inventory of a provider: what a capacity test and a summary need."""

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
        """One allocation of ``amount`` fits (the candidates query's test)."""
        return (self.min_unit <= amount <= self.max_unit
                and (self.step_size == 1 or amount % self.step_size == 0)
                and self.used + amount <= self.capacity)


def encode(items: Iterable[Stock]) -> str:
    """The column's text: a JSON list of [class id, total, reserved, min,
    max, step, ratio, used], in class id order."""
    return orjson.dumps([[s.resource_class_id, s.total, s.reserved, s.min_unit, s.max_unit, s.step_size,
                          s.allocation_ratio, s.used]
                         for s in sorted(items, key=lambda s: s.resource_class_id)]).decode()


def decode(text: str) -> dict[int, Stock]:
    """By class id, what ``encode`` wrote."""
    return {item[0]: Stock(item[0], item[1], item[2], item[3], item[4], item[5], float(item[6]), item[7])
            for item in orjson.loads(text)}


_LOCK = Keyed(lambda ids: select(_rp.c.id).where(match(_rp.c.id, "ids", ids))
              .order_by(_rp.c.id).with_for_update(), "ids")

_ROWS = (select(_inv.c.resource_provider_id, _inv.c.resource_class_id, _inv.c.total, _inv.c.reserved,
                _inv.c.min_unit, _inv.c.max_unit, _inv.c.step_size, _inv.c.allocation_ratio, _inv.c.used)
         .where(_inv.c.resource_provider_id.in_(bindparam("ids", expanding=True))))

_CHUNK = 1000  # ids per statement (SQLite's bound parameter limit)

_WRITE = update(_rp).where(_rp.c.id == bindparam("provider_id")).values(stock=bindparam("text"))


def _text_of_rows(dialect: str):
    """The stock text of the provider row being updated, made by the
    database from its inventory rows: the list ``encode`` writes, in any
    order (``decode`` makes a dict). Each double is written with enough
    digits to read back the same: PostgreSQL and MariaDB/MySQL do so by
    themselves; SQLite's JSON keeps 15, so there it goes through
    printf's %!.17g."""
    i = _inv
    values = (i.c.resource_class_id, i.c.total, i.c.reserved, i.c.min_unit, i.c.max_unit, i.c.step_size,
              i.c.allocation_ratio, i.c.used)
    if dialect == "sqlite":
        item = func.json(func.printf("[%d,%d,%d,%d,%d,%d,%!.17g,%d]", *values))
        text = func.json_group_array(item)                       # '[]' without rows
    elif dialect == "postgresql":
        text = func.coalesce(cast(func.json_agg(func.json_build_array(*values)), Text), "[]")
    else:
        text = func.coalesce(func.json_arrayagg(func.json_array(*values)), "[]")
    return select(text).where(i.c.resource_provider_id == _rp.c.id).scalar_subquery()


_REFRESH: dict[str, Keyed] = {}


def _refresh_statement(dialect: str) -> Keyed:
    statement = _REFRESH.get(dialect)
    if statement is None:
        statement = _REFRESH[dialect] = Keyed(
            lambda ids: update(_rp).where(match(_rp.c.id, "ids", ids)).values(stock=_text_of_rows(dialect)),
            "ids")
    return statement


def lock(conn: Connection, provider_ids: Iterable[int]) -> None:
    """Take the row locks of these providers, in id order (the order the
    generation compare-and-set takes them in).

    Nothing to send on SQLite: it has no row locks (FOR UPDATE is not even
    rendered there) and a writer holds the whole database from its first
    write, or from BEGIN IMMEDIATE, until commit."""
    if conn.dialect.name == "sqlite":
        return
    ids = sorted(set(provider_ids))
    if ids:
        conn.execute(*_LOCK.bind({"ids": ids})).all()


def read(conn: Connection, provider_ids: Iterable[int]) -> dict[int, dict[int, Stock]]:
    """The inventory rows of these providers, by provider and class id."""
    ids = sorted(set(provider_ids))
    found: dict[int, dict[int, Stock]] = {i: {} for i in ids}
    for at in range(0, len(ids), _CHUNK):
        for provider_id, class_id, *values in conn.execute(_ROWS, {"ids": ids[at:at + _CHUNK]}):
            total, reserved, min_unit, max_unit, step, ratio, used = values
            found[provider_id][class_id] = Stock(class_id, int(total), int(reserved), int(min_unit),
                                                 int(max_unit), int(step), float(ratio), int(used))
    return found


def refresh(conn: Connection, provider_ids: Iterable[int], *, locked: Iterable[int] = ()) -> None:
    """Recompute the stock of these providers from their inventory rows, in
    the caller's transaction, after its last change to those rows.
    ``locked``: ids whose row this transaction already holds."""
    ids = sorted(set(provider_ids))
    if not ids:
        return
    lock(conn, set(ids) - set(locked))
    # One statement: the database builds the text from the rows it sees
    # under the lock, instead of a read here and a write back.
    statement = _refresh_statement(conn.dialect.name)
    for at in range(0, len(ids), _CHUNK):
        conn.execute(*statement.bind({"ids": ids[at:at + _CHUNK]}))


def out_of_step(conn: Connection) -> list[int]:
    """Ids of providers whose stock text is set and differs from their rows."""
    texts = dict(conn.execute(select(_rp.c.id, _rp.c.stock).where(_rp.c.stock.is_not(None))).all())
    rows = read(conn, texts)
    return [i for i, text in sorted(texts.items()) if decode(text) != rows[i]]


def refresh_all(conn: Connection) -> int:
    """Recompute every provider's stock; returns how many texts changed."""
    texts = dict(conn.execute(select(_rp.c.id, _rp.c.stock)).all())
    rows = read(conn, texts)
    changed = [{"provider_id": i, "text": encode(rows[i].values())} for i, text in texts.items()
               if text is None or decode(text) != rows[i]]
    if changed:
        conn.execute(_WRITE, changed)
    return len(changed)
