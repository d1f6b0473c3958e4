"""SQL building blocks of the candidates engine (SQLAlchemy Core).

Every predicate comes in two physical forms with the same meaning:

* set form (``SET``): ``id IN (SELECT ...)``. The database hashes each set
  once, which is what a scan of the whole fleet wants.
* probe form (``probe_form(dialect)``): ``EXISTS``/scalar sub-selects keyed on
  the outer provider, so an index probe answers each row. That is what a
  query over a small window of trees (or with a ``LIMIT``) wants: the cost
  follows the rows looked at, not the size of the fleet.

Building SQLAlchemy expressions costs more than running the small queries,
so statements are built once per *shape* and cached (see ``Plan``): every
builder first runs in a cheap values-only pass that records the bind values
and a signature of the structure; the expression tree is only built on a
cache miss. Values are always bound, never inlined.

Aliases are built once at import. The same alias may appear in several
sibling subqueries (each is its own SQL scope); a table is never nested in a
subquery over the same alias, so SQLAlchemy's auto-correlation only ever ties
a subquery to the provider it filters.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass

from sqlalchemy import (
    ARRAY,
    BigInteger,
    ColumnElement,
    Integer,
    String,
    and_,
    bindparam,
    cast,
    exists,
    false,
    func,
    or_,
    select,
    true,
    union_all,
)

from billeting.placement.candidates.model import ResolvedGroup
from billeting.placement.store import tables as t

RP = t.resource_providers
INV = t.inventories
RPT = t.resource_provider_traits
RPA = t.resource_provider_aggregates
AGG = t.placement_aggregates

P = RP.alias("p")  # the provider a group query filters
ROOT = RP.alias("root")  # the anchor root in a window query
OTHER = RP.alias("other")  # in_tree lookups
SCOPE = RP.alias("scope")  # providers in scope of a summary query
_INV = INV.alias("inv")
_RPT = RPT.alias("rpt")
_RPA = RPA.alias("rpa")
_AGG = AGG.alias("agg")

# Above this many ids a literal IN list is replaced by an array / JSON set.
_LITERAL_IN_MAX = 200
# Nothing can be allocated beyond the largest inventory value the API accepts.
MAX_AMOUNT = 2147483647
_CACHE_SIZE = 512


@dataclass(frozen=True, slots=True)
class Form:
    """Which physical form predicates take (see the module docstring)."""

    correlated: bool
    # PostgreSQL only: keep each EXISTS a per-row probe (``OFFSET 0`` stops the
    # planner from flattening it into a join). Flattened, a query of a dozen
    # semi-joins spends far longer in join-order search than in execution,
    # and its plan no longer stops early at the LIMIT.
    fenced: bool = False


SET = Form(correlated=False)


def probe_form(dialect: str) -> Form:
    return Form(correlated=True, fenced=dialect == "postgresql")


# --- plans: bind values + shape, statement built once per shape ------------------

class Plan:
    """One statement being prepared. In the values-only pass (``build`` false)
    builders only record bind values and shape tokens and return None."""

    __slots__ = ("build", "dialect", "values", "shape", "_count")

    def __init__(self, dialect: str, build: bool) -> None:
        self.build = build
        self.dialect = dialect
        self.values: dict[str, object] = {}
        self.shape: list = []
        self._count = 0

    def bind(self, value, type_):
        name = f"b{self._count}"
        self._count += 1
        self.values[name] = value
        return bindparam(name, type_=type_) if self.build else None

    def bind_list(self, values: list, type_):
        name = f"b{self._count}"
        self._count += 1
        self.values[name] = values
        return bindparam(name, type_=type_, expanding=True) if self.build else None

    def mark(self, *token) -> None:
        self.shape.append(token)


_statements: OrderedDict = OrderedDict()
_lock = threading.Lock()
# Tests set this: every cache hit is rebuilt and compared, so a builder that
# forgets to mark a structural choice fails loudly instead of reusing a wrong
# statement.
verify_cache = False


def prepare(name: str, dialect: str, builder: Callable[[Plan], object]):
    """(statement, bind values) for ``builder``; statements are cached by shape."""
    plan = Plan(dialect, build=False)
    builder(plan)
    key = (name, dialect, tuple(plan.shape))
    with _lock:
        statement = _statements.get(key)
        if statement is not None:
            _statements.move_to_end(key)
    if statement is not None and verify_cache:
        fresh = builder(Plan(dialect, build=True))
        if str(fresh) != _text(key, statement):
            raise AssertionError(f"statement cache collision for {name}: {plan.shape}")
    if statement is None:
        statement = builder(Plan(dialect, build=True))
        with _lock:
            _statements[key] = statement
            while len(_statements) > _CACHE_SIZE:
                _texts.pop(_statements.popitem(last=False)[0], None)
    return statement, plan.values


_texts: dict = {}  # the SQL text of cached statements, for verify_cache only


def _text(key, statement) -> str:
    text = _texts.get(key)
    if text is None or text[0] is not statement:
        text = _texts[key] = (statement, str(statement))
    return text[1]


class IdSet:
    """A set of ids bound into several statements; its encodings are made once."""

    __slots__ = ("ids", "_text")

    def __init__(self, ids: Collection[int]) -> None:
        self.ids = sorted(set(ids))
        self._text: str | None = None

    def __len__(self) -> int:
        return len(self.ids)

    def text(self) -> str:
        """Comma-separated, for array and JSON literals."""
        if self._text is None:
            self._text = ",".join(map(str, self.ids))
        return self._text


def ids_in(plan: Plan, col, ids: Collection[int] | IdSet):
    """``col IN ids`` that stays cheap to bind for large id sets."""
    if not isinstance(ids, IdSet):
        ids = IdSet(ids)
    if not ids:
        plan.mark("none")
        return false() if plan.build else None
    if len(ids) > _LITERAL_IN_MAX and ids.ids[-1] - ids.ids[0] + 1 == len(ids):
        # Every id from the lowest to the highest (a window of the fleet, as
        # the bounded scans read it): a range says the same, and the
        # database neither parses nor hashes a thousand ids for it.
        plan.mark("range")
        low, high = plan.bind(ids.ids[0], Integer), plan.bind(ids.ids[-1], Integer)
        return and_(col >= low, col <= high) if plan.build else None
    if len(ids) <= _LITERAL_IN_MAX or plan.dialect not in ("postgresql", "sqlite"):
        plan.mark("in")
        param = plan.bind_list(ids.ids, Integer)
        return col.in_(param) if plan.build else None
    if plan.dialect == "postgresql":
        # Bound as one array literal (adapting a long Python list costs more)
        # and unnested into a set, which the planner hashes like a table.
        plan.mark("unnest")
        param = plan.bind("{" + ids.text() + "}", String)
        return col.in_(select(func.unnest(cast(param, ARRAY(Integer))))) if plan.build else None
    plan.mark("json")
    param = plan.bind("[" + ids.text() + "]", String)
    if not plan.build:
        return None
    values = func.json_each(param).table_valued("value")
    return col.in_(select(values.c.value))


def exists_(query, form: Form) -> ColumnElement[bool]:
    return exists(query.offset(0) if form.fenced else query)


def both(conds: list) -> ColumnElement[bool]:
    return and_(true(), *conds)


# --- capacity ---------------------------------------------------------------

def unit_fits(inv, low, high, step) -> list:
    """The inventory row ``inv`` takes an amount in one allocation (bound as
    ``low``, ``high`` and ``step``): within min_unit..max_unit, a multiple of
    step_size. Every capacity form tests units with these same conditions."""
    return [
        inv.c.min_unit <= low,
        inv.c.max_unit >= high,
        # Same as the modulo alone, but the planner can estimate it (step
        # sizes are nearly always 1); a guessed 0.5% selectivity otherwise
        # turns every join into a nested loop.
        or_(inv.c.step_size == 1, step % inv.c.step_size == 0),
    ]


def capacity_of(inv):
    """What the inventory row ``inv`` can hold: (total - reserved) * allocation_ratio."""
    return (inv.c.total - inv.c.reserved) * inv.c.allocation_ratio


def serves(plan: Plan, id_col, rc_id: int, amount: int, form: Form):
    """The provider in ``id_col`` can take ``amount`` of ``rc_id`` (the admission
    test of docs/design/placement-model.md#inventory)."""
    plan.mark("serves", form)
    rc = plan.bind(rc_id, Integer)
    low = plan.bind(amount, BigInteger)
    high = plan.bind(amount, BigInteger)
    step = plan.bind(amount, BigInteger)
    need = plan.bind(amount, BigInteger)
    if not plan.build:
        return None
    inv = _INV
    conditions = (inv.c.resource_class_id == rc, *unit_fits(inv, low, high, step), fits_usage(inv, need))
    if form.correlated:
        return exists_(select(inv.c.id).where(inv.c.resource_provider_id == id_col, *conditions), form)
    return id_col.in_(select(inv.c.resource_provider_id).where(*conditions))


def fits_usage(inv, need):
    """``need`` more fits beside the row's usage (docs/design/placement-model.md#inventory): the one form of
    the capacity comparison, so every query admits exactly the same providers."""
    return inv.c.used + need <= capacity_of(inv)


def serving_window(plan: Plan, low, high, resources: dict[int, int]):
    """Ids of the providers with id in (``low``, ``high``] that can take every
    ``resources`` amount: the capacity test of ``serves`` for a whole window
    of providers in one set-based pass (no correlated sub-select per row).

    Each class's inventories in the window that pass the test (an index range
    scan on (class, provider); the row carries its usage) are stacked, and a
    provider qualifies when every class gave a row. ``high`` is usually a
    scalar sub-select (the window's last id)."""
    plan.mark("serving_window", len(resources))
    inv = _INV
    parts = []
    for rc_id, amount in resources.items():
        rc = plan.bind(rc_id, Integer)
        low_unit, high_unit, step, need = (plan.bind(amount, BigInteger) for _ in range(4))
        if plan.build:
            parts.append(select(inv.c.resource_provider_id.label("rp"))
                         .where(inv.c.resource_class_id == rc, inv.c.resource_provider_id > low,
                                inv.c.resource_provider_id <= high,
                                *unit_fits(inv, low_unit, high_unit, step), fits_usage(inv, need)))
    if len(resources) == 1:
        return parts[0] if plan.build else None
    classes = plan.bind(len(resources), Integer)
    if not plan.build:
        return None
    x = union_all(*parts).subquery("stacked")
    # (provider, class) is unique in inventories: one row per class that fits.
    return select(x.c.rp).group_by(x.c.rp).having(func.count() == classes)


# --- traits and aggregates --------------------------------------------------

def has_trait(plan: Plan, id_col, trait_ids: Iterable[int], form: Form):
    """The provider has at least one of ``trait_ids``."""
    plan.mark("trait", form)
    ids = plan.bind_list(sorted(trait_ids), Integer)
    if not plan.build:
        return None
    rpt = _RPT
    if form.correlated:
        return exists_(select(rpt.c.trait_id).where(
            rpt.c.resource_provider_id == id_col, rpt.c.trait_id.in_(ids)), form)
    return id_col.in_(select(rpt.c.resource_provider_id).where(rpt.c.trait_id.in_(ids)))


def in_aggregate(plan: Plan, id_col, uuids: Iterable[str], form: Form):
    """The provider is directly associated with at least one of ``uuids``."""
    plan.mark("agg", form)
    wanted = plan.bind_list(sorted(uuids), String)
    if not plan.build:
        return None
    rpa, agg = _RPA, _AGG
    members = (select(rpa.c.resource_provider_id)
               .select_from(rpa.join(agg, agg.c.id == rpa.c.aggregate_id))
               .where(agg.c.uuid.in_(wanted)))
    if form.correlated:
        return exists_(members.where(rpa.c.resource_provider_id == id_col), form)
    return id_col.in_(members)


def _not(plan: Plan, clause):
    plan.mark("not")
    return ~clause if plan.build else None


def matches_member_of(plan: Plan, id_col, clauses: tuple[frozenset[str], ...], form: Form):
    conds = [in_aggregate(plan, id_col, c, form) for c in clauses]
    return both(conds) if plan.build else None


def traits_ok(plan: Plan, id_col, required: Iterable[frozenset[int]], forbidden: frozenset[int],
              form: Form) -> list:
    conds = [has_trait(plan, id_col, any_of, form) for any_of in required]
    if forbidden:
        conds.append(_not(plan, has_trait(plan, id_col, forbidden, form)))
    return conds


def tree_of(plan: Plan, uuid: str):
    """Root id of the provider ``uuid`` (NULL, matching nothing, when unknown)."""
    plan.mark("tree_of")
    wanted = plan.bind(uuid, String)
    if not plan.build:
        return None
    return select(OTHER.c.root_provider_id).where(OTHER.c.uuid == wanted).scalar_subquery()


def _sharing_or(plan: Plan, p, sharing_ids: Collection[int], conds: list):
    """``conds``, waived for sharing providers (their anchors are checked in Python)."""
    plan.mark("sharing_or")
    ids = plan.bind_list(sorted(sharing_ids), Integer)
    return or_(p.c.id.in_(ids), both(conds)) if plan.build else None


# --- request groups ---------------------------------------------------------

def group_filters(plan: Plan, p, group: ResolvedGroup, resources: dict[int, int], *, tree_wide: bool,
                  own_traits: bool, form: Form, sharing_ids: Collection[int] = (),
                  capacity: bool = True) -> list:
    """Conditions on provider alias ``p`` to serve ``resources`` for ``group``.

    ``tree_wide`` selects the unsuffixed-group rules of
    docs/design/allocation-candidates.md#one-request-group: aggregates
    of the tree's root count as the provider's own and a forbidden aggregate
    on the root excludes the whole tree. ``own_traits`` applies the group's
    required traits to the provider itself (single-provider semantics, or a
    tree-wide group asking for one class); forbidden traits always apply to
    every chosen provider. Root-based conditions are not applied to sharing
    providers: their anchors are checked one by one in Python. ``capacity``
    false leaves the capacity tests out (the caller applies them set-based,
    see ``serving_window``).
    """
    # Everything that decides the structure below (the cache key of the statement).
    plan.mark("group", tree_wide, own_traits, bool(sharing_ids), len(resources), len(group.required),
              bool(group.forbidden), len(group.member_of), bool(group.forbidden_aggregates),
              group.in_tree is not None and bool(resources), capacity)
    conds = [serves(plan, p.c.id, rc, amount, form) for rc, amount in resources.items()] if capacity else []
    if own_traits:
        conds += traits_ok(plan, p.c.id, group.required, group.forbidden, form)
    elif group.forbidden:
        conds.append(_not(plan, has_trait(plan, p.c.id, group.forbidden, form)))
    if tree_wide:
        root_conds = []
        if group.member_of:
            mine = matches_member_of(plan, p.c.id, group.member_of, form)
            roots = matches_member_of(plan, p.c.root_provider_id, group.member_of, form)
            root_conds.append(or_(mine, roots) if plan.build else None)
        if group.forbidden_aggregates:
            conds.append(_not(plan, in_aggregate(plan, p.c.id, group.forbidden_aggregates, form)))
            root_conds.append(_not(plan, in_aggregate(plan, p.c.root_provider_id,
                                                      group.forbidden_aggregates, form)))
        if root_conds:
            if sharing_ids:
                conds.append(_sharing_or(plan, p, sharing_ids, root_conds))
            else:
                conds.extend(root_conds)
    else:
        if group.member_of:
            conds.append(matches_member_of(plan, p.c.id, group.member_of, form))
        if group.forbidden_aggregates:
            conds.append(_not(plan, in_aggregate(plan, p.c.id, group.forbidden_aggregates, form)))
    # Quirk docs/design/placement-quirks.md#q10: in_tree has no effect on a resourceless group.
    if group.in_tree is not None and resources:
        root = tree_of(plan, group.in_tree)
        conds.append(p.c.root_provider_id == root if plan.build else None)
    return conds


def root_filter(plan: Plan, root_col, required: frozenset[int], forbidden: frozenset[int], *,
                form: Form, sharing_ids: Collection[int] = (), p=None) -> list:
    """``root_required``: the anchor root has every required trait and no forbidden one."""
    if not required and not forbidden:
        return []
    plan.mark("root_filter", len(required), bool(forbidden), bool(sharing_ids and p is not None))
    conds = [has_trait(plan, root_col, {trait}, form) for trait in sorted(required)]
    if forbidden:
        conds.append(_not(plan, has_trait(plan, root_col, forbidden, form)))
    if sharing_ids and p is not None:
        return [_sharing_or(plan, p, sharing_ids, conds)]
    return conds
