"""Deployment-wide facts a search depends on: are there trees at all, and which
providers share their inventory through aggregates (docs/design/placement-model.md#sharing-providers).

One small query answers "any trees? any sharing providers?"; the sharing
details (normally a handful of storage pools) are only loaded when some exist.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import Connection, Integer, bindparam, exists, func, select

from billeting.placement.candidates import names
from billeting.placement.candidates.model import CandidateRequest
from billeting.placement.candidates.sql import AGG, RP, RPA, RPT, Plan, ids_in


_MINE = RPA.alias("mine")  # a sharing provider's aggregate associations
_THEIRS = RPA.alias("theirs")  # everyone else's, joined on the aggregate


@dataclass(slots=True)
class Sharing:
    """Sharing providers and the trees (anchor roots) each one can serve."""

    root_of: dict[int, int] = field(default_factory=dict)  # provider id -> its own root
    aggregates: dict[int, frozenset[str]] = field(default_factory=dict)
    anchors: dict[int, frozenset[int]] = field(default_factory=dict)  # own root included
    # facts about the anchor roots, loaded only when a request needs them
    anchor_aggregates: dict[int, set[str]] = field(default_factory=dict)
    anchor_traits: dict[int, set[int]] = field(default_factory=dict)

    @property
    def ids(self) -> set[int]:
        return set(self.root_of)


@dataclass(slots=True)
class World:
    has_trees: bool
    sharing: Sharing | None  # None when no provider shares anything
    # The range of provider ids: bounded scans start at a random point in it.
    min_provider_id: int = 0
    max_provider_id: int = 0


_ANY_TREE = exists(select(RP.c.id).where(RP.c.parent_provider_id.is_not(None))).label("has_trees")
_MIN_ID = select(func.min(RP.c.id)).scalar_subquery().label("min_id")
_MAX_ID = select(func.max(RP.c.id)).scalar_subquery().label("max_id")
_ANY_SHARING = exists(select(RPT.c.resource_provider_id)
                      .where(RPT.c.trait_id == bindparam("shares", type_=Integer))).label("has_sharing")
# PostgreSQL: the same round trip also sets, for the rest of this read
# transaction, two planner settings (set_config(..., true) is SET LOCAL):
# * no nested-loop joins: the planner cannot estimate the capacity test (a
#   comparison of two expressions), guesses a third of the rows pass, and on
#   a fleet-wide scan then picks nested loops that re-run the usage
#   sub-select once per provider; hash joins read each set once. Only for
#   unbounded searches (``full_scan``): a search bounded by a limit probes a
#   few rows by index, and hash joins would read whole tables instead.
# * generic plans for prepared statements: the statements are prepared by the
#   driver after a few executions, and planning a dozen semi-joins costs
#   about as much as running them.
_NO_NESTED_LOOPS = func.set_config("enable_nestloop", "off", True).label("nestloop")
_GENERIC_PLANS = func.set_config("plan_cache_mode", "force_generic_plan", True).label("plans")


# The statement of ``_flags`` per shape, built once each (a call then binds only).
_FLAGS: dict[tuple[bool, bool, bool], object] = {}


def _flags(conn: Connection, with_sharing: bool, full_scan: bool):
    postgresql = conn.dialect.name == "postgresql"
    # plan_cache_mode exists from PostgreSQL 12 on
    generic = postgresql and (conn.dialect.server_version_info or (0,)) >= (12,)
    shape = (with_sharing, postgresql and full_scan, generic)
    statement = _FLAGS.get(shape)
    if statement is None:
        columns = [_ANY_TREE, _MIN_ID, _MAX_ID]
        if with_sharing:
            columns.append(_ANY_SHARING)
        if shape[1]:
            columns.append(_NO_NESTED_LOOPS)
        if generic:
            columns.append(_GENERIC_PLANS)
        statement = _FLAGS[shape] = select(*columns)
    return statement


def load(conn: Connection, request: CandidateRequest, *, full_scan: bool = True) -> World:
    shares_id = names.shares_trait_id(conn)
    if shares_id is None:
        row = conn.execute(_flags(conn, False, full_scan)).one()
        return World(bool(row.has_trees), None, row.min_id or 0, row.max_id or 0)
    row = conn.execute(_flags(conn, True, full_scan), {"shares": shares_id}).one()
    sharing = _load_sharing(conn, shares_id, request) if row.has_sharing else None
    return World(bool(row.has_trees), sharing, row.min_id or 0, row.max_id or 0)


def _ids(conn: Connection, col, ids) -> tuple:
    """A statement-ready ``col IN ids`` (sharing facts are rare: no caching)."""
    plan = Plan(conn.dialect.name, build=True)
    clause = ids_in(plan, col, ids)
    return clause, plan.values


def _load_sharing(conn: Connection, shares_id: int, request: CandidateRequest) -> Sharing | None:
    rp, rpt = RP, RPT
    sharing = Sharing()
    for sp_id, root_id in conn.execute(
            select(rp.c.id, rp.c.root_provider_id)
            .select_from(rp.join(rpt, rpt.c.resource_provider_id == rp.c.id))
            .where(rpt.c.trait_id == shares_id)):
        sharing.root_of[sp_id] = root_id
    if not sharing.root_of:
        return None
    mine, theirs, agg, other = _MINE, _THEIRS, AGG, RP
    aggs: dict[int, set[str]] = {sp: set() for sp in sharing.root_of}
    anchors: dict[int, set[int]] = {sp: {root} for sp, root in sharing.root_of.items()}
    scope, values = _ids(conn, mine.c.resource_provider_id, sharing.root_of)
    rows = conn.execute(
        select(mine.c.resource_provider_id, agg.c.uuid, other.c.root_provider_id)
        .select_from(mine.join(agg, agg.c.id == mine.c.aggregate_id)
                     .join(theirs, theirs.c.aggregate_id == mine.c.aggregate_id)
                     .join(other, other.c.id == theirs.c.resource_provider_id))
        .where(scope)
        .distinct(), values)
    for sp_id, agg_uuid, root_id in rows:
        aggs[sp_id].add(agg_uuid)
        anchors[sp_id].add(root_id)
    sharing.aggregates = {sp: frozenset(a) for sp, a in aggs.items()}
    sharing.anchors = {sp: frozenset(a) for sp, a in anchors.items()}
    _load_anchor_facts(conn, sharing, request)
    return sharing


def _load_anchor_facts(conn: Connection, sharing: Sharing, request: CandidateRequest) -> None:
    """Traits (for root_required) and aggregates (for the unsuffixed group's
    root rules) of every root a sharing provider may be anchored at."""
    roots = set().union(*sharing.anchors.values())
    root_traits = request.root_required | request.root_forbidden
    if root_traits:
        rpt = RPT
        facts: dict[int, set[int]] = {r: set() for r in roots}
        scope, values = _ids(conn, rpt.c.resource_provider_id, roots)
        for root_id, trait_id in conn.execute(
                select(rpt.c.resource_provider_id, rpt.c.trait_id)
                .where(scope, rpt.c.trait_id.in_(sorted(root_traits))), values):
            facts[root_id].add(trait_id)
        sharing.anchor_traits = facts
    uuids: set[str] = set()
    for group in request.groups:
        if not group.suffixed:
            uuids.update(group.forbidden_aggregates)
            for any_of in group.member_of:
                uuids.update(any_of)
    if uuids:
        rpa, agg = RPA, AGG
        found: dict[int, set[str]] = {r: set() for r in roots}
        scope, values = _ids(conn, rpa.c.resource_provider_id, roots)
        for root_id, agg_uuid in conn.execute(
                select(rpa.c.resource_provider_id, agg.c.uuid)
                .select_from(rpa.join(agg, agg.c.id == rpa.c.aggregate_id))
                .where(scope, agg.c.uuid.in_(sorted(uuids))), values):
            found[root_id].add(agg_uuid)
        sharing.anchor_aggregates = found
