"""Provider summaries (docs/design/allocation-candidates.md#answer) for large
answers, from a per-process cache.

A full answer over a big fleet summarizes thousands of providers that mostly
did not change since the previous request. Re-reading and re-rendering every
one of them was most of the cost of such an answer; here only usage is read
for the whole scope, and only providers that changed are read in full.

What a summary shows, and what tells that a cached one is still right:

* capacities (inventories) and traits: every change to them bumps the
  provider's generation in the same transaction (docs/design/placement-model.md#generations). An entry is
  valid while the provider row read by the request has the same uuid,
  generation and creation time (the creation time tells apart a provider
  that was deleted and re-created under the same id and uuid, where a
  database reuses ids; see ``row_columns``).
* parent and root: reparenting does not bump generations, so an entry also
  records the parent and root ids it was made for (uuids never change).
* usage: allocations can shrink without any generation change (``DELETE
  /allocations``, a consumer moving elsewhere), so usage is never trusted
  from the cache. It is read for the whole scope on every request (the
  inventory rows keep it); an
  entry only remembers the usage its rendered ``resources`` were made with,
  and is re-rendered when that differs.
* resource class names: a custom class can be renamed (mv 1.2-1.6) without
  any generation change. The cache remembers the custom names it was filled
  under and empties itself when they differ. Trait names never change.

The cache is bounded in bytes (``MAX_BYTES``): every entry is charged for
everything it keeps alive (see ``_size``), including the serialized summary
the HTTP layer memoizes on it. An entry that does not fit is not stored (its
request still gets an exact summary). When the cache is full, a request
first evicts the providers outside its own scope (deleted ones, other
queries' ones), once: a scope larger than the whole cache then keeps a
stable part of itself cached instead of refilling the cache every time.
Threads share it; entries are immutable and replaced whole, under a lock.
"""
from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass

from orjson import Fragment
from sqlalchemy import (
    BigInteger,
    Connection,
    Engine,
    Float,
    Integer,
    String,
    cast,
    literal_column,
    null,
    select,
    union_all,
)

from billeting.placement import metrics
from billeting.placement.candidates import names, sql
from billeting.placement.candidates.model import EngineSummary
from billeting.placement.store import tables as t

# About 40,000 summaries of a typical host (three classes, a few traits).
MAX_BYTES = 64 * 2**20
# Smaller scopes are summarized in one query (summaries.load): the cache's
# extra round trips would cost more than they save.
MIN_SCOPE = 64
_SCOPED_USAGE_MAX = 1000


@dataclass(slots=True, frozen=True)
class _Entry:
    key: tuple  # a provider row without its id (see row_columns)
    capacities: tuple[tuple[int, int], ...]  # (class id, capacity) in class id order
    traits: Fragment
    traits_length: int  # of the text in ``traits``
    usage: tuple[tuple[int, int], ...]  # (class id, used) that ``summary`` shows
    # every class; None when the parent or root uuid was not known
    summary: EngineSummary | None
    size: int  # bytes charged against MAX_BYTES


# What an entry keeps alive, in bytes (CPython, 64 bits; checked against
# tracemalloc by the tests): the objects every entry has (the entry, its key
# tuple, the summary, three fragments, the wire tuple, its slot and id in the
# cache's dict), each (class, amount) pair of capacities and usage, and a
# str's header. Texts are charged by their length.
_OBJECTS = 640
_PER_PAIR = 96
_STR = 49
# The longest serialized summary beyond its resources and traits texts:
# {"resources":R,"traits":T,"parent_provider_uuid":"…","root_provider_uuid":"…"}
_WIRE_EXTRA = 146


def _size(key: tuple, capacities: tuple, usage: tuple, resources_length: int, traits_length: int) -> int:
    uuid, parent_id, _root_id, _generation, created = key
    texts = 3 * _STR + 2 * (resources_length + traits_length) + _WIRE_EXTRA
    texts += _STR + len(uuid)
    if parent_id is not None:  # parent's and root's uuids, if nothing else keeps them
        texts += 2 * (_STR + len(uuid))
    if created is not None:
        texts += _STR + len(created)
    return _OBJECTS + _PER_PAIR * (len(capacities) + len(usage)) + texts


class _Cache:
    def __init__(self) -> None:
        self.entries: dict[int, _Entry] = {}
        self.custom_names: tuple = ()
        self.bytes = 0  # sum of the entries' sizes
        self.lock = threading.Lock()

    def reset(self, custom_names: tuple) -> None:
        with self.lock:
            self.entries, self.custom_names, self.bytes = {}, custom_names, 0

    def store(self, updates: list[tuple[int, _Entry]], scope) -> None:
        """Store ``updates`` (provider id, entry) while they fit; the first
        time one does not, evict every provider outside ``scope``."""
        with self.lock:
            entries = self.entries
            evicted = False
            for provider_id, entry in updates:
                old = entries.get(provider_id)
                growth = entry.size - (old.size if old is not None else 0)
                if self.bytes + growth > MAX_BYTES and not evicted:
                    evicted = True
                    entries = self.entries = {p: e for p, e in entries.items() if p in scope}
                    self.bytes = sum(e.size for e in entries.values())
                if self.bytes + growth > MAX_BYTES:
                    if old is not None:  # outdated: better gone than kept
                        del entries[provider_id]
                        self.bytes -= old.size
                    continue
                entries[provider_id] = entry
                self.bytes += growth


_CACHES: "weakref.WeakKeyDictionary[Engine, _Cache]" = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def _cache(conn: Connection) -> _Cache:
    engine = conn.engine
    found = _CACHES.get(engine)
    if found is None:
        with _LOCK:
            found = _CACHES.setdefault(engine, _Cache())
    return found


def clear() -> None:
    with _LOCK:
        _CACHES.clear()


def charged_bytes() -> int:
    """Bytes charged against MAX_BYTES, over every engine's cache."""
    with _LOCK:
        caches = list(_CACHES.values())
    return sum(cache.bytes for cache in caches)


# --- queries --------------------------------------------------------------------

def row_columns(p, dialect: str) -> tuple:
    """What a request reads about each provider in scope: (id, uuid, parent
    id, root id, generation, creation time as text). Everything after the id
    is what a cached summary must match (see the module docstring).

    The creation time only tells apart a provider re-created under a reused
    id: PostgreSQL's sequences never hand out an id twice, so there it is
    left NULL (reading and converting it for thousands of rows is not free).
    SQLite reuses the highest id after a delete, and older MySQL servers
    after a restart."""
    created = cast(null(), String) if dialect == "postgresql" else cast(p.c.created_at, String)
    return (p.c.id, p.c.uuid, p.c.parent_provider_id, p.c.root_provider_id, p.c.generation, created)


def _usage_and_names_query(plan: sql.Plan, scope: sql.IdSet | None):
    """Usage per (provider, class) in scope (None: every provider; kind 0),
    and every custom class name (kind 1), in one round trip."""
    inv, rc = sql.INV, t.resource_classes
    plan.mark(scope is None, bool(scope))
    in_scope = None if scope is None else sql.ids_in(plan, inv.c.resource_provider_id, scope)
    # The scope's id range too (implied by the set, so nothing changes but the
    # plan): the usage of a window of hosts is then an index range scan,
    # whatever the number of allocations elsewhere in the fleet.
    lowest = plan.bind(scope.ids[0], Integer) if scope else None
    highest = plan.bind(scope.ids[-1], Integer) if scope else None
    custom = plan.bind(t.CUSTOM_RC_START_ID, Integer)
    if not plan.build:
        return None
    # Only the pairs in use: a summary shows 0 for the others.
    usage = (select(literal_column("0").label("kind"), inv.c.resource_provider_id, inv.c.resource_class_id,
                    inv.c.used, cast(null(), String))
             .where(inv.c.used != 0))
    if in_scope is not None:
        usage = usage.where(in_scope)
    if lowest is not None:
        usage = usage.where(inv.c.resource_provider_id >= lowest, inv.c.resource_provider_id <= highest)
    classes = select(literal_column("1"), cast(null(), Integer), rc.c.id, cast(null(), BigInteger),
                     rc.c.name).where(rc.c.id >= custom)
    return union_all(usage, classes)


def _static_query(plan: sql.Plan, ids: sql.IdSet):
    """Capacities (kind 0) and traits (kind 1) of the given providers."""
    inv, rpt = sql.INV, sql.RPT
    inv_scope = sql.ids_in(plan, inv.c.resource_provider_id, ids)
    trait_scope = sql.ids_in(plan, rpt.c.resource_provider_id, ids)
    if not plan.build:
        return None
    inventories = select(literal_column("0").label("kind"), inv.c.resource_provider_id, inv.c.resource_class_id,
                         inv.c.total, inv.c.reserved, inv.c.allocation_ratio).where(inv_scope)
    traits = select(literal_column("1"), rpt.c.resource_provider_id, rpt.c.trait_id, cast(null(), BigInteger),
                    cast(null(), BigInteger), cast(null(), Float)).where(trait_scope)
    return union_all(inventories, traits)


# --- rendering ------------------------------------------------------------------

def _resources(capacities, usage: dict[int, int], rc_name: dict[int, str], classes=None) -> str:
    # Names are [A-Z0-9_] only (docs/design/placement-model.md#resource-classes): nothing to escape.
    return "{" + ",".join(
        f'"{rc_name[rc]}":{{"capacity":{capacity},"used":{usage.get(rc, 0)}}}'
        for rc, capacity in capacities if classes is None or rc in classes) + "}"


def _traits(trait_names: Sequence[str]) -> str:
    return "[" + ",".join(f'"{name}"' for name in sorted(trait_names)) + "]"


# --- loading --------------------------------------------------------------------

def summarize(conn: Connection, rows: Sequence, classes=None,
              usage: "Usage | None" = None) -> tuple[dict[int, EngineSummary], dict[int, str]]:
    """Summaries of exactly the providers of ``rows`` (laid out as
    ``row_columns``), keyed by provider id, and their uuids. ``usage``: read
    by the caller in this transaction (``usage_of``), else read here."""
    cache = _cache(conn)
    read = usage if usage is not None else usage_of(conn, rows)
    used_by, custom_names = read.by_provider, read.custom_names
    if custom_names != cache.custom_names:
        cache.reset(custom_names)
    entries = cache.entries
    uuid_of = {row[0]: row[1] for row in rows}
    maker = _Maker(conn, used_by, uuid_of, classes)
    by_id: dict[int, EngineSummary] = {}
    stale = []
    get = entries.get
    for row in rows:
        provider_id = row[0]
        entry = get(provider_id)
        if entry is None or entry.key != row[1:]:
            stale.append(row)
        elif classes is None and provider_id not in used_by and not entry.usage and entry.summary is not None:
            by_id[provider_id] = entry.summary  # the common case: nothing changed, nothing used
        else:
            by_id[provider_id] = maker.summary(row, entry)
    if stale:
        for row, entry in _fill(conn, stale, maker.rc_name):
            by_id[row[0]] = maker.summary(row, entry)
    if maker.updates and custom_names == cache.custom_names:
        cache.store(maker.updates, uuid_of)
    metrics.observe_summary_cache(hits=len(rows) - len(stale), misses=len(stale), entries=len(entries))
    return by_id, uuid_of


@dataclass(slots=True, frozen=True)
class Usage:
    by_provider: dict[int, dict[int, int]]  # provider id -> class id -> used
    custom_names: tuple  # (class id, name) of every custom class, in id order


def usage_of(conn: Connection, rows: Sequence) -> Usage:
    """The usage of (at least) the providers of ``rows``, and the custom
    class names: what ``summarize`` reads unless it is given them."""
    # A large scope is most of the fleet: reading every inventory in use costs less
    # than sending and matching thousands of ids.
    scope = sql.IdSet(row[0] for row in rows) if len(rows) <= _SCOPED_USAGE_MAX else None
    statement, values = sql.prepare("summary_usage", conn.dialect.name,
                                    lambda plan: _usage_and_names_query(plan, scope))
    usage: dict[int, dict[int, int]] = {}
    custom: list[tuple[int, str]] = []
    for kind, provider_id, rc_id, used, name in conn.execute(statement, values).all():
        if kind == 0:
            usage.setdefault(provider_id, {})[rc_id] = int(used)
        else:
            custom.append((rc_id, name))
    return Usage(usage, tuple(sorted(custom)))


class _Maker:
    """Builds (and caches) the summaries that cannot be taken as they are."""

    def __init__(self, conn: Connection, usage: dict[int, dict[int, int]], uuid_of: dict[int, str],
                 classes) -> None:
        self.conn, self.usage, self.uuid_of, self.classes = conn, usage, uuid_of, classes
        self.rc_name: dict[int, str] = {}
        self.updates: list[tuple[int, _Entry]] = []  # for the cache, stored at the end

    def _names(self, entry: _Entry) -> dict[int, str]:
        rc_name = self.rc_name
        unknown = [rc for rc, _ in entry.capacities if rc not in rc_name]
        if unknown:
            rc_name.update(names.rc_names(self.conn, unknown))
        return rc_name

    def summary(self, row, entry: _Entry) -> EngineSummary:
        provider_id, uuid, parent_id, root_id = row[:4]
        used = self.usage.get(provider_id) or {}
        used_key = tuple(sorted(used.items()))
        if self.classes is not None:
            resources = _resources(entry.capacities, used, self._names(entry), self.classes)
        elif entry.summary is not None and entry.usage == used_key:
            return entry.summary
        else:
            resources = _resources(entry.capacities, used, self._names(entry))
        uuid_of = self.uuid_of
        parent_uuid = uuid_of.get(parent_id) if parent_id is not None else None
        root_uuid = uuid_of.get(root_id)
        summary = EngineSummary(uuid=uuid, parent_uuid=parent_uuid, root_uuid=root_uuid or uuid,
                                  resources=Fragment(resources), traits=entry.traits)
        # Kept only when it shows every class and its parent and root are known
        # (scopes below mv 1.29 may leave them out; those summaries omit them).
        if self.classes is None and root_uuid is not None and (parent_id is None or parent_uuid is not None):
            size = _size(entry.key, entry.capacities, used_key, len(resources), entry.traits_length)
            self.updates.append((provider_id, _Entry(entry.key, entry.capacities, entry.traits,
                                                     entry.traits_length, used_key, summary, size)))
        return summary


def _fill(conn: Connection, stale: list, rc_name: dict[int, str]) -> list[tuple[tuple, _Entry]]:
    """Read capacities and traits of the ``stale`` rows' providers afresh."""
    ids = sql.IdSet(row[0] for row in stale)
    statement, values = sql.prepare("summary_static", conn.dialect.name, lambda plan: _static_query(plan, ids))
    capacities: dict[int, list[tuple[int, int]]] = {row[0]: [] for row in stale}
    trait_ids: dict[int, list[int]] = {row[0]: [] for row in stale}
    for kind, provider_id, item, total, reserved, ratio in conn.execute(statement, values).all():
        if kind == 0:
            capacities[provider_id].append((item, int((total - reserved) * ratio)))
        else:
            trait_ids[provider_id].append(item)
    wanted = {rc for found in capacities.values() for rc, _ in found} - rc_name.keys()
    if wanted:
        rc_name.update(names.rc_names(conn, wanted))
    all_traits = {trait for found in trait_ids.values() for trait in found}
    trait_name = names.trait_names(conn, all_traits) if all_traits else {}
    filled = []
    for row in stale:
        traits = _traits([trait_name[trait] for trait in trait_ids[row[0]]])
        filled.append((row, _Entry(row[1:], tuple(sorted(capacities[row[0]])), Fragment(traits), len(traits),
                                   (), None, 0)))
    return filled
