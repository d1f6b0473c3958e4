"""Allocations (docs/design/placement-model.md#allocations): writing consumers' allocation sets without ever
overcommitting a provider, and reading them back.

The write path is ONE function, ``replace_allocations``, used by
``PUT /allocations/{c}``, ``POST /allocations`` and the reshaper. Callers
run it inside ``store.tx.run_write(engine, work,
retries=settings.allocation_conflict_retry_count)``: it raises
``store.tx.Retry`` when it loses a race, and run_write re-runs the whole
unit of work (exhausted retries surface as 409 placement.concurrent_update).

How overcommit is prevented, on every backend:

1. read, in ONE statement, the generation of every provider the write will
   bump together with the inventories and current usage of those providers,
2. decide admission in Python,
3. compare-and-set every one of those generations
   (``UPDATE ... SET generation = seen + 1 WHERE id = :id AND generation = :seen``),
4. then delete/insert the allocation rows,
5. and move each inventory row's kept usage (``inventories.used``, what the
   candidates query reads) by what the rows changed (``count_usage``).

Any writer that adds usage to a provider bumps that provider's generation
in its own transaction. If such a writer commits after the snapshot of our
step 1, our step 3 finds a different generation, matches no row, and the
unit of work is re-run with fresh data. If it committed before that
snapshot, step 1 sees its allocations. Either way the admission decision is
made on current usage. Step 3 also row-locks the providers until commit, so
a concurrent writer blocks on its own compare-and-set and then fails it.

Why generations and usage must come from the same snapshot on READ
COMMITTED databases (PostgreSQL, and MySQL as configured in store.engine):
every statement there sees whatever was committed when *that statement*
started. Were usage read by an earlier statement than the generations, a
writer could commit between the two; we would then hold its new generation
(so our compare-and-set would succeed) together with usage that misses its
allocations, and both writes would be admitted: an overcommit. One
statement has one snapshot on every backend (SQLite serializes writers
anyway), so nothing can commit "between" the two reads. (Reading the
generations in an earlier statement than usage would be safe too, just one
more round trip.)

Step 3 happens before step 4 (rather than after) so that a provider
deleted concurrently turns into a lost compare-and-set (re-run, then 400)
instead of a foreign-key failure on insert, and so that on MySQL the
provider row's exclusive lock is taken before the shared lock an
allocation insert takes on it (taking them the other way round
deadlocks two writers on the same provider).

Providers that merely lose allocations (a consumer moving elsewhere) are
neither bumped nor locked: less usage can never overcommit anything.
"""
from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field

from sqlalchemy import Connection, bindparam, func, literal, or_, select, update

from billeting.common.db.keys import Keyed, match
from billeting.placement import consumers, errors, names, providers, stock
from billeting.placement.consumers import Consumer, Owner
from billeting.placement.store import tables as t
from billeting.placement.store.tx import Retry

_a = t.allocations
_rp = t.resource_providers
_rc = t.resource_classes


# --- the request ----------------------------------------------------------

@dataclass(slots=True, frozen=True)
class ConsumerWrite:
    """One consumer's complete new allocation set (possibly empty = clear it).

    ``resources`` maps provider uuid → {resource class name: amount ≥ 1}.
    ``generation`` is only compared when ``check_generation`` is set (mv ≥ 1.28);
    None there means "this consumer must not exist yet".
    """

    consumer_uuid: str
    resources: dict[str, dict[str, int]]
    owner: Owner
    check_generation: bool = False
    generation: int | None = None


# --- errors -----------------------------------------------------------------

class ProviderMissing(errors.InvalidInput):
    def __init__(self, provider_uuid: str) -> None:
        super().__init__(f"Allocation for resource provider '{provider_uuid}' that does not exist.")
        self.provider_uuid = provider_uuid


class UnknownResourceClass(errors.InvalidInput):
    """Handlers rewrap it: the message prefix differs per endpoint
    (docs/design/placement-endpoints.md#allocations, #post-allocations, #reshaper)."""

    def __init__(self, resource_class: str, consumer_uuid: str) -> None:
        super().__init__(f"No such resource class {resource_class}.")
        self.resource_class = resource_class
        self.consumer_uuid = consumer_uuid


class AllocationRejected(errors.Conflict):
    """Admission failure (409, placement.undefined_code)."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"Unable to allocate inventory: {reason}")


# --- the write --------------------------------------------------------------

@dataclass(slots=True)
class _Inventory:
    total: int
    reserved: int
    min_unit: int
    max_unit: int
    step_size: int
    allocation_ratio: float

    @property
    def capacity(self) -> float:
        # Real arithmetic, not truncated: the admission form of docs/design/placement-model.md#inventory.
        return (self.total - self.reserved) * self.allocation_ratio


@dataclass(slots=True)
class _Usage:
    total: int = 0   # every consumer's allocations of the pair
    mine: int = 0    # the part held by consumers named in this request


@dataclass(slots=True)
class _ProviderRef:
    id: int
    uuid: str
    generation: int


def check_consumer_generations(conn: Connection, writes: Sequence[ConsumerWrite]) -> dict[str, Consumer]:
    """Apply the mv ≥ 1.28 consumer generation rules; return the existing consumers."""
    existing = consumers.get_many(conn, (w.consumer_uuid for w in writes))
    for write in writes:
        if write.check_generation:
            consumers.check_generation(existing.get(write.consumer_uuid), write.generation)
    return existing


# The statements of every call, built once (each call only binds values).
_PROVIDER_UUIDS = select(_rp.c.uuid).where(_rp.c.uuid.in_(bindparam("uuids", expanding=True)))
_INSERT = _a.insert()
_DELETE_OF_CONSUMERS = _a.delete().where(_a.c.consumer_id.in_(bindparam("consumer_ids", expanding=True)))


def require_providers(conn: Connection, writes: Sequence[ConsumerWrite]) -> None:
    """400 for the first provider named in the allocations that does not exist."""
    wanted = _ordered_providers(writes)
    found = set(conn.execute(_PROVIDER_UUIDS, {"uuids": wanted}).scalars()) if wanted else set()
    for uuid in wanted:
        if uuid not in found:
            raise ProviderMissing(uuid)


def replace_allocations(conn: Connection, writes: Sequence[ConsumerWrite]) -> dict[str, int]:
    """Replace the allocation sets of every consumer in ``writes``, atomically.

    Runs in the caller's transaction; applies docs/design/placement-model.md#allocations rules 1–7 in order.
    Returns the new generation of every provider it bumped (by uuid).

    Raises: ConcurrentUpdate (consumer generation conflict), ProviderMissing,
    UnknownResourceClass, AllocationRejected, and store.tx.Retry when a
    concurrent writer won a compare-and-set (let run_write re-run the unit).
    """
    uuids = [w.consumer_uuid for w in writes]
    if len(set(uuids)) != len(uuids):
        raise errors.InvalidInput("A consumer may only appear once in an allocation request.")
    existing = check_consumer_generations(conn, writes)

    # Rule 1: what the named consumers hold now. Cleared consumers' providers
    # are bumped too (docs/design/placement-model.md#generations), so they must be
    # known before generations are read. (Not read with the consumers, as a
    # release does: for the new consumers of a claim, the usual case, that
    # join reads more rows on PostgreSQL than the lookup alone.)
    held = _held(conn, [c.id for c in existing.values()])
    cleared_ids: set[int] = set()
    for write in writes:
        consumer = existing.get(write.consumer_uuid)
        if consumer is not None and not write.resources:
            cleared_ids |= {provider_id for provider_id, _ in held.get(consumer.id, {})}

    # Step 1 of the no-overcommit protocol: generations, inventories and
    # usage from one snapshot (see module doc).
    wanted = _ordered_providers(writes)
    refs, inventories, usage = _read_state(conn, wanted, cleared_ids, [c.id for c in existing.values()])
    by_uuid = {ref.uuid: ref for ref in refs}
    for uuid in wanted:                                    # rule 2
        if uuid not in by_uuid:
            raise ProviderMissing(uuid)
    rc_ids = _resolve_classes(conn, writes)                # rule 3

    # Step 2: admission, rules 4–6.
    amounts = [(w.consumer_uuid, by_uuid[rp_uuid], rc, amount)
               for w in writes for rp_uuid, res in w.resources.items() for rc, amount in res.items()]
    _admit(amounts, rc_ids, inventories, usage)

    # Step 3: compare-and-set, in id order so concurrent writers lock alike.
    to_bump = set(wanted)
    ordered = sorted((r for r in refs if r.uuid in to_bump or r.id in cleared_ids), key=lambda r: r.id)
    try:
        providers.bump_generations(conn, [(ref.id, ref.generation) for ref in ordered])
    except errors.ConcurrentUpdate:
        raise Retry("a resource provider's generation changed") from None
    bumped = {ref.uuid: ref.generation + 1 for ref in ordered}

    # Step 4: consumers, then allocation rows. Consumers in uuid order, like
    # the providers above, so that two requests naming the same consumers
    # lock their rows in the same order: the new ones first, in one insert
    # (created at generation 1: this write is their first change; a consumer
    # with nothing to clear and nothing to create gets no orphan record),
    # then the existing ones.
    by_consumer = sorted(writes, key=lambda w: w.consumer_uuid)
    new = [(w.consumer_uuid, w.owner) for w in by_consumer if w.consumer_uuid not in existing and w.resources]
    created = consumers.create_many(conn, new, generation=1) if new else {}
    now = providers.utcnow()
    rows: list[dict] = []
    cleared_consumers: list[int] = []
    for write in by_consumer:
        consumer = existing.get(write.consumer_uuid)
        if consumer is None:
            consumer = created.get(write.consumer_uuid)
            if consumer is None:
                continue
        else:
            consumers.bump_generation(conn, consumer)   # locks the row first
            consumers.update_owner(conn, consumer, write.owner)
        if not write.resources:
            cleared_consumers.append(consumer.id)
        for rp_uuid, res in write.resources.items():
            for rc, amount in res.items():
                rows.append({"consumer_id": consumer.id, "resource_provider_id": by_uuid[rp_uuid].id,
                             "resource_class_id": rc_ids[rc], "used": amount, "created_at": now})
    old_owner_ids = [c.id for c in existing.values()]
    if old_owner_ids:
        conn.execute(_DELETE_OF_CONSUMERS, {"consumer_ids": sorted(old_owner_ids)})
    if rows:
        conn.execute(_INSERT, rows)
    change: dict[tuple[int, int], int] = {}
    for amounts_held in held.values():
        for pair, amount in amounts_held.items():
            change[pair] = change.get(pair, 0) - amount
    for row in rows:
        pair = (row["resource_provider_id"], row["resource_class_id"])
        change[pair] = change.get(pair, 0) + row["used"]
    count_usage(conn, change, locked={ref.id for ref in ordered})
    consumers.delete(conn, cleared_consumers)              # rule 7
    return bumped


# ``used = used + delta`` is atomic under the row lock it takes on every
# backend, so writers that do not lock the provider (those only giving usage
# back) cannot lose each other's changes.
_COUNT_USAGE = (update(t.inventories)
                .where(t.inventories.c.resource_provider_id == bindparam("provider_id"),
                       t.inventories.c.resource_class_id == bindparam("class_id"))
                .values(used=t.inventories.c.used + bindparam("delta")))


def count_usage(conn: Connection, change: dict[tuple[int, int], int], *, locked: set[int] = frozenset()
                ) -> None:
    """Keep ``inventories.used`` and the providers' stock in step with
    allocation rows this transaction wrote: ``change`` maps (provider id,
    class id) to the difference; ``locked``: providers whose row this
    transaction already holds (its generation compare-and-set).

    The other providers' rows are locked first, in id order, as claims lock
    them: a release that locked a host's inventory rows before its provider
    row would deadlock with a claim on that host (see ``stock``). Rows are
    then updated in (provider, class) order, the order every writer takes
    these row locks in. A pair without an inventory row (none can hold
    allocations) is skipped."""
    rows = [{"provider_id": p, "class_id": c, "delta": d} for (p, c), d in sorted(change.items()) if d]
    if not rows:
        return
    touched = {row["provider_id"] for row in rows}
    stock.lock(conn, touched - locked)
    conn.execute(_COUNT_USAGE, rows)
    stock.refresh(conn, touched, locked=touched)


def _ordered_providers(writes: Sequence[ConsumerWrite]) -> list[str]:
    """Provider uuids named in the new allocations, first mention first."""
    seen: dict[str, None] = {}
    for write in writes:
        for uuid in write.resources:
            seen.setdefault(uuid, None)
    return list(seen)


_HELD = Keyed(lambda consumer_ids: select(_a.c.consumer_id, _a.c.resource_provider_id, _a.c.resource_class_id,
                                          _a.c.used).where(match(_a.c.consumer_id, "consumer_ids", consumer_ids)),
              "consumer_ids")


def _held(conn: Connection, consumer_ids: list[int]) -> dict[int, consumers.Held]:
    """Per consumer id, what it holds now by (provider id, class id)."""
    if not consumer_ids:
        return {}
    held: dict[int, consumers.Held] = {}
    for consumer_id, provider_id, class_id, used in conn.execute(*_HELD.bind({"consumer_ids": sorted(consumer_ids)})):
        amounts = held.setdefault(consumer_id, {})
        amounts[(provider_id, class_id)] = amounts.get((provider_id, class_id), 0) + int(used)
    return held


def _state_query(by_uuid: str | None, by_id: str | None, with_mine: str | None):
    """The statement of ``_read_state`` for one shape of request (built once):
    each argument is how its list is matched (``ONE`` or ``MANY`` key),
    None without one."""
    inv = t.inventories
    clauses = []
    if by_uuid:
        clauses.append(match(_rp.c.uuid, "uuids", by_uuid))
    if by_id:
        clauses.append(match(_rp.c.id, "ids", by_id))
    same_pair = (_a.c.resource_provider_id == inv.c.resource_provider_id,
                 _a.c.resource_class_id == inv.c.resource_class_id)
    total = select(func.coalesce(func.sum(_a.c.used), 0)).where(*same_pair).scalar_subquery()
    if with_mine:
        held = (select(func.coalesce(func.sum(_a.c.used), 0))
                .where(*same_pair, match(_a.c.consumer_id, "mine", with_mine))
                .scalar_subquery())
    else:
        held = literal(0)
    return (select(_rp.c.id, _rp.c.uuid, _rp.c.generation, inv.c.resource_class_id, inv.c.total,
                   inv.c.reserved, inv.c.min_unit, inv.c.max_unit, inv.c.step_size,
                   inv.c.allocation_ratio, total.label("used"), held.label("mine"))
            .select_from(_rp.outerjoin(inv, inv.c.resource_provider_id == _rp.c.id))
            .where(or_(*clauses)))


# By which of the three lists a call has: its statement, per arity of each.
_STATE_QUERIES: dict[tuple[bool, bool, bool], Keyed] = {}


def _read_state(conn: Connection, uuids: list[str], ids: set[int], mine: list[int]):
    """Generations of the providers named by ``uuids`` or ``ids``, with their
    inventories and usage, in one statement (one snapshot).

    Returns ``(refs, inventories, usage)``: the providers found, and per
    (provider id, class id) pair with inventory its ``_Inventory`` and
    ``_Usage`` (the part held by the ``mine`` consumers split out).
    """
    if not uuids and not ids:
        return [], {}, {}
    values = {name: keys for name, keys in (("uuids", uuids), ("ids", sorted(ids)), ("mine", mine)) if keys}
    shape = (bool(uuids), bool(ids), bool(mine))
    query = _STATE_QUERIES.get(shape)
    if query is None:
        query = _STATE_QUERIES[shape] = Keyed(
            lambda uuids=None, ids=None, mine=None: _state_query(uuids, ids, mine), *values)
    rows = conn.execute(*query.bind(values))
    refs: dict[int, _ProviderRef] = {}
    inventories: dict[tuple[int, int], _Inventory] = {}
    usage: dict[tuple[int, int], _Usage] = {}
    for row in rows:
        if row.id not in refs:
            refs[row.id] = _ProviderRef(row.id, row.uuid, row.generation)
        if row.resource_class_id is None:
            continue  # a provider without any inventory
        key = (row.id, row.resource_class_id)
        inventories[key] = _Inventory(
            int(row.total), int(row.reserved), int(row.min_unit), int(row.max_unit),
            int(row.step_size), float(row.allocation_ratio))
        usage[key] = _Usage(int(row.used), int(row.mine))
    return list(refs.values()), inventories, usage


def _resolve_classes(conn: Connection, writes: Sequence[ConsumerWrite]) -> dict[str, int]:
    wanted = {rc for w in writes for res in w.resources.values() for rc in res}
    found = names.rc_ids(conn, wanted)
    for write in writes:
        for res in write.resources.values():
            for rc in res:
                if rc not in found:
                    raise UnknownResourceClass(rc, write.consumer_uuid)
    return found


def _admit(amounts, rc_ids: dict[str, int], inventories: dict, usage: dict) -> None:
    """Rules 4–6 of docs/design/placement-model.md#allocations, each over the whole
    request before the next."""
    missing_rcs: list[str] = []
    missing_rps: list[str] = []
    for _consumer, ref, rc, _amount in amounts:
        if (ref.id, rc_ids[rc]) not in inventories:
            if rc not in missing_rcs:
                missing_rcs.append(rc)
            if ref.uuid not in missing_rps:
                missing_rps.append(ref.uuid)
    if missing_rcs:
        raise AllocationRejected(
            f"Inventory for '{', '.join(missing_rcs)}' on resource provider "
            f"'{', '.join(missing_rps)}' invalid.")
    requested: dict[tuple[int, int], int] = {}
    for _consumer, ref, rc, amount in amounts:
        inv = inventories[(ref.id, rc_ids[rc])]
        if not (inv.min_unit <= amount <= inv.max_unit) or amount % inv.step_size:
            raise AllocationRejected(
                f"Unable to create allocation for '{rc}' on resource provider '{ref.uuid}'. "
                "The requested amount would violate inventory constraints.")
        key = (ref.id, rc_ids[rc])
        requested[key] = requested.get(key, 0) + amount
    reported: set[tuple[int, int]] = set()
    for _consumer, ref, rc, _amount in amounts:
        key = (ref.id, rc_ids[rc])
        if key in reported:
            continue
        reported.add(key)
        before = usage.get(key, _Usage())
        after = before.total - before.mine + requested[key]
        # Over capacity is tolerated when the write does not make it worse
        # (e.g. inventory was shrunk below existing usage).
        if after > inventories[key].capacity and after > before.total:
            raise AllocationRejected(
                f"Unable to create allocation for '{rc}' on resource provider '{ref.uuid}'. "
                "The requested amount would exceed the capacity.")


# --- reads ------------------------------------------------------------------

@dataclass(slots=True)
class ProviderPart:
    """One provider's part of a consumer's allocations."""

    provider_uuid: str
    provider_generation: int
    resources: dict[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class ConsumerAllocations:
    consumer: Consumer
    parts: list[ProviderPart]
    last_modified: dt.datetime | None


@dataclass(slots=True)
class ConsumerPart:
    """One consumer's part of a provider's allocations."""

    consumer_uuid: str
    consumer_generation: int
    resources: dict[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class ProviderAllocations:
    provider_uuid: str
    provider_generation: int
    parts: list[ConsumerPart]
    last_modified: dt.datetime | None


def _storable(text: str) -> bool:
    """PostgreSQL cannot even compare against text holding NUL; no stored
    uuid contains one, so such a lookup key simply matches nothing."""
    return "\x00" not in text


_OF_CONSUMER = (select(_rp.c.uuid, _rp.c.generation, _rc.c.name, _a.c.used, _a.c.created_at)
                .select_from(_a.join(_rp, _rp.c.id == _a.c.resource_provider_id)
                             .join(_rc, _rc.c.id == _a.c.resource_class_id))
                .where(_a.c.consumer_id == bindparam("consumer_id"))
                .order_by(_a.c.id))

_OF_PROVIDER = (select(t.consumers.c.uuid, t.consumers.c.generation, _rc.c.name, _a.c.used, _a.c.created_at)
                .select_from(_a.join(t.consumers, t.consumers.c.id == _a.c.consumer_id)
                             .join(_rc, _rc.c.id == _a.c.resource_class_id))
                .where(_a.c.resource_provider_id == bindparam("provider_id"))
                .order_by(_a.c.id))


def for_consumer(conn: Connection, consumer_uuid: str) -> ConsumerAllocations | None:
    """The consumer's allocations grouped by provider; None when it has none."""
    consumer = consumers.get(conn, consumer_uuid) if _storable(consumer_uuid) else None
    if consumer is None:
        return None
    rows = conn.execute(_OF_CONSUMER, {"consumer_id": consumer.id}).all()
    if not rows:
        return None
    parts: dict[str, ProviderPart] = {}
    for row in rows:
        part = parts.setdefault(row.uuid, ProviderPart(row.uuid, row.generation))
        part.resources[row.name] = part.resources.get(row.name, 0) + int(row.used)
    return ConsumerAllocations(consumer, list(parts.values()), _newest(r.created_at for r in rows))


def for_provider(conn: Connection, provider_uuid: str) -> ProviderAllocations:
    provider = providers.get(conn, provider_uuid) if _storable(provider_uuid) else None
    if provider is None:
        raise errors.NotFound(f"Resource provider '{provider_uuid}' not found: "
                              f"No resource provider with uuid {provider_uuid} found")
    rows = conn.execute(_OF_PROVIDER, {"provider_id": provider.id}).all()
    parts: dict[str, ConsumerPart] = {}
    for row in rows:
        part = parts.setdefault(row.uuid, ConsumerPart(row.uuid, row.generation))
        part.resources[row.name] = part.resources.get(row.name, 0) + int(row.used)
    return ProviderAllocations(provider.uuid, provider.generation, list(parts.values()),
                               _newest(r.created_at for r in rows))


_DELETE_OF_CONSUMER = _a.delete().where(_a.c.consumer_id == bindparam("consumer_id"))


def delete_for_consumer(conn: Connection, consumer_uuid: str) -> None:
    """DELETE /allocations/{c}: drop every allocation and the consumer record.

    No generation is checked and no provider is bumped (docs/design/placement-model.md#generations,
    docs/design/placement-quirks.md#q2), but the consumer generation is still compare-and-set: that locks
    the consumer row against a concurrent PUT, which would otherwise insert
    allocations referencing a consumer row this transaction deletes.
    """
    # The consumer and its rows in one statement, read before the
    # compare-and-set: rows changed after this read changed the consumer
    # generation too, and the compare-and-set re-runs the unit.
    found, holding = consumers.get_holding(conn, [consumer_uuid]) if _storable(consumer_uuid) else ({}, {})
    consumer = found.get(consumer_uuid)
    held = holding.get(consumer.id, {}) if consumer is not None else {}
    if not held:
        raise errors.NotFound(f"No allocations for consumer '{consumer_uuid}'")
    consumers.bump_generation(conn, consumer)
    conn.execute(_DELETE_OF_CONSUMER, {"consumer_id": consumer.id})
    count_usage(conn, {pair: -amount for pair, amount in held.items()})
    consumers.delete(conn, [consumer.id])


def _newest(stamps) -> dt.datetime | None:
    present = [s for s in stamps if s is not None]
    return max(present) if present else None


# --- the usage kept on inventories ---------------------------------------------------

@dataclass(slots=True, frozen=True)
class UsageOutOfStep:
    """An inventory row whose kept usage is not the sum of its allocations."""

    provider_id: int
    class_id: int
    kept: int
    allocated: int


def _allocated_per_inventory():
    """The inventories table, and the sum of each of its rows' allocations
    (a sub-select correlated on the row)."""
    inv = t.inventories
    allocated = (select(func.coalesce(func.sum(_a.c.used), 0))
                 .where(_a.c.resource_provider_id == inv.c.resource_provider_id,
                        _a.c.resource_class_id == inv.c.resource_class_id)
                 .scalar_subquery())
    return inv, allocated


def usage_out_of_step(conn: Connection) -> list[UsageOutOfStep]:
    """Inventory rows whose ``used`` differs from their allocations: none,
    unless allocation rows were written around Placement (restores, repairs)."""
    inv, allocated = _allocated_per_inventory()
    rows = conn.execute(select(inv.c.resource_provider_id, inv.c.resource_class_id, inv.c.used, allocated)
                        .where(inv.c.used != allocated)
                        .order_by(inv.c.resource_provider_id, inv.c.resource_class_id))
    return [UsageOutOfStep(p, c, int(kept), int(total)) for p, c, kept, total in rows]


def recount_usage(conn: Connection) -> int:
    """Set every inventory's ``used`` from its allocations, then every
    provider's stock from its inventories; returns the rows changed."""
    inv, allocated = _allocated_per_inventory()
    changed = conn.execute(update(inv).where(inv.c.used != allocated).values(used=allocated)).rowcount
    return changed + stock.refresh_all(conn)
