"""Provider ↔ aggregate associations (docs/design/placement-model.md#aggregates,
docs/design/placement-endpoints.md#provider-aggregates).

An aggregate is only a uuid string. It comes into existence the first time a
provider is associated with it and is never deleted. Strings are stored as
the client sent them (Quirk docs/design/placement-quirks.md#q9: a dash-less uuid is a different aggregate
from its dashed form), except that decorated forms too long for the column
(``urn:uuid:…``, ``{…}`` with dashes) are stored in canonical form.
"""
from __future__ import annotations

import uuid as uuidlib
from dataclasses import dataclass

from sqlalchemy import Connection, String, bindparam, literal, null, select, type_coerce, union_all

from billeting.placement import errors, providers
from billeting.placement.provider_links import replace_links
from billeting.placement.providers import utcnow
from billeting.placement.store import tables as t
from billeting.placement.store.upsert import insert_ignoring_duplicates

_aggs = t.placement_aggregates
_rpa = t.resource_provider_aggregates
_rp = t.resource_providers
_UUID_COLUMN_LENGTH = 36

@dataclass(slots=True)
class ProviderAggregates:
    aggregates: list[str]
    generation: int



def stored_form(value: str) -> str:
    """The string kept for an aggregate uuid the schema accepted as UUID-like."""
    if len(value) <= _UUID_COLUMN_LENGTH:
        return value
    text = value.strip().lower()
    for prefix in ("urn:", "uuid:"):
        if text.startswith(prefix):
            text = text[len(prefix):]
    return str(uuidlib.UUID(text.strip("{}").replace("-", "")))


def of_provider(conn: Connection, provider_id: int) -> list[str]:
    rows = conn.execute(
        select(_aggs.c.uuid).join(_rpa, _rpa.c.aggregate_id == _aggs.c.id)
        .where(_rpa.c.resource_provider_id == provider_id).order_by(_aggs.c.id))
    return list(rows.scalars())


_LOOKUP = select(_aggs.c.uuid, _aggs.c.id).where(_aggs.c.uuid.in_(bindparam("uuids", expanding=True)))


def _state_query():
    """One statement for an aggregate-set write: the provider's id, generation
    and current aggregate links (kind "link"), and the ids of the wanted
    aggregates that exist already (kind "aggregate")."""
    links = (select(literal("link").label("kind"), _rp.c.id.label("provider_id"),
                    _rp.c.generation.label("provider_generation"),
                    _rpa.c.aggregate_id.label("aggregate_id"),
                    type_coerce(null(), String).label("uuid"))
             .select_from(_rp.outerjoin(_rpa, _rpa.c.resource_provider_id == _rp.c.id))
             .where(_rp.c.uuid == bindparam("provider")))
    known = (select(literal("aggregate"), null(), null(), _aggs.c.id, _aggs.c.uuid)
             .where(_aggs.c.uuid.in_(bindparam("uuids", expanding=True))))
    return union_all(links, known)


_STATE = _state_query()


def _create_missing(conn: Connection, uuids: list[str], ids: dict[str, int]) -> dict[str, int]:
    """``ids`` completed with the aggregates of ``uuids`` it lacks, created
    now; a concurrent creator of the same uuid is tolerated (its row is
    simply found)."""
    missing = sorted(set(uuids) - ids.keys())  # sorted: same lock order in every writer
    if not missing:
        return ids
    now = utcnow()
    insert_ignoring_duplicates(conn, _aggs, [{"uuid": u, "created_at": now} for u in missing])
    return {**ids, **{row.uuid: row.id for row in conn.execute(_LOOKUP, {"uuids": missing})}}


def set_for_provider(conn: Connection, uuid: str, aggregates: list[str], *,
                     given_generation: int | None) -> ProviderAggregates:
    """Replace a provider's aggregate set.

    ``given_generation`` is ``None`` for the old (< 1.19) form, which neither
    checks nor moves the generation; otherwise it must match and the
    generation moves by one, even if the set is unchanged (docs/design/placement-model.md#generations).
    """
    wanted = list(dict.fromkeys(stored_form(a) for a in aggregates))
    provider = None
    current: set[int] = set()
    ids: dict[str, int] = {}
    if providers.storable_uuid(uuid):
        for row in conn.execute(_STATE, {"provider": uuid, "uuids": wanted}):
            if row.kind == "aggregate":
                ids[row.uuid] = row.aggregate_id
                continue
            provider = providers.ProviderKey(row.provider_id, uuid, row.provider_generation)
            if row.aggregate_id is not None:
                current.add(row.aggregate_id)
    if provider is None:
        raise providers.missing_error(uuid)
    if given_generation is not None and given_generation != provider.generation:
        raise errors.ConcurrentUpdate(providers.GENERATION_CHANGED)
    ids = _create_missing(conn, wanted, ids)
    wanted_ids = {ids[a] for a in wanted}
    replace_links(conn, _rpa, _rpa.c.aggregate_id, provider.id, current, wanted_ids,
                  what="aggregates")
    generation = provider.generation
    if given_generation is not None:
        generation = providers.bump_generation(conn, provider.id, provider.generation)
    return ProviderAggregates(aggregates=wanted, generation=generation)
