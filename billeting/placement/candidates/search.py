"""Find, for every request group, the providers that can serve it, keyed by the
tree (anchor root) they would serve.

All groups are answered by ONE ``UNION ALL`` query whose rows are
``(branch, provider id, provider root id)``: one branch per single-provider
group, and one per requested class for a tree-wide (unsuffixed) group. Sharing
providers are then fanned out in Python to every tree they may serve, with the
root-based rules checked per anchor.
"""
from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from itertools import groupby
from operator import itemgetter

from sqlalchemy import Connection, Integer, literal_column, select, union_all

from billeting.placement.candidates import sql
from billeting.placement.candidates.model import CandidateRequest, ResolvedGroup
from billeting.placement.candidates.world import Sharing, World


@dataclass(slots=True)
class GroupCandidates:
    group: ResolvedGroup
    # unsuffixed group of a deployment with trees or sharing
    # (docs/design/allocation-candidates.md#one-request-group)
    tree_wide: bool
    # rc ids served by separate providers (tree-wide, more than one class)
    split: tuple[int, ...] = ()
    # single-provider group: anchor -> [provider]; split: anchor -> rc -> [provider]
    by_anchor: dict = field(default_factory=dict)
    # split groups with required traits: provider -> its traits among the required ones
    traits_of: dict[int, set[int]] = field(default_factory=dict)


@dataclass(slots=True)
class Found:
    groups: list[GroupCandidates]
    root_of: dict[int, int]  # provider id -> own root id, for every provider seen
    # provider -> parent for the non-root providers of the searched trees, when
    # the trees were known up front and same_subtree needs them (else None)
    parents: dict[int, int] | None = None


def is_tree_wide(group: ResolvedGroup, world: World) -> bool:
    return not group.suffixed and (world.has_trees or world.sharing is not None)


def _parts(group: ResolvedGroup, world: World) -> list[tuple[int | None, dict[int, int], bool]]:
    """(rc or None, resources, own_traits) per query branch of a group: one per
    class for a tree-wide group asking for several classes, else one."""
    if is_tree_wide(group, world) and len(group.resources) > 1:
        return [(rc, {rc: amount}, False) for rc, amount in group.resources.items()]
    return [(None, group.resources, True)]


def _groups_query(plan: sql.Plan, request: CandidateRequest, world: World,
                  anchors: Collection[int] | None, form: sql.Form, with_parents: bool):
    """UNION ALL of one ``(branch, provider, root)`` select per branch, plus
    ``(-1, provider, parent)`` rows of the anchor trees when ``with_parents``."""
    sharing_ids = world.sharing.ids if world.sharing else ()
    p = sql.P
    queries = []
    number = 0
    for group in request.groups:
        tree_wide = is_tree_wide(group, world)
        for _rc, resources, own_traits in _parts(group, world):
            plan.mark("branch", number)
            conds = sql.group_filters(plan, p, group, resources, tree_wide=tree_wide, own_traits=own_traits,
                                      form=form, sharing_ids=sharing_ids)
            conds += sql.root_filter(plan, p.c.root_provider_id, request.root_required,
                                     request.root_forbidden, form=form, sharing_ids=sharing_ids, p=p)
            if anchors is not None:
                conds.append(sql.ids_in(plan, p.c.root_provider_id, anchors))
            if plan.build:
                queries.append(select(literal_column(str(number)).label("branch"), p.c.id,
                                      p.c.root_provider_id).where(*conds))
            number += 1
    if with_parents:
        plan.mark("parents")
        trees = sql.ids_in(plan, p.c.root_provider_id, anchors)
        if plan.build:
            queries.append(select(literal_column("-1"), p.c.id, p.c.parent_provider_id)
                           .where(trees, p.c.parent_provider_id.is_not(None)))
    if not plan.build:
        return None
    return queries[0] if len(queries) == 1 else union_all(*queries)


def collect(conn: Connection, request: CandidateRequest, world: World, *,
            anchors: Collection[int] | None = None, form: sql.Form = sql.SET) -> Found:
    """Candidate providers of every group, restricted to ``anchors`` roots when given."""
    groups = []
    target: list[tuple[int, int | None]] = []  # branch number -> (group index, rc)
    for index, group in enumerate(request.groups):
        tree_wide = is_tree_wide(group, world)
        split = tuple(group.resources) if tree_wide and len(group.resources) > 1 else ()
        groups.append(GroupCandidates(group, tree_wide, split))
        target.extend((index, rc) for rc, _, _ in _parts(group, world))
    with_parents = anchors is not None and bool(request.same_subtree)
    statement, values = sql.prepare("groups", conn.dialect.name,
                                    lambda plan: _groups_query(plan, request, world, anchors, form, with_parents))
    root_of: dict[int, int] = {}
    parents: dict[int, int] | None = {} if with_parents else None
    raw: dict[tuple[int, int | None], list[tuple[int, int]]] = {}
    # Rows come branch by branch: handled a run at a time, without a Python
    # step per row.
    pair = itemgetter(1, 2)
    for branch, run in groupby(conn.execute(statement, values).all(), itemgetter(0)):
        if branch < 0:
            parents.update(map(pair, run))  # the third column is the parent here
            continue
        pairs = list(map(pair, run))
        root_of.update(pairs)
        raw.setdefault(target[int(branch)], []).extend(pairs)
    sharing = world.sharing
    for index, found in enumerate(groups):
        if found.split:
            per_class = {}
            for rc in found.split:
                per_class[rc] = _fan_out(raw.get((index, rc), ()), found, request, sharing)
            common = set.intersection(*(set(m) for m in per_class.values()))
            found.by_anchor = {a: {rc: per_class[rc][a] for rc in found.split} for a in common}
        else:
            found.by_anchor = _fan_out(raw.get((index, None), ()), found, request, sharing)
    for found in groups:
        if found.split and found.group.required:
            _load_traits(conn, found)
    return Found(groups, root_of, parents)


def _fan_out(rows, found: GroupCandidates, request: CandidateRequest,
             sharing: Sharing | None) -> dict[int, list[int]]:
    """anchor -> providers, sorted, with sharing providers offered to every tree they serve."""
    by_anchor: dict[int, list[int]] = {}
    if sharing is None:
        for provider_id, root_id in sorted(rows):
            by_anchor.setdefault(root_id, []).append(provider_id)
        return by_anchor
    for provider_id, root_id in sorted(rows):
        if sharing is None or provider_id not in sharing.root_of:
            by_anchor.setdefault(root_id, []).append(provider_id)
            continue
        group = found.group
        # A tree-wide group confined by in_tree takes nothing from other trees.
        if found.tree_wide and group.in_tree is not None:
            candidates = (root_id,)
        else:
            candidates = sorted(sharing.anchors[provider_id])
        for anchor in candidates:
            if _sharing_anchor_ok(provider_id, anchor, found, request, sharing):
                by_anchor.setdefault(anchor, []).append(provider_id)
    return by_anchor


def _sharing_anchor_ok(provider_id: int, anchor: int, found: GroupCandidates,
                       request: CandidateRequest, sharing: Sharing) -> bool:
    """The root rules SQL skipped for sharing providers, for one (provider, anchor)."""
    if request.root_required or request.root_forbidden:
        traits = sharing.anchor_traits.get(anchor, set())
        if not request.root_required <= traits or traits & request.root_forbidden:
            return False
    if not found.tree_wide:
        return True
    group = found.group
    root_aggs = sharing.anchor_aggregates.get(anchor, set())
    if group.forbidden_aggregates and root_aggs & group.forbidden_aggregates:
        return False
    if group.member_of:
        own = sharing.aggregates[provider_id]
        if not all(own & any_of for any_of in group.member_of):
            # Only the provider's own tree may lend it the root's aggregates.
            if anchor != sharing.root_of[provider_id]:
                return False
            if not all(root_aggs & any_of for any_of in group.member_of):
                return False
    return True


def _load_traits(conn: Connection, found: GroupCandidates) -> None:
    providers = {p for per_class in found.by_anchor.values() for ps in per_class.values() for p in ps}
    wanted = set().union(*found.group.required)
    traits_of: dict[int, set[int]] = {}

    def query(plan: sql.Plan):
        rpt = sql.RPT
        scope = sql.ids_in(plan, rpt.c.resource_provider_id, providers)
        traits = plan.bind_list(sorted(wanted), Integer)
        if plan.build:
            return select(rpt.c.resource_provider_id, rpt.c.trait_id).where(scope, rpt.c.trait_id.in_(traits))

    if providers:
        statement, values = sql.prepare("split_traits", conn.dialect.name, query)
        for provider_id, trait_id in conn.execute(statement, values).all():
            traits_of.setdefault(provider_id, set()).add(trait_id)
    found.traits_of = traits_of


def _window_query(plan: sql.Plan, request: CandidateRequest, world: World, after: int, upto: int, batch: int):
    root, p = sql.ROOT, sql.P
    form = sql.probe_form(plan.dialect)
    start, end = plan.bind(after, Integer), plan.bind(upto, Integer)
    count = plan.bind(batch, Integer)
    scanned = None
    if plan.build:
        # The LIMIT inside the subquery fences the filters off from it: they
        # run on this batch of roots only, whatever plan the database picks
        # (on a freshly loaded fleet without statistics it would otherwise
        # happily filter every root and sort afterwards).
        scanned = (select(root.c.id).where(root.c.parent_provider_id.is_(None), root.c.id > start,
                                          root.c.id <= end)
                   .order_by(root.c.id).limit(count).subquery("scanned"))
    anchor = scanned.c.id if plan.build else None
    conds = sql.root_filter(plan, anchor, request.root_required, request.root_forbidden, form=form)
    for group in request.groups:
        tree_wide = is_tree_wide(group, world)
        for _rc, resources, own_traits in _parts(group, world):
            inner = sql.group_filters(plan, p, group, resources, tree_wide=tree_wide, own_traits=own_traits,
                                      form=form)
            if plan.build:
                conds.append(sql.exists_(select(p.c.id).where(p.c.root_provider_id == anchor, *inner), form))
    if not plan.build:
        return None
    return select(anchor, sql.both(conds).label("ok")).order_by(anchor)


def window_of_anchors(conn: Connection, request: CandidateRequest, world: World, *,
                      after: int, upto: int, batch: int) -> tuple[list[int], int | None]:
    """Look at the next ``batch`` roots by id in ``(after, upto]``: return those
    whose tree has, for every group, some provider passing that group's
    per-provider filters, and the last root looked at (None when there were
    no more roots).

    Necessary but not sufficient (traits spread over several providers, policy,
    same_subtree and re-checks come later), so callers keep asking for more
    batches until they have enough results. Only valid without sharing
    providers, which could serve trees they are not part of.
    """
    statement, values = sql.prepare("window", conn.dialect.name,
                                    lambda plan: _window_query(plan, request, world, after, upto, batch))
    rows = conn.execute(statement, values).all()
    if not rows:
        return [], None
    last = rows[-1][0] if len(rows) == batch else None
    return [root_id for root_id, ok in rows if ok], last


def _parents_query(plan: sql.Plan, anchors: Collection[int]):
    p = sql.P
    scope = sql.ids_in(plan, p.c.root_provider_id, anchors)
    if not plan.build:
        return None
    return select(p.c.id, p.c.parent_provider_id).where(scope, p.c.parent_provider_id.is_not(None))


def parents_of(conn: Connection, anchors: Collection[int]) -> dict[int, int]:
    """provider id -> parent id for every non-root provider in the ``anchors`` trees."""
    if not anchors:
        return {}
    statement, values = sql.prepare("parents", conn.dialect.name, lambda plan: _parents_query(plan, anchors))
    return {provider_id: parent_id for provider_id, parent_id in conn.execute(statement, values).all()}
