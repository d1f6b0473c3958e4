"""Provider summaries (docs/design/allocation-candidates.md#answer) for the
providers a result touches, and the facts the consolidation re-check needs. A fixed number of set-based queries,
whatever the number of providers.

On PostgreSQL and SQLite the database writes each provider's ``resources``
object and ``traits`` list as JSON text (string aggregation), and they travel
as ``orjson.Fragment``: a summary then costs one short row instead of one row
and a few Python objects per inventory and per trait, which is most of the
work of a large answer. This is safe without escaping because resource class
and trait names are restricted to ``[A-Z0-9_]``. MySQL caps aggregated strings
(``group_concat_max_len``), so there the rows are assembled in Python.
"""
from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from sqlalchemy import (
    BigInteger,
    Connection,
    Float,
    Integer,
    cast,
    func,
    literal_column,
    null,
    select,
    String,
    literal,
    union_all,
)
import orjson

from billeting.placement.candidates import names, sql, summary_cache
from billeting.placement.candidates.combine import Fact
from billeting.placement.candidates.model import EngineCapacity, EngineSummary
from billeting.placement.store import tables as t


# A rough guess of a tree's size, to tell from a number of roots whether a
# summary scope is large enough for the cache.
_PROVIDERS_PER_TREE = 4


@dataclass(slots=True)
class Summaries:
    by_id: dict[int, EngineSummary]
    uuid_of: dict[int, str]


def _in_scope(plan: sql.Plan, col, roots: sql.IdSet | None, provider_ids: sql.IdSet | None):
    """``col`` is a provider in the ``roots`` trees, or one of ``provider_ids``."""
    if roots is None:
        plan.mark("ids")
        return sql.ids_in(plan, col, provider_ids)
    plan.mark("roots")
    p = sql.SCOPE
    trees = sql.ids_in(plan, p.c.root_provider_id, roots)
    return col.in_(select(p.c.id).where(trees)) if plan.build else None


def _providers_query(plan: sql.Plan, roots, provider_ids, for_cache: bool = False):
    p = sql.SCOPE
    plan.mark("roots" if roots is not None else "ids", for_cache)
    if roots is not None:
        scope = sql.ids_in(plan, p.c.root_provider_id, roots)
    else:
        scope = sql.ids_in(plan, p.c.id, provider_ids)
    if plan.build:
        columns = (summary_cache.row_columns(p, plan.dialect) if for_cache
                   else (p.c.id, p.c.uuid, p.c.parent_provider_id, p.c.root_provider_id))
        return select(*columns).where(scope)


def _details_query(plan: sql.Plan, roots, provider_ids, classes, with_traits: bool):
    """Inventories with usage (kind 0) and, when wanted, traits (kind 1) of the
    providers in scope, in one round trip."""
    inv, rpt = sql.INV, sql.RPT
    scope = _in_scope(plan, inv.c.resource_provider_id, roots, provider_ids)
    plan.mark("classes", classes is not None, with_traits)
    wanted = plan.bind_list(sorted(classes), Integer) if classes is not None else None
    trait_scope = _in_scope(plan, rpt.c.resource_provider_id, roots, provider_ids) if with_traits else None
    if not plan.build:
        return None
    inventories = (select(literal_column("0").label("kind"), inv.c.resource_provider_id,
                          inv.c.resource_class_id, inv.c.total, inv.c.reserved, inv.c.allocation_ratio,
                          inv.c.used)
                   .where(scope))
    if wanted is not None:
        inventories = inventories.where(inv.c.resource_class_id.in_(wanted))
    if not with_traits:
        return inventories
    nothing = null()
    traits = select(literal_column("1"), rpt.c.resource_provider_id, rpt.c.trait_id, cast(nothing, BigInteger),
                    cast(nothing, BigInteger), cast(nothing, Float), cast(nothing, BigInteger)).where(trait_scope)
    return union_all(inventories, traits)


def _capacity_text(dialect: str, inv):
    """``int((total - reserved) * allocation_ratio)`` as text (truncating, like Python)."""
    capacity = (inv.c.total - inv.c.reserved) * inv.c.allocation_ratio
    if dialect == "postgresql":
        return cast(cast(func.trunc(capacity), BigInteger), String)
    return cast(cast(capacity, Integer), String)  # SQLite's CAST truncates toward zero


def _json_query(plan: sql.Plan, roots, provider_ids, classes, with_traits: bool, with_providers: bool):
    """(kind, provider, text, parent, root): kind 0 the body of the
    ``resources`` object, kind 1 the body of the ``traits`` list, kind 2
    (``with_providers``) the provider itself with its uuid."""
    inv, rpt, rc, tr = sql.INV, sql.RPT, t.resource_classes, t.traits
    scope = _in_scope(plan, inv.c.resource_provider_id, roots, provider_ids)
    plan.mark("json", classes is not None, with_traits)
    wanted = plan.bind_list(sorted(classes), Integer) if classes is not None else None
    trait_scope = _in_scope(plan, rpt.c.resource_provider_id, roots, provider_ids) if with_traits else None
    plan.mark("providers", with_providers)
    provider_scope = None
    if with_providers:
        provider_scope = (sql.ids_in(plan, sql.SCOPE.c.root_provider_id, roots) if roots is not None
                          else sql.ids_in(plan, sql.SCOPE.c.id, provider_ids))
    if not plan.build:
        return None
    no_id = cast(null(), Integer)
    entry = (literal('"') + rc.c.name + literal('":{"capacity":') + _capacity_text(plan.dialect, inv)
             + literal(',"used":') + cast(inv.c.used, String) + literal("}"))
    resources = (select(literal_column("0").label("kind"), inv.c.resource_provider_id,
                        func.aggregate_strings(entry, ","), no_id, no_id)
                 .select_from(inv.join(rc, rc.c.id == inv.c.resource_class_id))
                 .where(scope)
                 .group_by(inv.c.resource_provider_id))
    if wanted is not None:
        resources = resources.where(inv.c.resource_class_id.in_(wanted))
    parts = [resources]
    if with_traits:
        parts.append(select(literal_column("1"), rpt.c.resource_provider_id,
                            func.aggregate_strings(literal('"') + tr.c.name + literal('"'), ","), no_id, no_id)
                     .select_from(rpt.join(tr, tr.c.id == rpt.c.trait_id))
                     .where(trait_scope)
                     .group_by(rpt.c.resource_provider_id))
    if with_providers:
        p = sql.SCOPE
        parts.append(select(literal_column("2"), p.c.id, p.c.uuid, p.c.parent_provider_id, p.c.root_provider_id)
                     .where(provider_scope))
    return parts[0] if len(parts) == 1 else union_all(*parts)


def _json_summaries(conn: Connection, known, roots, provider_ids, classes, with_traits: bool):
    """(provider rows, resources, traits), everything in one statement."""
    statement, values = sql.prepare(
        "summary_json", conn.dialect.name,
        lambda plan: _json_query(plan, roots, provider_ids, classes, with_traits, known is None))
    rows = known if known is not None else []
    resource_text, trait_text = {}, {}
    for kind, provider_id, text, parent_id, root_id in conn.execute(statement, values).all():
        if kind == 0:
            resource_text[provider_id] = orjson.Fragment(f"{{{text}}}")
        elif kind == 1:
            trait_text[provider_id] = orjson.Fragment(f"[{text}]")
        else:
            rows.append((provider_id, text, parent_id, root_id))
    empty_object, empty_list = orjson.Fragment(b"{}"), orjson.Fragment(b"[]")
    resources = {row[0]: resource_text.get(row[0], empty_object) for row in rows}
    traits = {row[0]: trait_text.get(row[0], empty_list) for row in rows}
    return rows, resources, traits


def _row_details(conn: Connection, rows, roots, provider_ids, classes, with_traits: bool):
    statement, values = sql.prepare("summary_details", conn.dialect.name,
                                    lambda plan: _details_query(plan, roots, provider_ids, classes, with_traits))
    details = conn.execute(statement, values).all()
    inventories = [row for row in details if not row[0]]
    trait_pairs = [(row[1], row[2]) for row in details if row[0]]
    rc_name = names.rc_names(conn, {row[2] for row in inventories})
    trait_name = names.trait_names(conn, {trait_id for _, trait_id in trait_pairs}) if trait_pairs else {}
    resources: dict[int, dict[str, EngineCapacity]] = {row[0]: {} for row in rows}
    for _, provider_id, rc_id, total, reserved, ratio, used in inventories:
        resources[provider_id][rc_name[rc_id]] = {"capacity": int((total - reserved) * ratio), "used": int(used)}
    traits: dict[int, list[str]] = {row[0]: [] for row in rows}
    for provider_id, trait_id in trait_pairs:
        traits[provider_id].append(trait_name[trait_id])
    return resources, traits


def load(conn: Connection, *, roots: Collection[int] | None = None,
         provider_ids: Collection[int] | None = None, classes: Collection[int] | None = None,
         with_traits: bool = True, known: list | None = None) -> Summaries:
    """Summaries of every provider in the ``roots`` trees, or of exactly
    ``provider_ids``. ``classes`` limits the resources listed (mv < 1.27).
    ``known`` rows (laid out as ``summary_cache.row_columns``) of exactly the
    providers to summarize spare the query for them.

    Large scopes are served through ``summary_cache``; small ones with one
    query (two without ``known``)."""
    dialect = conn.dialect.name
    if known is not None:
        if len(known) >= summary_cache.MIN_SCOPE:
            return Summaries(*summary_cache.summarize(conn, known, classes))
        roots, provider_ids = None, sql.IdSet(row[0] for row in known)
        known = [row[:4] for row in known]
    else:
        roots = sql.IdSet(roots) if roots is not None else None
        provider_ids = sql.IdSet(provider_ids or ()) if roots is None else None
        in_scope = len(roots) * _PROVIDERS_PER_TREE if roots is not None else len(provider_ids)
        if in_scope >= summary_cache.MIN_SCOPE:
            statement, values = sql.prepare("summary_providers", dialect,
                                            lambda plan: _providers_query(plan, roots, provider_ids, True))
            rows = conn.execute(statement, values).all()
            return Summaries(*summary_cache.summarize(conn, rows, classes))
    if dialect in ("postgresql", "sqlite"):
        rows, resources, traits = _json_summaries(conn, known, roots, provider_ids, classes, with_traits)
    else:
        rows = known
        if rows is None:
            statement, values = sql.prepare("summary_providers", dialect,
                                            lambda plan: _providers_query(plan, roots, provider_ids))
            rows = conn.execute(statement, values).all()
        resources, traits = _row_details(conn, rows, roots, provider_ids, classes, with_traits)
    uuid_of = {row[0]: row[1] for row in rows}

    by_id = {}
    for provider_id, uuid, parent_id, root_id in rows:
        by_id[provider_id] = EngineSummary(
            uuid=uuid, parent_uuid=uuid_of.get(parent_id) if parent_id is not None else None,
            root_uuid=uuid_of.get(root_id, uuid), resources=resources[provider_id],
            traits=traits[provider_id])
    return Summaries(by_id, uuid_of)


def uuids(conn: Connection, provider_ids: Collection[int]) -> dict[int, str]:
    if not provider_ids:
        return {}

    def query(plan: sql.Plan):
        scope = sql.ids_in(plan, sql.RP.c.id, provider_ids)
        if plan.build:
            return select(sql.RP.c.id, sql.RP.c.uuid).where(scope)

    statement, values = sql.prepare("uuids", conn.dialect.name, query)
    return {provider_id: uuid for provider_id, uuid in conn.execute(statement, values).all()}


def facts(conn: Connection, provider_ids: Collection[int], classes: Collection[int]) -> dict[tuple[int, int], Fact]:
    """Capacity, usage and max_unit of the given (provider, class) pairs."""
    if not provider_ids or not classes:
        return {}

    def query(plan: sql.Plan):
        inv = sql.INV
        scope = sql.ids_in(plan, inv.c.resource_provider_id, provider_ids)
        wanted = plan.bind_list(sorted(classes), Integer)
        if not plan.build:
            return None
        return select(inv.c.resource_provider_id, inv.c.resource_class_id, inv.c.total, inv.c.reserved,
                      inv.c.allocation_ratio, inv.c.max_unit, inv.c.used).where(scope, inv.c.resource_class_id.in_(wanted))

    statement, values = sql.prepare("facts", conn.dialect.name, query)
    return {(p, rc): Fact(int((total - reserved) * ratio), int(u), max_unit)
            for p, rc, total, reserved, ratio, max_unit, u in conn.execute(statement, values).all()}
