"""Inventories: how much of each resource class a provider has (docs/design/placement-model.md#inventory,
docs/design/placement-endpoints.md#inventories).

Every write that goes through the functions here bumps the provider
generation with ``providers.bump_generation`` in the caller's transaction,
except ``replace_inventories``, which the reshaper composes with its own
generation handling. The bump comes before the row changes: it locks the
provider row, so a racing writer fails on the compare-and-set (a clean
409) instead of on a unique constraint.
"""
from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from sqlalchemy import Connection, bindparam, select, update
from sqlalchemy.exc import IntegrityError

from billeting.placement import errors, names, providers, stock
from billeting.placement.providers import Provider, ProviderKey
from billeting.placement.store import tables as t

MAX_INT = 2147483647

_inv = t.inventories


@dataclass(slots=True)
class InventoryRecord:
    """One provider's inventory of one resource class. Defaults are the
    values an omitted field takes on write (docs/design/placement-model.md#inventory)."""

    resource_class: str
    total: int
    reserved: int = 0
    min_unit: int = 1
    max_unit: int = MAX_INT
    step_size: int = 1
    allocation_ratio: float = 1.0
    created_at: dt.datetime | None = None
    updated_at: dt.datetime | None = None

    @property
    def capacity(self) -> int:
        """Reported capacity: truncated, as upstream computes it."""
        return int((self.total - self.reserved) * self.allocation_ratio)

    @property
    def last_modified(self) -> dt.datetime | None:
        return self.updated_at or self.created_at


@dataclass(slots=True)
class ProviderInventory:
    """A provider's whole inventory as of ``generation``."""

    generation: int
    records: dict[str, InventoryRecord]


@dataclass(slots=True)
class InventoryAtGeneration:
    """One inventory record and the provider generation that goes with it."""

    generation: int
    record: InventoryRecord


# --- reading ---------------------------------------------------------------

_INSERT = _inv.insert()


def _rows_query(*extra):
    return (select(_inv, t.resource_classes.c.name.label("rc_name"), *extra)
            .join(t.resource_classes, t.resource_classes.c.id == _inv.c.resource_class_id)
            .where(_inv.c.resource_provider_id == bindparam("provider_id")))


# Built once (a call only binds the provider): without and with the row id.
_ROWS = {False: _rows_query(), True: _rows_query(_inv.c.id.label("inventory_id"))}


def _rows(conn: Connection, provider_id: int, *, with_id: bool = False):
    return conn.execute(_ROWS[with_id], {"provider_id": provider_id}).all()


def _from_row(row) -> InventoryRecord:
    return InventoryRecord(
        resource_class=row.rc_name, total=int(row.total), reserved=int(row.reserved),
        min_unit=int(row.min_unit), max_unit=int(row.max_unit), step_size=int(row.step_size),
        allocation_ratio=float(row.allocation_ratio),
        created_at=row.created_at, updated_at=row.updated_at)


_ROW_COLUMNS = (_inv.c.id.label("inventory_id"), _inv.c.resource_class_id, _inv.c.total,
                _inv.c.reserved, _inv.c.min_unit, _inv.c.max_unit, _inv.c.step_size,
                _inv.c.allocation_ratio, _inv.c.created_at, _inv.c.updated_at)


def for_write(conn: Connection, uuid: str) -> tuple[ProviderKey | None, dict]:
    """The provider and its inventory rows (by class name), read in one statement.

    ``(None, {})`` when there is no such provider.
    """
    key, rows = providers.with_linked(conn, uuid, _inv, *_ROW_COLUMNS)
    if key is None:
        return None, {}
    class_names = names.rc_names(conn, {row.resource_class_id for row in rows})
    return key, {class_names[row.resource_class_id]: row for row in rows}


def get_all(conn: Connection, provider: Provider) -> ProviderInventory:
    records = {row.rc_name: _from_row(row) for row in _rows(conn, provider.id)}
    return ProviderInventory(generation=provider.generation, records=records)


def get_one(conn: Connection, provider: Provider, resource_class: str) -> InventoryRecord | None:
    return get_all(conn, provider).records.get(resource_class)


def in_use_classes(conn: Connection, provider_id: int, rc_ids: Iterable[int]) -> set[int]:
    """Those of ``rc_ids`` that have at least one allocation on the provider."""
    rc_ids = set(rc_ids)
    if not rc_ids:
        return set()
    a = t.allocations
    rows = conn.execute(select(a.c.resource_class_id).distinct().where(
        a.c.resource_provider_id == provider_id, a.c.resource_class_id.in_(rc_ids)))
    return {row.resource_class_id for row in rows}


def in_use_message(class_names: Iterable[str], provider_uuid: str) -> str:
    """The sentence nova parses with ``Inventory for (.+) on resource provider (.+) in use``.
    Classes are listed in the order given (callers give upstream's: by class id)."""
    listed = ", ".join(class_names)
    return f"Inventory for '{listed}' on resource provider '{provider_uuid}' in use."


# --- validation ------------------------------------------------------------

def check_capacity(provider_uuid: str, record: InventoryRecord, *,
                   reserved_may_equal_total: bool, action: str) -> None:
    """The only cross-field check on inventory writes (docs/design/placement-model.md#inventory).

    Before 1.26 the capacity must be positive; from 1.26 zero is allowed.
    ``action`` ("create" / "update") picks the message prefix.
    """
    capacity = record.capacity
    if reserved_may_equal_total:
        if capacity >= 0:
            return
        reason = "The reserved value is greater than total."
    else:
        if capacity > 0:
            return
        reason = "The reserved value is greater than or equal to total."
    raise errors.InvalidInput(
        f"Unable to {action} inventory for resource provider {provider_uuid}: "
        f"Invalid inventory for '{record.resource_class}' on resource provider "
        f"'{provider_uuid}'. {reason}")


# --- writing ---------------------------------------------------------------

def _values(record: InventoryRecord) -> dict:
    return {
        "total": record.total, "reserved": record.reserved, "min_unit": record.min_unit,
        "max_unit": record.max_unit, "step_size": record.step_size,
        "allocation_ratio": float(record.allocation_ratio),
    }


def replace_inventories(conn: Connection, provider: Provider | ProviderKey,
                        records: dict[str, InventoryRecord],
                        existing: dict | None = None) -> dict[str, InventoryRecord]:
    """Make ``records`` (keyed by resource class name) the provider's whole inventory.

    Classes not in ``records`` are removed, new ones added, existing ones
    overwritten (even below their current usage). Raises ``InventoryInUse``
    (detail "Inventory for '<RCs>' on resource provider '<uuid>' in use.")
    when a removed class still has allocations, and ``InvalidInput`` for a
    resource class that does not exist. Does NOT check or bump the provider
    generation and does not apply the capacity rule: callers do both.

    ``existing`` is the provider's current rows as ``for_write`` returns
    them, when the caller already has them. Returns the records as stored,
    with their timestamps.
    """
    if existing is None:
        existing = {row.rc_name: row for row in _rows(conn, provider.id, with_id=True)}
    removed = {name: row.resource_class_id for name, row in existing.items() if name not in records}
    busy = in_use_classes(conn, provider.id, removed.values())
    if busy:
        # Upstream lists them by class id: standard classes in os-resource-classes
        # order, then custom ones in order of creation.
        in_use = sorted((rc_id, name) for name, rc_id in removed.items() if rc_id in busy)
        raise errors.InventoryInUse(in_use_message([name for _, name in in_use], provider.uuid))
    added = [name for name in records if name not in existing]
    wanted_ids = names.rc_ids(conn, added)
    unknown = names.missing(added, wanted_ids)
    if unknown:
        raise errors.InvalidInput(
            f"Unknown resource class in inventory for resource provider {provider.uuid}: "
            f"No such resource class {unknown[0]}.")
    now = providers.utcnow()
    stored: dict[str, InventoryRecord] = {}
    changed: list[dict] = []
    new_rows: list[dict] = []
    for name, record in records.items():
        row = existing.get(name)
        if row is not None:
            changed.append({"inventory_id": row.inventory_id, "class_id": row.resource_class_id,
                            **_values(record), "updated_at": now})
            stored[name] = _stamped(record, row.created_at, now)
        else:
            new_rows.append({"resource_provider_id": provider.id, "resource_class_id": wanted_ids[name],
                             **_values(record), "created_at": now, "updated_at": None})
            stored[name] = _stamped(record, now, None)
    with _raced(provider):
        if removed:
            conn.execute(_inv.delete().where(_inv.c.resource_provider_id == provider.id,
                                             _inv.c.resource_class_id.in_(removed.values())))
        if changed:
            # In class order: allocation writes lock a provider's inventory
            # rows in that order too (allocations.count_usage).
            changed.sort(key=lambda values: values["class_id"])
            conn.execute(_UPDATE_BY_ID, changed)
        if new_rows:
            conn.execute(_INSERT, new_rows)
    stock.refresh(conn, [provider.id])
    return stored


# One statement for any number of rows (executemany).
_UPDATE_BY_ID = (update(_inv).where(_inv.c.id == bindparam("inventory_id"))
                 .values({name: bindparam(name) for name in
                          ("total", "reserved", "min_unit", "max_unit", "step_size",
                           "allocation_ratio", "updated_at")}))


def _stamped(record: InventoryRecord, created_at, updated_at) -> InventoryRecord:
    return InventoryRecord(
        resource_class=record.resource_class, total=record.total, reserved=record.reserved,
        min_unit=record.min_unit, max_unit=record.max_unit, step_size=record.step_size,
        allocation_ratio=float(record.allocation_ratio), created_at=created_at, updated_at=updated_at)


def add_one(conn: Connection, provider: Provider, record: InventoryRecord) -> InventoryAtGeneration:
    """Add inventory of a class the provider does not have yet (POST). No
    generation check; the generation goes up by one."""
    failure = f"Unable to create inventory for resource provider {provider.uuid}: "
    ids = names.rc_ids(conn, [record.resource_class])
    if record.resource_class not in ids:
        raise errors.InvalidInput(failure + f"No such resource class {record.resource_class}.")
    rc_id = ids[record.resource_class]
    duplicate = conn.execute(select(_inv.c.id).where(
        _inv.c.resource_provider_id == provider.id, _inv.c.resource_class_id == rc_id)).first()
    if duplicate:
        raise errors.ConcurrentUpdate(
            f"Update conflict: Inventory for '{record.resource_class}' on resource provider "
            f"'{provider.uuid}' already exists.")
    generation = _bump(conn, provider)
    with _raced(provider):
        conn.execute(_inv.insert().values(
            resource_provider_id=provider.id, resource_class_id=rc_id,
            **_values(record), created_at=providers.utcnow(), updated_at=None))
    stock.refresh(conn, [provider.id], locked=[provider.id])
    return InventoryAtGeneration(generation, get_one(conn, provider, record.resource_class))


def replace_all(conn: Connection, provider: Provider | ProviderKey, records: dict[str, InventoryRecord], *,
                generation: int, existing: dict | None = None) -> ProviderInventory:
    """PUT of the whole set: generation check, replace, generation +1."""
    providers.check_generation(provider, generation)
    new_generation = _bump(conn, provider)
    stored = replace_inventories(conn, provider, records, existing)
    return ProviderInventory(new_generation, stored)


def update_one(conn: Connection, provider: Provider, record: InventoryRecord) -> InventoryAtGeneration:
    """Overwrite an existing record (PUT of one class). The caller has
    checked the generation; it goes up by one."""
    ids = names.rc_ids(conn, [record.resource_class])
    if record.resource_class not in ids:
        raise errors.NotFound(f"No such resource class {record.resource_class}.")
    generation = _bump(conn, provider)
    result = conn.execute(
        update(_inv).where(_inv.c.resource_provider_id == provider.id,
                           _inv.c.resource_class_id == ids[record.resource_class])
        .values(**_values(record), updated_at=providers.utcnow()))
    if result.rowcount != 1:
        raise errors.InvalidInput(
            f"No inventory record with resource class for resource provider {provider.uuid}: "
            f"No inventory of class {record.resource_class} found.")
    stock.refresh(conn, [provider.id], locked=[provider.id])
    return InventoryAtGeneration(generation, get_one(conn, provider, record.resource_class))


def delete_one(conn: Connection, provider: Provider, resource_class: str) -> int:
    """Remove one class's inventory; refused while it has allocations.
    Returns the new generation."""
    failure = f"No inventory of class {resource_class} found for delete: "
    ids = names.rc_ids(conn, [resource_class])
    if resource_class not in ids:
        raise errors.NotFound(failure + f"No such resource class {resource_class}.")
    rc_id = ids[resource_class]
    if in_use_classes(conn, provider.id, [rc_id]):
        # Upstream reports this with the concurrent-update code (quirk docs/design/placement-quirks.md#q5).
        raise errors.ConcurrentUpdate(
            f"Unable to delete inventory of class {resource_class}: "
            + in_use_message([resource_class], provider.uuid))
    generation = _bump(conn, provider)
    result = conn.execute(_inv.delete().where(
        _inv.c.resource_provider_id == provider.id, _inv.c.resource_class_id == rc_id))
    if result.rowcount != 1:
        raise errors.NotFound(failure + f"No inventory of class {resource_class} found for delete")
    stock.refresh(conn, [provider.id], locked=[provider.id])
    return generation


def delete_all(conn: Connection, provider: Provider) -> int:
    """Remove every record (generation +1 even when there was none)."""
    try:
        generation = _bump(conn, provider)
        replace_inventories(conn, provider, {})
        return generation
    except errors.ConcurrentUpdate:
        raise errors.ConcurrentUpdate(
            f"Unable to delete inventory for resource provider {provider.uuid} because the "
            "inventory was updated by another process. Please retry your request.") from None


def _bump(conn: Connection, provider: Provider | ProviderKey) -> int:
    return providers.bump_generation(conn, provider.id, provider.generation)


@contextmanager
def _raced(provider: Provider | ProviderKey) -> Iterator[None]:
    """A constraint violation here means another writer changed the same
    rows concurrently: report it as the conflict it is, not a 500."""
    try:
        yield
    except IntegrityError:
        raise errors.ConcurrentUpdate(
            f"update conflict: the inventory of resource provider {provider.uuid} was changed "
            "by another process. Please retry your request.") from None
