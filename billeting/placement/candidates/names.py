"""Name <-> id resolution for resource classes and traits, with a cache of the
*standard* names only.

Standard resource classes (id < 10000) and standard traits (no ``CUSTOM_``
prefix) can be neither renamed nor deleted, so their ids never change once a
database has them: caching them per engine is safe across processes and is
bounded by the size of the os-resource-classes / os-traits lists. Custom
names are always looked up in the database. A cache miss falls through to
the database, so names synced by a newer process are still found.
"""
from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable
from dataclasses import dataclass, field

from sqlalchemy import Connection, Engine, select

from billeting.placement.store import tables as t

SHARES_TRAIT = "MISC_SHARES_VIA_AGGREGATE"


@dataclass(slots=True)
class _Standard:
    rc_ids: dict[str, int] = field(default_factory=dict)
    rc_names: dict[int, str] = field(default_factory=dict)
    trait_ids: dict[str, int] = field(default_factory=dict)
    trait_names: dict[int, str] = field(default_factory=dict)


_CACHE: "weakref.WeakKeyDictionary[Engine, _Standard]" = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def _standard(conn: Connection) -> _Standard:
    engine = conn.engine
    found = _CACHE.get(engine)
    if found is not None:
        return found
    std = _Standard()
    rc = t.resource_classes
    for rc_id, name in conn.execute(select(rc.c.id, rc.c.name).where(rc.c.id < t.CUSTOM_RC_START_ID)):
        std.rc_ids[name] = rc_id
        std.rc_names[rc_id] = name
    tr = t.traits
    for trait_id, name in conn.execute(select(tr.c.id, tr.c.name)):
        if not name.startswith("CUSTOM_"):
            std.trait_ids[name] = trait_id
            std.trait_names[trait_id] = name
    with _LOCK:
        _CACHE[engine] = std
    return std


def rc_ids(conn: Connection, names: Iterable[str]) -> dict[str, int]:
    """Ids of the named classes that exist; unknown names are left out."""
    std = _standard(conn)
    found: dict[str, int] = {}
    missing = []
    for name in set(names):
        rc_id = std.rc_ids.get(name)
        if rc_id is None:
            missing.append(name)
        else:
            found[name] = rc_id
    if missing:
        rc = t.resource_classes
        found.update(iter(conn.execute(select(rc.c.name, rc.c.id).where(rc.c.name.in_(missing)))))
    return found


def trait_ids(conn: Connection, names: Iterable[str]) -> dict[str, int]:
    std = _standard(conn)
    found: dict[str, int] = {}
    missing = []
    for name in set(names):
        trait_id = std.trait_ids.get(name)
        if trait_id is None:
            missing.append(name)
        else:
            found[name] = trait_id
    if missing:
        tr = t.traits
        found.update(iter(conn.execute(select(tr.c.name, tr.c.id).where(tr.c.name.in_(missing)))))
    return found


def rc_names(conn: Connection, ids: Iterable[int]) -> dict[int, str]:
    std = _standard(conn)
    ids = set(ids)
    found = {i: std.rc_names[i] for i in ids if i in std.rc_names}
    missing = ids - found.keys()
    if missing:
        rc = t.resource_classes
        found.update(iter(conn.execute(select(rc.c.id, rc.c.name).where(rc.c.id.in_(missing)))))
    return found


def trait_names(conn: Connection, ids: Iterable[int]) -> dict[int, str]:
    std = _standard(conn)
    ids = set(ids)
    found = {i: std.trait_names[i] for i in ids if i in std.trait_names}
    missing = ids - found.keys()
    if missing:
        tr = t.traits
        found.update(iter(conn.execute(select(tr.c.id, tr.c.name).where(tr.c.id.in_(missing)))))
    return found


def shares_trait_id(conn: Connection) -> int | None:
    return trait_ids(conn, [SHARES_TRAIT]).get(SHARES_TRAIT)
