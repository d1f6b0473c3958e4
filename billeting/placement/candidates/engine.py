"""The candidates engine: ``find(conn, request) -> CandidateResult``.

Three strategies, all with the same results
(docs/design/allocation-candidates.md#algorithm), chosen by what the request and the deployment allow:

* direct: one group whose every solution is a single provider and no sharing
  providers anywhere. One query yields the answer; a ``limit`` becomes a SQL
  ``LIMIT`` (or ``ORDER BY random() LIMIT`` when randomizing).
* windowed: a ``limit`` (or ``max_allocation_candidates``) without sharing
  providers. Trees are taken in id order, a window at a time, by a query that
  stops at the window size; only those trees are searched and combined, and
  more windows are fetched only while results are missing. The work follows
  the limit, not the fleet.
* full: everything else (no limit, randomized sampling, sharing providers,
  a cap with breadth-first generation).
  Each group is one set-based branch of a single UNION ALL query over the
  whole fleet; combination stops early once enough results exist.

Summaries are then loaded for the trees (or, below 1.29, the providers) that
the returned requests use.
"""
from __future__ import annotations

import random
from operator import itemgetter
from collections.abc import Iterator

from sqlalchemy import Boolean, Connection, Integer, String, cast, func, literal_column, null, select, union_all

from billeting.placement.candidates import (
    names, search, sql, summaries, summary_cache, window_rows, world as world_mod,
)
from billeting.placement.candidates.combine import Combiner, Pick, dedupe_key, shared_pairs
from billeting.placement.candidates.model import (
    CandidateRequest,
    CandidateResult,
    EngineAllocation,
    SingleProviderRequests,
    empty_result,
)
from billeting.placement.candidates.world import World


def find(conn: Connection, request: CandidateRequest) -> CandidateResult:
    if any(amount > sql.MAX_AMOUNT for g in request.groups for amount in g.resources.values()):
        return empty_result()  # larger than any inventory can hold
    needed = _needed(request)
    # Without a bound the fleet is scanned with set-based joins (see world.load).
    world = world_mod.load(conn, request, full_scan=needed is None)
    if _is_direct(request, world):
        return _direct(conn, request, world, needed)
    # Breadth-first generation under a cap goes round the whole fleet's trees.
    spread = request.breadth_first and request.max_candidates >= 0
    if needed is not None and world.sharing is None and not spread:
        picks, root_of = _windowed(conn, request, world, needed)
    else:
        picks, root_of = _full(conn, request, world, needed)
    picks = _apply_limit(request, picks)
    if not picks:
        return empty_result()
    return _build(conn, request, picks, root_of)


def _needed(request: CandidateRequest) -> int | None:
    """How many distinct results to generate before stopping (None = all)."""
    cap = request.max_candidates if request.max_candidates >= 0 else None
    if request.randomize or request.limit is None:
        return cap
    return request.limit if cap is None else min(cap, request.limit)


def _apply_limit(request: CandidateRequest, picks: list) -> list:
    if request.randomize:
        if request.limit is not None and request.limit < len(picks):
            return random.sample(picks, request.limit)
        picks = list(picks)
        random.shuffle(picks)
        return picks
    if request.limit is not None:
        return picks[:request.limit]
    return picks


# --- direct ---------------------------------------------------------------------

def _is_direct(request: CandidateRequest, world: World) -> bool:
    if len(request.groups) != 1 or world.sharing is not None:
        return False
    group = request.groups[0]
    if not group.resources:
        return False
    return not search.is_tree_wide(group, world) or len(group.resources) == 1


def _direct(conn: Connection, request: CandidateRequest, world: World, needed: int | None) -> CandidateResult:
    group = request.groups[0]
    tree_wide = search.is_tree_wide(group, world)
    sample = request.randomize and request.limit is not None and request.max_candidates < 0
    # Probing row by row pays off only when the scan stops early, except on
    # SQLite: there a probe per provider into the (provider, class) inventory
    # index beats a set per class and a join (it has no hash join).
    bounded = needed is not None and not sample
    probe = bounded or (conn.dialect.name == "sqlite" and not sample)
    form = sql.probe_form(conn.dialect.name) if probe else sql.SET
    random_order = func.rand() if conn.dialect.name == "mysql" else func.random()

    # Capacity over a batch as one set-based pass (sql.serving_window) rather
    # than a correlated probe per class and row: PostgreSQL and SQLite. MySQL
    # keeps the probes (it may evaluate a CTE once per reference).
    set_capacity = bounded and conn.dialect.name != "mysql"
    flat_summaries = not (world.has_trees and request.nested_aware)

    def query(plan: sql.Plan, after: int = 0, upto: int = 0, batch: int = 0, whole: bool = False):
        plan.mark("direct", sample, bounded, set_capacity, whole)
        scanned = None
        if bounded:
            # Look at one batch of providers by id; the LIMIT inside the
            # subquery keeps the filters to that batch whatever the plan.
            low, high = plan.bind(after, Integer), plan.bind(upto, Integer)
            count = plan.bind(batch, Integer)
            if plan.build:
                scanned = (select(sql.P).where(sql.P.c.id > low, sql.P.c.id <= high)
                           .order_by(sql.P.c.id).limit(count))
                scanned = scanned.cte("scanned") if set_capacity else scanned.subquery("scanned")
        p = scanned if scanned is not None else sql.P  # (the values-only pass needs no real columns)
        conds = sql.group_filters(plan, p, group, group.resources, tree_wide=tree_wide, own_traits=True,
                                  form=form, capacity=not set_capacity)
        conds += sql.root_filter(plan, p.c.root_provider_id, request.root_required, request.root_forbidden,
                                 form=form)
        if whole:
            # The batch read whole: capacity is tested in Python (window_rows).
            columns = summary_cache.row_columns(p, plan.dialect) if plan.build else ()
            return window_rows.statement(plan, scanned, low, columns, sql.both(conds) if plan.build else None,
                                         request.summary_traits)
        serving = None
        if set_capacity:
            # The batch is every provider id in (after, its last id].
            last = select(func.max(scanned.c.id)).scalar_subquery() if plan.build else None
            serving = sql.serving_window(plan, low, last, group.resources)
        count = plan.bind(min(request.limit, sql.MAX_AMOUNT), Integer) if sample else None
        if not plan.build:
            return None
        columns = summary_cache.row_columns(p, plan.dialect)
        if set_capacity:
            # Kind 0: the batch's providers with the other filters' verdict;
            # kind 1: one row, the ids among them with the capacity as one
            # comma-separated text (joined in Python, so no join order is
            # left to a generic plan's guesses, and a thousand ids cost one
            # row to send and decode).
            scanned_part = select(literal_column("0").label("kind"), *columns, sql.both(conds).label("ok"),
                                  cast(null(), String).label("serving"))
            serving = serving.subquery("serving")
            rp_text = cast(serving.c.rp, String)
            joined = (func.string_agg(rp_text, literal_column("','")) if plan.dialect == "postgresql"
                      else func.group_concat(rp_text, literal_column("','")))
            serving_part = select(literal_column("1"), *(cast(null(), c.type) for c in columns),
                                  cast(null(), Boolean), cast(joined, String))
            return union_all(scanned_part, serving_part)
        if bounded:
            return select(*columns, sql.both(conds).label("ok")).order_by(p.c.id)
        statement = select(*columns).where(*conds)
        if sample:
            # A uniform sample of the whole result, drawn by the database.
            return statement.order_by(random_order).limit(count)
        return statement.order_by(p.c.id)

    # Small batches of a flat answer are read whole and summarized from the
    # same rows (window_rows); ``window`` keeps what they returned.
    window = window_rows.new_window()
    if set_capacity:
        def fetch(after: int, upto: int, batch: int, _wanted: int):
            # (answers the summary cache serves keep the joined form: their
            # summaries are read through the cache anyway)
            if flat_summaries and batch <= window_rows.MAX_WINDOW and batch < summary_cache.MIN_SCOPE:
                statement, values = sql.prepare("direct", conn.dialect.name,
                                                lambda plan: query(plan, after, upto, batch, whole=True))
                scanned_rows = window_rows.split(conn, conn.execute(statement, values).all(), window, _ROW_WIDTH)
                last = scanned_rows[-1][0] if len(scanned_rows) == batch else None
                return [row[:-1] for row in scanned_rows
                        if row[-1] and window_rows.serves(window, row[0], group.resources)], last
            statement, values = sql.prepare("direct", conn.dialect.name,
                                            lambda plan: query(plan, after, upto, batch))
            scanned_rows = conn.execute(statement, values).all()
            # The one kind-1 row (an aggregate without GROUP BY), normally last.
            at = next(i for i in range(len(scanned_rows) - 1, -1, -1) if scanned_rows[i][0] == 1)
            joined = scanned_rows.pop(at)[-1]
            serving = set(map(int, joined.split(","))) if joined else set()
            scanned_rows.sort(key=itemgetter(1))  # (already in id order, in practice)
            last = scanned_rows[-1][1] if len(scanned_rows) == batch else None
            return [row[1:-2] for row in scanned_rows if row[-2] and row[1] in serving], last

        rows = _scan(fetch, needed, world)
    elif bounded:
        def fetch(after: int, upto: int, batch: int, _wanted: int):
            statement, values = sql.prepare("direct", conn.dialect.name,
                                            lambda plan: query(plan, after, upto, batch))
            scanned_rows = conn.execute(statement, values).all()
            last = scanned_rows[-1][0] if len(scanned_rows) == batch else None
            return [row[:-1] for row in scanned_rows if row[-1]], last

        rows = _scan(fetch, needed, world)
    else:
        statement, values = sql.prepare("direct", conn.dialect.name, query)
        rows = conn.execute(statement, values).all()
    if not sample:
        rows = _apply_limit(request, rows)
    if not rows:
        return empty_result()
    if flat_summaries:
        # Every tree is the provider itself, or only used providers are shown.
        if len(rows) < summary_cache.MIN_SCOPE and all(row[0] in window.stock for row in rows):
            by_id = window_rows.summaries(conn, window, rows, _summary_classes(request), request.summary_traits)
            return _direct_result(conn, group, rows, by_id)
        found = summaries.load(conn, known=rows, classes=_summary_classes(request),
                               with_traits=request.summary_traits)
    else:
        found = _summaries(conn, request, {row[3] for row in rows}, {row[0] for row in rows})
    return _direct_result(conn, group, rows, found.by_id)


def _direct_result(conn: Connection, group, rows: list, by_id: dict) -> CandidateResult:
    if not rows:
        return empty_result()
    rc_name = names.rc_names(conn, group.resources)
    # Every request allocates the same amounts: share one dict between them.
    resources = {rc_name[rc]: amount for rc, amount in group.resources.items()}
    requests = SingleProviderRequests(group.suffix, resources, [row[1] for row in rows])
    return CandidateResult(requests, list(by_id.values()))


# --- bounded scans ---------------------------------------------------------------

# Values of a provider row (summary_cache.row_columns).
_ROW_WIDTH = 6

# Batches of rows looked at by the bounded scans: as many as results are
# needed (most match), doubling while too few matched.
_MAX_BATCH = 65536
_ABOVE_ALL_IDS = 2 ** 31 - 1


def _first_batch(needed: int) -> int:
    return max(1, min(needed, _MAX_BATCH))


def _next_batch(batch: int) -> int:
    return min(batch * 2, _MAX_BATCH)


def _scan_start(world: World) -> int:
    # (an id below the lowest one starts at the beginning)
    return random.randint(max(world.min_provider_id - 1, 0), max(world.max_provider_id, 0))


def _scan(fetch, needed: int, world: World) -> list:
    """Walk the id space in batches until ``needed`` results are found.

    ``fetch(after, upto, batch, wanted)`` looks at the next ``batch`` ids in
    ``(after, upto]`` and returns (results, last id looked at, or None once the
    range is exhausted). The walk starts at a random id and wraps around, so
    schedulers asking the same question at once get different hosts instead
    of all racing to claim the first one (a limit without randomization
    promises an arbitrary subset, docs/design/allocation-candidates.md#algorithm).
    """
    start = _scan_start(world)
    found: list = []
    for after, upto in ((start, _ABOVE_ALL_IDS), (0, start)):
        batch = _first_batch(needed)
        while len(found) < needed:
            results, last = fetch(after, upto, batch, needed - len(found))
            found.extend(results)
            if last is None:
                break
            after, batch = last, _next_batch(batch)
    return found[:needed]


# --- windowed and full ----------------------------------------------------------

def _windowed(conn: Connection, request: CandidateRequest, world: World,
              needed: int) -> tuple[list[Pick], dict[int, int]]:
    root_of: dict[int, int] = {}

    def fetch(after: int, upto: int, batch: int, wanted: int):
        anchors, last = search.window_of_anchors(conn, request, world, after=after, upto=upto, batch=batch)
        picks: list[Pick] = []
        if anchors:
            found = search.collect(conn, request, world, anchors=anchors,
                                   form=sql.probe_form(conn.dialect.name))
            root_of.update(found.root_of)
            combiner = _combiner(conn, request, found, anchors)
            _enumerate(combiner, anchors, picks, None, wanted)
        return picks, last

    return _scan(fetch, needed, world), root_of


def _full(conn: Connection, request: CandidateRequest, world: World,
          needed: int | None) -> tuple[list[Pick], dict[int, int]]:
    found = search.collect(conn, request, world, form=sql.SET)
    anchors = Combiner(request, found.groups, {}, {}, {}).anchors()
    combiner = _combiner(conn, request, found, anchors)
    picks: list[Pick] = []
    _enumerate(combiner, anchors, picks, set() if world.sharing is not None else None, needed,
               request.breadth_first)
    return picks, found.root_of


def _combiner(conn: Connection, request: CandidateRequest, found: search.Found, anchors) -> Combiner:
    parents = found.parents
    if parents is None:
        parents = search.parents_of(conn, anchors) if request.same_subtree else {}
    providers, classes = shared_pairs(found.groups)
    facts = summaries.facts(conn, providers, classes) if providers else {}
    return Combiner(request, found.groups, found.root_of, parents, facts)


def _enumerate(combiner: Combiner, anchors, picks: list, seen: set | None, needed: int | None,
               breadth_first: bool = False) -> None:
    """Collect picks (``Pick``, or plain tuples of providers when every pick
    would be plain) until ``needed``: anchor by anchor, or (``breadth_first``)
    one from each anchor per round, so that a cap spreads over many trees.
    ``seen`` de-duplicates; None when duplicates cannot happen: without
    sharing providers every tree yields its own providers only, and two
    different combinations within a tree always differ in their triples or
    their mappings."""
    # Plain results are tuples of providers, made a tree at a time (see Combiner.singles).
    plain = seen is None and combiner.plain()
    produce = combiner.singles if plain else combiner.picks
    if breadth_first and needed is not None:
        streams = _round_robin([iter(produce(anchor)) for anchor in anchors])
    elif plain and needed is None:
        for anchor in anchors:
            picks.extend(combiner.singles(anchor))
        return
    else:
        streams = (pick for anchor in anchors for pick in produce(anchor))
    for pick in streams:
        if seen is not None:
            key = dedupe_key(pick)
            if key in seen:
                continue
            seen.add(key)
        picks.append(pick)
        if needed is not None and len(picks) >= needed:
            return


def _round_robin(iterators: list) -> Iterator[Pick]:
    while iterators:
        alive = []
        for iterator in iterators:
            pick = next(iterator, None)
            if pick is not None:
                yield pick
                alive.append(iterator)
        iterators = alive


# --- output ---------------------------------------------------------------------

def _summary_classes(request: CandidateRequest) -> frozenset[int] | None:
    return None if request.summary_all_classes else request.requested_classes


def _summaries(conn: Connection, request: CandidateRequest, roots: set[int],
               provider_ids: set[int]) -> summaries.Summaries:
    classes = _summary_classes(request)
    if request.nested_aware:
        return summaries.load(conn, roots=roots, classes=classes, with_traits=request.summary_traits)
    return summaries.load(conn, provider_ids=provider_ids, classes=classes,
                          with_traits=request.summary_traits)


def _build(conn: Connection, request: CandidateRequest, picks: list,
           root_of: dict[int, int]) -> CandidateResult:
    if isinstance(picks[0], tuple):
        return _build_plain(conn, request, picks, root_of)
    used = {p for pick in picks for p, _ in pick.amounts}
    found = _summaries(conn, request, {root_of[p] for p in used}, used)
    uuid_of = found.uuid_of
    rc_name = names.rc_names(conn, request.requested_classes)
    mapped = {p for pick in picks for providers in pick.mappings for p in providers}
    missing = mapped - uuid_of.keys()
    if missing:
        uuid_of = {**uuid_of, **summaries.uuids(conn, missing)}
    suffixes = [g.suffix for g in request.groups]
    # The same providers are mapped for a group by many requests: one list each.
    mapped_uuids: dict[tuple[int, ...], list[str]] = {}
    requests = []
    for pick in picks:
        allocations: dict[str, dict[str, int]] = {}
        for (provider, rc), amount in pick.amounts.items():
            uuid = uuid_of[provider]
            resources = allocations.get(uuid)
            if resources is None:
                allocations[uuid] = {rc_name[rc]: amount}
            else:
                resources[rc_name[rc]] = amount
        mappings = {}
        for suffix, providers in zip(suffixes, pick.mappings):
            uuids = mapped_uuids.get(providers)
            if uuids is None:
                uuids = mapped_uuids[providers] = [uuid_of[p] for p in providers]
            mappings[suffix] = uuids
        requests.append(EngineAllocation(allocations, mappings))
    return CandidateResult(requests, list(found.by_id.values()))


def _build_plain(conn: Connection, request: CandidateRequest, picks: list[tuple[int, ...]],
                 root_of: dict[int, int]) -> CandidateResult:
    """Requests from plain picks (one provider per group, every group with its
    own classes, one tree per pick): each group's resources are one dict
    shared by every request, and each provider's mapping one list."""
    found = _summaries(conn, request, {root_of[pick[0]] for pick in picks}, set())
    uuid_of = found.uuid_of
    providers = set().union(*zip(*picks))
    missing = providers - uuid_of.keys()
    if missing:
        uuid_of = {**uuid_of, **summaries.uuids(conn, missing)}
    rc_name = names.rc_names(conn, request.requested_classes)
    parts = [{rc_name[rc]: amount for rc, amount in g.resources.items()} for g in request.groups]
    suffixes = [g.suffix for g in request.groups]
    uuid = uuid_of.__getitem__
    listed = {p: [uuid(p)] for p in providers}
    mapped = listed.__getitem__
    width = len(parts)
    requests = []
    append = requests.append
    for pick in picks:
        if len(set(pick)) == width:
            allocations = dict(zip(map(uuid, pick), parts))
        else:  # groups sharing a provider: its classes merged, in group order
            allocations = {}
            for provider, part in zip(pick, parts):
                key = uuid(provider)
                have = allocations.get(key)
                allocations[key] = part if have is None else {**have, **part}
        append(EngineAllocation(allocations, dict(zip(suffixes, map(mapped, pick)))))
    return CandidateResult(requests, list(found.by_id.values()))
