"""Traits: the global name list (docs/design/placement-model.md#traits,
docs/design/placement-endpoints.md#traits) and each provider's trait set (#provider-traits)."""
from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

from sqlalchemy import (
    Connection,
    DateTime,
    String,
    bindparam,
    exists,
    func,
    literal,
    null,
    select,
    type_coerce,
    union_all,
)
from sqlalchemy.exc import IntegrityError

from billeting.placement import errors, providers
from billeting.placement.provider_links import replace_links
from billeting.placement.providers import utcnow
from billeting.placement.store import tables as t
from billeting.placement.store.upsert import insert_ignoring_duplicates

_traits = t.traits
_rpt = t.resource_provider_traits
_rp = t.resource_providers

MAX_NAME_LENGTH = 255
CUSTOM_PREFIX = "CUSTOM_"
_CUSTOM_RE = re.compile(r"CUSTOM_[A-Z0-9_]+")

@dataclass(slots=True)
class Trait:
    id: int
    name: str
    created_at: dt.datetime | None
    updated_at: dt.datetime | None

    @property
    def last_modified(self) -> dt.datetime | None:
        return self.updated_at or self.created_at


@dataclass(slots=True)
class TraitQuery:
    """Filters of ``GET /traits``; ``None`` means "not filtered on"."""

    names: list[str] | None = None
    prefix: str | None = None
    associated: bool | None = None


@dataclass(slots=True)
class ProviderTraits:
    traits: list[Trait]
    generation: int


def is_custom_name(name: str) -> bool:
    return len(name) <= MAX_NAME_LENGTH and _CUSTOM_RE.fullmatch(name) is not None



def _from_row(row) -> Trait:
    return Trait(id=row.id, name=row.name, created_at=row.created_at, updated_at=row.updated_at)


def _could_exist(name: str) -> bool:
    # Never stored, and PostgreSQL refuses NUL bytes in parameters.
    return len(name) <= MAX_NAME_LENGTH and "\x00" not in name


def list_traits(conn: Connection, query: TraitQuery) -> list[Trait]:
    stmt = select(_traits)
    if query.names is not None:
        names = [n for n in query.names if _could_exist(n)]
        if not names:
            return []
        stmt = stmt.where(_traits.c.name.in_(set(names)))
    if query.prefix:
        # substr, not LIKE: "_" is a LIKE wildcard and SQLite's LIKE ignores case.
        stmt = stmt.where(func.substr(_traits.c.name, 1, len(query.prefix)) == query.prefix)
    if query.associated is not None:
        attached = exists(select(_rpt.c.trait_id).where(_rpt.c.trait_id == _traits.c.id))
        stmt = stmt.where(attached if query.associated else ~attached)
    return [_from_row(r) for r in conn.execute(stmt.order_by(_traits.c.name))]


def get(conn: Connection, name: str) -> Trait | None:
    if not _could_exist(name):
        return None
    row = conn.execute(select(_traits).where(_traits.c.name == name)).first()
    return _from_row(row) if row else None


def require(conn: Connection, name: str) -> Trait:
    found = get(conn, name)
    if found is None:
        raise errors.NotFound(f"No such trait(s): {name}.")
    return found


def ensure(conn: Connection, name: str) -> tuple[Trait, bool]:
    """Create ``name`` unless it exists; ``(trait, created)``. Concurrent
    creators of the same name both succeed, exactly one reports ``created``."""
    inserted = insert_ignoring_duplicates(conn, _traits, [{"name": name, "created_at": utcnow()}])
    return require(conn, name), inserted == 1


def delete(conn: Connection, name: str) -> None:
    trait = require(conn, name)
    if not name.startswith(CUSTOM_PREFIX):
        raise errors.InvalidInput(f"Cannot delete standard trait {name}.")
    in_use = errors.Conflict(f"The trait {name} is in use by a resource provider.")
    if conn.execute(select(_rpt.c.trait_id).where(_rpt.c.trait_id == trait.id).limit(1)).first():
        raise in_use
    try:
        conn.execute(_traits.delete().where(_traits.c.id == trait.id))
    except IntegrityError:
        # A provider picked the trait up after the check above.
        raise in_use from None


def of_provider(conn: Connection, provider_id: int) -> list[Trait]:
    rows = conn.execute(
        select(_traits).join(_rpt, _rpt.c.trait_id == _traits.c.id)
        .where(_rpt.c.resource_provider_id == provider_id).order_by(_traits.c.name))
    return [_from_row(r) for r in rows]


def _state_query():
    """One statement for a trait-set write: the provider's id, generation and
    current trait links (kind "link"), and the rows of the wanted trait names
    (kind "trait"). NULLs are typed so that every backend returns datetimes."""
    blank_time = type_coerce(null(), DateTime)
    links = (select(literal("link").label("kind"), _rp.c.id.label("provider_id"),
                    _rp.c.generation.label("provider_generation"), _rpt.c.trait_id.label("trait_id"),
                    type_coerce(null(), String).label("name"), blank_time.label("created_at"),
                    blank_time.label("updated_at"))
             .select_from(_rp.outerjoin(_rpt, _rpt.c.resource_provider_id == _rp.c.id))
             .where(_rp.c.uuid == bindparam("uuid")))
    wanted = (select(literal("trait"), null(), null(), _traits.c.id, _traits.c.name, _traits.c.created_at,
                     _traits.c.updated_at)
              .where(_traits.c.name.in_(bindparam("names", expanding=True))))
    return union_all(links, wanted)


_STATE = _state_query()


def set_for_provider(conn: Connection, uuid: str, names: list[str], given_generation: int) -> ProviderTraits:
    """Replace a provider's trait set (docs/design/placement-endpoints.md#provider-traits).

    Checks, in order: provider exists (404), generation matches (409), every
    name exists (400). The generation moves only if the set changed.
    """
    wanted = list(dict.fromkeys(names))  # dedupe, keep first-seen order
    provider = None
    current: set[int] = set()
    found: dict[str, Trait] = {}  # whole rows: they are also the answer
    if providers.storable_uuid(uuid):
        searchable = [n for n in wanted if _could_exist(n)]
        for row in conn.execute(_STATE, {"uuid": uuid, "names": searchable}):
            if row.kind == "trait":
                found[row.name] = Trait(id=row.trait_id, name=row.name, created_at=row.created_at,
                                        updated_at=row.updated_at)
                continue
            provider = providers.ProviderKey(row.provider_id, uuid, row.provider_generation)
            if row.trait_id is not None:
                current.add(row.trait_id)
    if provider is None:
        raise providers.missing_error(uuid)
    if provider.generation != given_generation:
        raise errors.ConcurrentUpdate(providers.GENERATION_CHANGED)
    unknown = [n for n in wanted if n not in found]
    if unknown:
        raise errors.InvalidInput(f"No such trait {', '.join(unknown)}")
    wanted_ids = {trait.id for trait in found.values()}
    generation = provider.generation
    if replace_links(conn, _rpt, _rpt.c.trait_id, provider.id, current, wanted_ids, what="traits"):
        generation = providers.bump_generation(conn, provider.id, provider.generation)
    return ProviderTraits(traits=sorted(found.values(), key=lambda trait: trait.name),
                          generation=generation)


def clear_for_provider(conn: Connection, uuid: str) -> None:
    """Remove every trait of a provider; the generation moves only if it had any."""
    provider = providers.require(conn, uuid)
    removed = conn.execute(_rpt.delete().where(_rpt.c.resource_provider_id == provider.id)).rowcount
    if removed:
        providers.bump_generation(conn, provider.id, provider.generation)
