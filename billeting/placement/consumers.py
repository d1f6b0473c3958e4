"""Consumers (docs/design/placement-model.md#consumers): the owners of allocations.

A consumer exists exactly while it has allocations. It is created by the
allocation write that gives it its first allocations and deleted by the
write (or DELETE) that leaves it with none; because both happen inside the
caller's transaction, a failed write leaves no consumer behind (the
upstream orphan records of quirk docs/design/placement-quirks.md#q1 are not reproduced).

Projects, users and consumer types are created on first use with inserts
that tolerate a concurrent creator, and are never deleted.

Every function takes an open connection inside the caller's transaction.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

from sqlalchemy import Connection, Table, bindparam, literal, select, union_all, update

from billeting.common.db.keys import Keyed, match
from billeting.placement import errors
from billeting.placement.providers import utcnow
from billeting.placement.store import tables as t
from billeting.placement.store.tx import Retry
from billeting.placement.store.upsert import insert_all_new, insert_if_absent

# What GET /allocations and GET /usages report for a consumer without a type.
UNKNOWN_TYPE = "unknown"

_c = t.consumers


@dataclass(slots=True)
class Consumer:
    id: int
    uuid: str
    project_id: str          # external (keystone) id
    user_id: str             # external (keystone) id
    generation: int
    consumer_type: str | None  # None: never given a type ("unknown" on the wire)
    project_ref: int         # projects.id
    user_ref: int            # users.id
    type_ref: int | None     # consumer_types.id


@dataclass(slots=True, frozen=True)
class Owner:
    """Who a write attributes the consumer to. ``consumer_type`` None means
    "leave an existing consumer's type alone" (writes below mv 1.38)."""

    project_id: str
    user_id: str
    consumer_type: str | None = None


def _select():
    return (select(_c.c.id, _c.c.uuid, _c.c.generation, _c.c.project_id.label("project_ref"),
                   _c.c.user_id.label("user_ref"), _c.c.consumer_type_id.label("type_ref"),
                   t.projects.c.external_id.label("project_ext"),
                   t.users.c.external_id.label("user_ext"),
                   t.consumer_types.c.name.label("type_name"))
            .select_from(_c)
            .join(t.projects, t.projects.c.id == _c.c.project_id)
            .join(t.users, t.users.c.id == _c.c.user_id)
            .outerjoin(t.consumer_types, t.consumer_types.c.id == _c.c.consumer_type_id))


def _from_row(row) -> Consumer:
    return Consumer(id=row.id, uuid=row.uuid, project_id=row.project_ext, user_id=row.user_ext,
                    generation=row.generation, consumer_type=row.type_name,
                    project_ref=row.project_ref, user_ref=row.user_ref, type_ref=row.type_ref)


# Built once: SQLAlchemy then reuses their cache keys and compiled SQL, and a
# call only binds values.
_BY_UUID = _select().where(_c.c.uuid == bindparam("uuid"))
_BY_UUIDS = Keyed(lambda uuids: _select().where(match(_c.c.uuid, "uuids", uuids)), "uuids")


def get(conn: Connection, uuid: str) -> Consumer | None:
    row = conn.execute(_BY_UUID, {"uuid": uuid}).first()
    return _from_row(row) if row else None


def get_many(conn: Connection, uuids) -> dict[str, Consumer]:
    uuids = set(uuids)
    if not uuids:
        return {}
    return {c.uuid: c for c in map(_from_row, conn.execute(*_BY_UUIDS.bind({"uuids": sorted(uuids)})))}


# What a consumer holds, by (provider id, class id): the amounts its allocation rows sum to.
Held = dict[tuple[int, int], int]

_a = t.allocations


def _holding(where):
    """The consumers of ``where``, each with its allocation rows (an outer join: none is one row)."""
    return (_select().add_columns(_a.c.resource_provider_id, _a.c.resource_class_id, _a.c.used)
            .outerjoin(_a, _a.c.consumer_id == _c.c.id).where(where))


_HOLDING_ONE = _holding(_c.c.uuid == bindparam("uuid"))
_HOLDING_MANY = _holding(_c.c.uuid.in_(bindparam("uuids", expanding=True)))


def get_holding(conn: Connection, uuids) -> tuple[dict[str, Consumer], dict[int, Held]]:
    """The existing consumers among ``uuids`` (by uuid) and, per consumer
    id, what each holds now (absent: nothing), in one statement: on READ
    COMMITTED databases generations and rows come from one snapshot."""
    uuids = sorted(set(uuids))
    if not uuids:
        return {}, {}
    rows = (conn.execute(_HOLDING_ONE, {"uuid": uuids[0]}) if len(uuids) == 1
            else conn.execute(_HOLDING_MANY, {"uuids": uuids}))
    found: dict[str, Consumer] = {}
    held: dict[int, Held] = {}
    for row in rows:
        if row.uuid not in found:
            found[row.uuid] = _from_row(row)
        if row.resource_provider_id is not None:
            amounts = held.setdefault(row.id, {})
            pair = (row.resource_provider_id, row.resource_class_id)
            amounts[pair] = amounts.get(pair, 0) + int(row.used)
    return found, held


# --- generation rules (docs/design/placement-model.md#generations) ------------------------------------------

def generation_conflict(expected: int | None, given: int | None) -> errors.ConcurrentUpdate:
    # Nova looks for "consumer generation conflict" in the detail; keep it verbatim.
    shown_expected = "null" if expected is None else expected
    return errors.ConcurrentUpdate(
        f"consumer generation conflict - expected {shown_expected} but got {given}")


def check_generation(existing: Consumer | None, given: int | None) -> None:
    """mv >= 1.28: ``null`` for a consumer that does not exist, else its current value."""
    if existing is None:
        if given is not None:
            raise generation_conflict(None, given)
    elif given != existing.generation:
        raise generation_conflict(existing.generation, given)


# --- first-use records ------------------------------------------------------

@functools.cache
def _id_by_name(table: Table, column: str):
    """``SELECT id FROM table WHERE column = :value``, built once per table."""
    return select(table.c.id).where(table.c[column] == bindparam("value"))


def _ensure_named(conn: Connection, table: Table, column: str, value: str) -> int:
    """Id of the row whose ``column`` is ``value``, inserting it if missing.

    A concurrent transaction may insert the same value between our SELECT
    and INSERT: the insert then skips the duplicate instead of failing (it
    waits for the other writer first), and the second SELECT finds the row.
    """
    by_name = _id_by_name(table, column)
    found = conn.execute(by_name, {"value": value}).scalar()
    if found is not None:
        return found
    found = insert_if_absent(conn, table, {column: value, "created_at": utcnow()})
    if found is not None:
        return found
    found = conn.execute(by_name, {"value": value}).scalar()
    if found is None:  # the other creator rolled back after we skipped: run again
        raise Retry(f"{table.name} {value} vanished while being created")
    return found


def ensure_project(conn: Connection, external_id: str) -> int:
    return _ensure_named(conn, t.projects, "external_id", external_id)


def ensure_user(conn: Connection, external_id: str) -> int:
    return _ensure_named(conn, t.users, "external_id", external_id)


def ensure_consumer_type(conn: Connection, name: str) -> int:
    return _ensure_named(conn, t.consumer_types, "name", name)


# --- writes -------------------------------------------------------------------

def _owner_lookups(with_type: bool):
    lookups = [select(literal("p").label("kind"), t.projects.c.id)
               .where(t.projects.c.external_id == bindparam("project")),
               select(literal("u").label("kind"), t.users.c.id)
               .where(t.users.c.external_id == bindparam("user"))]
    if with_type:
        lookups.append(select(literal("t").label("kind"), t.consumer_types.c.id)
                       .where(t.consumer_types.c.name == bindparam("type")))
    return union_all(*lookups)


_OWNER_LOOKUPS = {False: _owner_lookups(False), True: _owner_lookups(True)}


def _owner_refs(conn: Connection, owner: Owner) -> dict[str, int]:
    """Ids of the owner's project ("p"), user ("u") and type ("t") that exist, in one query."""
    with_type = bool(owner.consumer_type)
    rows = conn.execute(_OWNER_LOOKUPS[with_type], {
        "project": owner.project_id, "user": owner.user_id, "type": owner.consumer_type})
    return {row.kind: row.id for row in rows}


def _insert_named(conn: Connection, table: Table, column: str, value: str) -> int:
    """Id of a new row whose ``column`` is ``value``; if a concurrent writer
    inserted it first, that row's id (see ``_ensure_named``)."""
    found = insert_if_absent(conn, table, {column: value, "created_at": utcnow()})
    if found is not None:
        return found
    found = conn.execute(_id_by_name(table, column), {"value": value}).scalar()
    if found is None:  # the other creator rolled back after we skipped: run again
        raise Retry(f"{table.name} {value} vanished while being created")
    return found


def _owner_ids(conn: Connection, owner: Owner,
               known: dict[Owner, tuple[int, int, int | None]]) -> tuple[int, int, int | None]:
    """(project, user, type) ids of ``owner``, made if missing; ``known``
    remembers them, so a write creating many consumers of one owner (a
    scheduler's batch of claims) looks them up once."""
    ids = known.get(owner)
    if ids is not None:
        return ids
    refs = _owner_refs(conn, owner)
    project_ref = refs["p"] if "p" in refs else _insert_named(conn, t.projects, "external_id", owner.project_id)
    user_ref = refs["u"] if "u" in refs else _insert_named(conn, t.users, "external_id", owner.user_id)
    type_ref = None
    if owner.consumer_type:
        type_ref = refs["t"] if "t" in refs else _insert_named(conn, t.consumer_types, "name", owner.consumer_type)
    ids = known[owner] = (project_ref, user_ref, type_ref)
    return ids


def create_many(conn: Connection, new: list[tuple[str, Owner]], *, generation: int = 0) -> dict[str, Consumer]:
    """Insert new consumers (uuid, owner) at ``generation``, in one
    statement, in the order given; the consumers by uuid. Each owner is
    looked up (or made) once.

    Losing a creation race to a concurrent writer of any of them asks for
    the whole unit of work to be re-run: the re-run sees the consumer and
    applies the generation rules to it (a ``null`` generation then becomes
    the proper 409 at mv >= 1.28).
    """
    known: dict[Owner, tuple[int, int, int | None]] = {}
    now = utcnow()
    refs = [_owner_ids(conn, owner, known) for _uuid, owner in new]
    rows = [{"uuid": uuid, "project_id": p, "user_id": u, "generation": generation,
             "consumer_type_id": ty, "created_at": now} for (uuid, _owner), (p, u, ty) in zip(new, refs)]
    ids = insert_all_new(conn, _c, rows, "uuid")
    if ids is None:
        raise Retry("a consumer was created concurrently")
    return {uuid: Consumer(id=ids[uuid], uuid=uuid, project_id=owner.project_id, user_id=owner.user_id,
                           generation=generation, consumer_type=owner.consumer_type,
                           project_ref=p, user_ref=u, type_ref=ty)
            for (uuid, owner), (p, u, ty) in zip(new, refs)}


def update_owner(conn: Connection, consumer: Consumer, owner: Owner) -> None:
    """Silently move the consumer to another project/user/type (never bumps)."""
    values: dict = {}
    if owner.project_id != consumer.project_id:
        values["project_id"] = ensure_project(conn, owner.project_id)
    if owner.user_id != consumer.user_id:
        values["user_id"] = ensure_user(conn, owner.user_id)
    if owner.consumer_type is not None and owner.consumer_type != consumer.consumer_type:
        values["consumer_type_id"] = ensure_consumer_type(conn, owner.consumer_type)
    if values:
        values["updated_at"] = utcnow()
        conn.execute(_owner_update(tuple(values)), {"consumer_id": consumer.id,
                                                    **{f"new_{k}": v for k, v in values.items()}})


@functools.cache
def _owner_update(columns: tuple[str, ...]):
    """The UPDATE of ``update_owner`` setting ``columns``, built once per set."""
    return (update(_c).where(_c.c.id == bindparam("consumer_id"))
            .values({name: bindparam(f"new_{name}") for name in columns}))


_BUMP = (update(_c).where(_c.c.id == bindparam("consumer_id"), _c.c.generation == bindparam("seen"))
         .values(generation=bindparam("new_generation"), updated_at=bindparam("now")))


def bump_generation(conn: Connection, consumer: Consumer) -> int:
    """Compare-and-set the consumer generation; a lost race re-runs the unit of work.

    The UPDATE also locks the consumer row until commit, so two writers of
    the same consumer are serialized here, before either touches its
    allocation rows.
    """
    result = conn.execute(_BUMP, {"consumer_id": consumer.id, "seen": consumer.generation,
                                  "new_generation": consumer.generation + 1, "now": utcnow()})
    if result.rowcount != 1:
        raise Retry(f"consumer {consumer.uuid} changed concurrently")
    consumer.generation += 1
    return consumer.generation


_DELETE = Keyed(lambda ids: _c.delete().where(match(_c.c.id, "ids", ids)), "ids")


def delete(conn: Connection, consumer_ids) -> None:
    ids = sorted(set(consumer_ids))
    if ids:
        conn.execute(*_DELETE.bind({"ids": ids}))

