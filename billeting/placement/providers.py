"""Resource providers: lookup, listing with filters, create, update, delete, generations."""
from __future__ import annotations

import datetime as dt
import uuid as uuidlib
from dataclasses import dataclass, field

from sqlalchemy import Connection, and_, bindparam, exists, false, func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import aliased

from billeting.placement import errors, names
from billeting.placement.store import tables as t
from billeting.placement.store.tx import Retry
from billeting.placement.store.upsert import insert_if_absent

_parent = aliased(t.resource_providers, name="parent")
_root = aliased(t.resource_providers, name="root")
_rp = t.resource_providers

UNSET = object()  # "field omitted from the request", distinct from None

GENERATION_CHANGED = ("Resource provider's generation already changed. "
                      "Please update the generation and try again.")

# No inventory can grant more than this in one allocation (max_unit's ceiling).
MAX_AMOUNT = 2147483647


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


@dataclass(slots=True)
class Provider:
    id: int
    uuid: str
    name: str
    generation: int
    parent_provider_uuid: str | None
    root_provider_uuid: str
    root_provider_id: int
    parent_provider_id: int | None
    created_at: dt.datetime | None
    updated_at: dt.datetime | None

    @property
    def last_modified(self) -> dt.datetime | None:
        return self.updated_at or self.created_at


@dataclass(slots=True)
class ProviderKey:
    """What a write needs of a provider: which row, and the generation seen."""

    id: int
    uuid: str
    generation: int


@dataclass(slots=True)
class MemberOf:
    """Aggregate filter: every ``required`` set must be hit; nothing in ``forbidden``."""

    required: list[set[str]] = field(default_factory=list)
    forbidden: set[str] = field(default_factory=set)


@dataclass(slots=True)
class TraitFilter:
    """Every ``required`` any-of set must be hit (by id); nothing in ``forbidden``."""

    required: list[set[int]] = field(default_factory=list)
    forbidden: set[int] = field(default_factory=set)


@dataclass(slots=True)
class ProviderFilters:
    name: str | None = None
    uuid: str | None = None
    member_of: MemberOf | None = None
    in_tree: str | None = None
    traits: TraitFilter | None = None
    # resource class id → amount; each provider must fit all of them by itself
    resources: dict[int, int] | None = None


def _select():
    return (
        select(
            _rp.c.id, _rp.c.uuid, _rp.c.name, _rp.c.generation,
            _parent.c.uuid.label("parent_uuid"), _root.c.uuid.label("root_uuid"),
            _rp.c.root_provider_id, _rp.c.parent_provider_id,
            _rp.c.created_at, _rp.c.updated_at,
        )
        .select_from(_rp)
        .outerjoin(_parent, _parent.c.id == _rp.c.parent_provider_id)
        .outerjoin(_root, _root.c.id == _rp.c.root_provider_id)
    )


def _from_row(row) -> Provider:
    return Provider(
        id=row.id, uuid=row.uuid, name=row.name, generation=row.generation,
        parent_provider_uuid=row.parent_uuid, root_provider_uuid=row.root_uuid or row.uuid,
        root_provider_id=row.root_provider_id or row.id, parent_provider_id=row.parent_provider_id,
        created_at=row.created_at, updated_at=row.updated_at,
    )


# Built once, like the statements below: a call only binds values.
_BY_UUID = _select().where(_rp.c.uuid == bindparam("uuid"))
_BY_UUIDS = _select().where(_rp.c.uuid.in_(bindparam("uuids", expanding=True)))


def get(conn: Connection, uuid: str, *, for_update: bool = False) -> Provider | None:
    if not names.storable(uuid, 36):
        return None
    row = conn.execute(_BY_UUID, {"uuid": uuid}).first()
    return _from_row(row) if row else None


def get_many(conn: Connection, uuids: list[str]) -> dict[str, Provider]:
    uuids = sorted({u for u in uuids if names.storable(u, 36)})
    if not uuids:
        return {}
    rows = conn.execute(_BY_UUIDS, {"uuids": uuids})
    return {p.uuid: p for p in map(_from_row, rows)}


# Hot-path statements are built once: building and hashing a statement costs
# about as much Python time as sending it.
_WITH_LINKED: dict[tuple, object] = {}
_SET_ROOT = update(_rp).where(_rp.c.id == bindparam("new_id")).values(root_provider_id=bindparam("new_id"))
_BUMP = (update(_rp).where(_rp.c.id == bindparam("provider_id"), _rp.c.generation == bindparam("seen"))
         .values(generation=bindparam("new_generation"), updated_at=bindparam("now")))


def with_linked(conn: Connection, uuid: str, table, *columns):
    """The provider's id and generation together with ``columns`` of its rows
    in ``table`` (inventories, trait or aggregate links), in ONE statement, so
    that the generation and the rows come from the same snapshot.

    Returns ``(ProviderKey, rows)``, or ``(None, [])`` when there is no such
    provider. A provider without rows in ``table`` yields no rows.
    """
    if not names.storable(uuid, 36):
        return None, []
    key = (table.name, *(c.key for c in columns))
    query = _WITH_LINKED.get(key)
    if query is None:
        query = _WITH_LINKED[key] = (
            select(_rp.c.id.label("provider_id"), _rp.c.generation.label("provider_generation"),
                   table.c.resource_provider_id.label("linked"), *columns)
            .select_from(_rp.outerjoin(table, table.c.resource_provider_id == _rp.c.id))
            .where(_rp.c.uuid == bindparam("uuid")))
    rows = conn.execute(query, {"uuid": uuid}).all()
    if not rows:
        return None, []
    key = ProviderKey(rows[0].provider_id, uuid, rows[0].provider_generation)
    return key, [row for row in rows if row.linked is not None]


def storable_uuid(uuid: str) -> bool:
    """Could a provider have this uuid? (Anything else names no provider.)"""
    return names.storable(uuid, 36)


def missing_error(uuid: str, message: str | None = None) -> errors.NotFound:
    return errors.NotFound(message or f"No resource provider with uuid {uuid} found")


def require(conn: Connection, uuid: str, message: str | None = None) -> Provider:
    provider = get(conn, uuid)
    if provider is None:
        raise errors.NotFound(message or f"No resource provider with uuid {uuid} found")
    return provider


def aggregate_member_clause(rp_id_col, aggregate_uuids: set[str]):
    """``rp_id_col`` is directly associated with one of ``aggregate_uuids``."""
    return rp_id_col.in_(
        select(t.resource_provider_aggregates.c.resource_provider_id)
        .join(t.placement_aggregates,
              t.placement_aggregates.c.id == t.resource_provider_aggregates.c.aggregate_id)
        .where(t.placement_aggregates.c.uuid.in_(aggregate_uuids)))


def trait_member_clause(rp_id_col, trait_ids: set[int]):
    return rp_id_col.in_(
        select(t.resource_provider_traits.c.resource_provider_id)
        .where(t.resource_provider_traits.c.trait_id.in_(trait_ids)))


def usage_subquery():
    """Per (provider, class) sum of allocations."""
    a = t.allocations
    return (select(a.c.resource_provider_id, a.c.resource_class_id,
                   func.sum(a.c.used).label("used"))
            .group_by(a.c.resource_provider_id, a.c.resource_class_id)
            .subquery("usage"))


def capacity_clause(rp_id_col, rc_id: int, amount: int):
    """The admission test of docs/design/placement-model.md#inventory for ``amount`` of class ``rc_id``."""
    if amount > MAX_AMOUNT:
        # Cannot fit anywhere; and as a bound parameter it could overflow
        # the database's integer type.
        return false()
    inv = t.inventories
    usage = usage_subquery()
    return exists(
        select(inv.c.id)
        .select_from(inv.outerjoin(usage, and_(
            usage.c.resource_provider_id == inv.c.resource_provider_id,
            usage.c.resource_class_id == inv.c.resource_class_id)))
        .where(
            inv.c.resource_provider_id == rp_id_col,
            inv.c.resource_class_id == rc_id,
            inv.c.min_unit <= amount,
            inv.c.max_unit >= amount,
            (amount % inv.c.step_size) == 0,
            func.coalesce(usage.c.used, 0) + amount
            <= (inv.c.total - inv.c.reserved) * inv.c.allocation_ratio,
        ))


def list_providers(conn: Connection, filters: ProviderFilters) -> list[Provider]:
    query = _select()
    if filters.name is not None:
        query = query.where(_rp.c.name == filters.name)
    if filters.uuid is not None:
        query = query.where(_rp.c.uuid == filters.uuid)
    if filters.in_tree is not None:
        root_of = select(t.resource_providers.c.root_provider_id).where(
            t.resource_providers.c.uuid == filters.in_tree).scalar_subquery()
        query = query.where(_rp.c.root_provider_id == root_of)
    if filters.member_of is not None:
        for any_of in filters.member_of.required:
            query = query.where(aggregate_member_clause(_rp.c.id, any_of))
        if filters.member_of.forbidden:
            query = query.where(~aggregate_member_clause(_rp.c.id, filters.member_of.forbidden))
    if filters.traits is not None:
        for any_of in filters.traits.required:
            query = query.where(trait_member_clause(_rp.c.id, any_of))
        if filters.traits.forbidden:
            query = query.where(~trait_member_clause(_rp.c.id, filters.traits.forbidden))
    for rc_id, amount in (filters.resources or {}).items():
        query = query.where(capacity_clause(_rp.c.id, rc_id, amount))
    return [_from_row(row) for row in conn.execute(query.order_by(_rp.c.id))]


def _clashes(conn: Connection, name: str, uuid: str) -> list[str]:
    existing = conn.execute(select(_rp.c.name, _rp.c.uuid).where(
        (_rp.c.name == name) | (_rp.c.uuid == uuid))).all()
    found = []
    if any(row.name == name for row in existing):
        found.append(f"Conflicting resource provider name: {name} already exists.")
    if any(row.uuid == uuid for row in existing):
        found.append(f"Conflicting resource provider uuid: {uuid} already exists.")
    return found


def create(conn: Connection, *, name: str, uuid: str | None,
           parent_uuid: str | None) -> Provider:
    uuid = uuid or str(uuidlib.uuid4())
    failure = f'Unable to create resource provider "{name}", {uuid}: Object action create failed because: '
    if parent_uuid is not None and parent_uuid == uuid:
        raise errors.InvalidInput(
            failure + "parent provider UUID cannot be same as UUID. "
            "Please set parent provider UUID to None if there is no parent.")
    if parent_uuid is None:
        return _create_root(conn, name, uuid)
    clashes = _clashes(conn, name, uuid)
    if clashes:
        raise errors.Conflict(", ".join(clashes), code=errors.DUPLICATE_NAME)
    parent = None
    if parent_uuid is not None:
        parent = get(conn, parent_uuid)
        if parent is not None:
            # Shared lock: a concurrent move of the parent's tree would
            # otherwise leave the new child with a stale root.
            parent = _lock_trees(conn, parent, shared=True)[0]
        if parent is None:
            raise errors.InvalidInput(failure + "parent provider UUID does not exist.")
    now = utcnow()
    try:
        # A savepoint, so that after losing a race on the unique name/uuid
        # (or on the parent's deletion) we can still ask what happened.
        with conn.begin_nested():
            new_id = conn.execute(t.resource_providers.insert().values(
                uuid=uuid, name=name, generation=0,
                parent_provider_id=parent.id if parent else None,
                root_provider_id=parent.root_provider_id if parent else None,
                created_at=now, updated_at=None,
            )).inserted_primary_key[0]
    except IntegrityError:
        clashes = _clashes(conn, name, uuid)
        if clashes:
            raise errors.Conflict(", ".join(clashes), code=errors.DUPLICATE_NAME) from None
        if parent is not None and get(conn, parent.uuid) is None:
            raise errors.InvalidInput(failure + "parent provider UUID does not exist.") from None
        raise
    if parent is None:
        conn.execute(update(_rp).where(_rp.c.id == new_id).values(root_provider_id=new_id))
    return require(conn, uuid)


def _create_root(conn: Connection, name: str, uuid: str) -> Provider:
    """A provider without parent, in two statements.

    The insert skips a row that clashes on name or uuid instead of failing,
    so the transaction stays usable to say which one clashed (no savepoint).
    A root has no foreign keys to break: nothing else can make it fail.
    """
    now = utcnow()
    new_id = insert_if_absent(conn, _rp, {
        "uuid": uuid, "name": name, "generation": 0, "parent_provider_id": None,
        "root_provider_id": None, "created_at": now, "updated_at": None})
    if new_id is None:
        clashes = _clashes(conn, name, uuid)
        if clashes:
            raise errors.Conflict(", ".join(clashes), code=errors.DUPLICATE_NAME)
        raise Retry("the resource provider this one clashed with is gone")
    conn.execute(_SET_ROOT, {"new_id": new_id})
    return Provider(id=new_id, uuid=uuid, name=name, generation=0, parent_provider_uuid=None,
                    root_provider_uuid=uuid, root_provider_id=new_id, parent_provider_id=None,
                    created_at=now, updated_at=None)


def descendant_ids(conn: Connection, provider: Provider) -> set[int]:
    """Ids of every provider below ``provider`` (not including it)."""
    rows = conn.execute(select(_rp.c.id, _rp.c.parent_provider_id).where(
        _rp.c.root_provider_id == provider.root_provider_id)).all()
    children: dict[int, list[int]] = {}
    for row in rows:
        if row.parent_provider_id is not None:
            children.setdefault(row.parent_provider_id, []).append(row.id)
    found: set[int] = set()
    stack = [provider.id]
    while stack:
        for child in children.get(stack.pop(), ()):
            if child not in found:
                found.add(child)
                stack.append(child)
    return found


def _lock_trees(conn: Connection, *members: Provider, shared: bool = False) -> list[Provider | None]:
    """Lock the root rows of the trees ``members`` belong to, then re-read them.

    Every change of tree shape (re-parenting, adding a child) takes these
    locks, so such changes serialize per tree. Locks are taken in id order
    (no deadlock between two movers). If a member moved to another tree
    before we got the lock, the unit of work is re-run (``Retry``). A member
    deleted meanwhile comes back as None.
    """
    roots = sorted({m.root_provider_id for m in members})
    conn.execute(select(_rp.c.id).where(_rp.c.id.in_(roots)).order_by(_rp.c.id)
                 .with_for_update(read=shared))
    fresh = [get(conn, m.uuid) for m in members]
    if any(f is not None and f.root_provider_id not in roots for f in fresh):
        raise Retry("provider tree changed while it was being locked")
    return fresh


def _still_there(provider: Provider | None, uuid: str) -> Provider:
    if provider is None:
        raise errors.NotFound(f"No resource provider with uuid {uuid} found")
    return provider


def update_provider(conn: Connection, provider: Provider, *, name: str,
                    parent_uuid: object = UNSET, allow_reparent: bool = False) -> Provider:
    """Rename and/or re-parent. Neither changes the generation
    (docs/design/placement-model.md#generations)."""
    failure = (f"Unable to save resource provider {provider.uuid}: "
               "Object action update failed because: ")
    values: dict = {}
    if name != provider.name:
        taken = conn.execute(select(_rp.c.id).where(_rp.c.name == name, _rp.c.id != provider.id)).first()
        if taken:
            raise errors.Conflict(f"Conflicting resource provider {name} already exists.",
                                  code=errors.DUPLICATE_NAME)
        values["name"] = name
    new_root_id = None
    if parent_uuid is not UNSET and parent_uuid != provider.parent_provider_uuid:
        if parent_uuid is None:
            if not allow_reparent:
                raise errors.InvalidInput(failure + "un-parenting a provider is not currently allowed.")
            provider = _still_there(_lock_trees(conn, provider)[0], provider.uuid)
            values["parent_provider_id"] = None
            new_root_id = provider.id
        else:
            parent = get(conn, parent_uuid)
            if parent is None:
                raise errors.InvalidInput(failure + "parent provider UUID does not exist.")
            # With both trees locked the checks below see a settled picture:
            # two crossing moves cannot both pass the loop check.
            locked, parent = _lock_trees(conn, provider, parent)
            provider = _still_there(locked, provider.uuid)
            if parent is None:
                raise errors.InvalidInput(failure + "parent provider UUID does not exist.")
            if provider.parent_provider_id not in (None, parent.id) and not allow_reparent:
                raise errors.InvalidInput(failure + "re-parenting a provider is not currently allowed.")
            if parent.id == provider.id or parent.id in descendant_ids(conn, provider):
                raise errors.InvalidInput(failure + "creating loop in the provider tree is not allowed.")
            values["parent_provider_id"] = parent.id
            new_root_id = parent.root_provider_id
    if not values:
        return provider
    values["updated_at"] = utcnow()
    try:
        with conn.begin_nested():
            if new_root_id is not None and new_root_id != provider.root_provider_id:
                subtree = descendant_ids(conn, provider) | {provider.id}
                conn.execute(update(_rp).where(_rp.c.id.in_(subtree)).values(root_provider_id=new_root_id))
            conn.execute(update(_rp).where(_rp.c.id == provider.id).values(**values))
    except IntegrityError:
        # Lost a race: somebody took the name (or removed the new parent).
        if "name" in values and conn.execute(select(_rp.c.id).where(
                _rp.c.name == name, _rp.c.id != provider.id)).first():
            raise errors.Conflict(f"Conflicting resource provider {name} already exists.",
                                  code=errors.DUPLICATE_NAME) from None
        if values.get("parent_provider_id") is not None:
            raise errors.InvalidInput(failure + "parent provider UUID does not exist.") from None
        raise
    return require(conn, provider.uuid)


def delete_provider(conn: Connection, uuid: str) -> None:
    provider = get(conn, uuid)
    if provider is None:
        raise errors.NotFound(f"No resource provider with uuid {uuid} found for delete")
    # Take the provider's row lock first: a concurrent allocation write
    # (which compare-and-sets this row) then either committed before us, and
    # its allocations are visible to the check below, or it waits and fails.
    locked = conn.execute(update(_rp).where(_rp.c.id == provider.id)
                          .values(generation=_rp.c.generation + 1))
    if locked.rowcount != 1:
        raise errors.NotFound(f"No resource provider with uuid {uuid} found for delete")
    _check_deletable(conn, provider)
    for table in (t.inventories, t.resource_provider_traits, t.resource_provider_aggregates):
        conn.execute(table.delete().where(table.c.resource_provider_id == provider.id))
    try:
        with conn.begin_nested():
            # A root references itself; clear that before the row goes.
            conn.execute(update(_rp).where(_rp.c.id == provider.id).values(root_provider_id=None))
            conn.execute(_rp.delete().where(_rp.c.id == provider.id))
    except IntegrityError:
        # A child or an allocation appeared after the checks: say which.
        _check_deletable(conn, provider)
        raise


def _check_deletable(conn: Connection, provider: Provider) -> None:
    has_child = conn.execute(select(_rp.c.id).where(
        _rp.c.parent_provider_id == provider.id).limit(1)).first()
    if has_child:
        raise errors.Conflict(
            f"Unable to delete parent resource provider {provider.uuid}: "
            "It has child resource providers.",
            code=errors.PROVIDER_CANNOT_DELETE_PARENT)
    in_use = conn.execute(select(t.allocations.c.id).where(
        t.allocations.c.resource_provider_id == provider.id).limit(1)).first()
    if in_use:
        raise errors.Conflict(
            f"Unable to delete resource provider {provider.uuid}: Resource provider has allocations.",
            code=errors.PROVIDER_INUSE)


def bump_generation(conn: Connection, provider_id: int, seen: int) -> int:
    """Compare-and-set the generation; ``ConcurrentUpdate`` if somebody else won."""
    bump_generations(conn, [(provider_id, seen)])
    return seen + 1


def bump_generations(conn: Connection, seen: list[tuple[int, int]]) -> None:
    """Compare-and-set the generation of every (provider id, generation
    seen) pair, in the order given, in one round trip (an executemany: the
    drivers of all three databases sum its row counts);
    ``ConcurrentUpdate`` if somebody else changed any of them."""
    if not seen:
        return
    now = utcnow()
    params = [{"provider_id": provider_id, "seen": generation, "new_generation": generation + 1, "now": now}
              for provider_id, generation in seen]
    result = conn.execute(_BUMP, params[0] if len(params) == 1 else params)
    if result.rowcount != len(params):
        raise errors.ConcurrentUpdate(
            "resource provider generation conflict: another process changed the provider. "
            "Please retry your request.")


def check_generation(provider: Provider, given: int) -> None:
    """The client's generation must match the stored one (409 otherwise)."""
    if provider.generation != given:
        raise errors.ConcurrentUpdate(
            f"resource provider generation conflict for provider {provider.uuid}: "
            f"actual: {provider.generation}, given: {given}")


def has_nested_providers(conn: Connection) -> bool:
    return conn.execute(select(_rp.c.id).where(_rp.c.parent_provider_id.is_not(None)).limit(1)).first() is not None
