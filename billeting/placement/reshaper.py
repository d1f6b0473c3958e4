"""The reshaper (docs/design/placement-endpoints.md#reshaper): move inventory and the allocations consuming it
between providers in one transaction.

``reshape`` runs inside the caller's ``run_write`` transaction, so any
failure leaves nothing changed. Inventory replacement is
``inventories.replace_inventories``; allocation replacement is
``allocations.replace_allocations`` with its full admission rules and its
no-overcommit protocol.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import Connection

from billeting.placement import allocations, errors, inventories, names, providers
from billeting.placement.allocations import ConsumerWrite
from billeting.placement.inventories import InventoryRecord
from billeting.placement.providers import Provider
from billeting.placement.store.tx import Retry

# Only a name of this shape can be a resource class; others are unknown
# without asking the database (which may not even accept them, e.g. NUL).
_RC_NAME = re.compile(r"^[A-Z0-9_]+$")


@dataclass(slots=True, frozen=True)
class InventoryChange:
    """A provider's complete new inventory, guarded by the generation the client saw."""

    provider_uuid: str
    generation: int
    records: dict[str, InventoryRecord]


class MalformedReshape(errors.InvalidInput):
    def __init__(self, reason: str) -> None:
        super().__init__(f"malformed reshaper data: {reason}")


def reshape(conn: Connection, changes: Sequence[InventoryChange],
            writes: Sequence[ConsumerWrite]) -> None:
    """Apply the processing order of docs/design/placement-endpoints.md#reshaper; raise on the
    first failure."""
    # 1-2. Providers being re-inventoried exist and are at the client's generation.
    targets: list[tuple[Provider, InventoryChange]] = []
    for change in changes:
        provider = providers.get(conn, change.provider_uuid)
        if provider is None:
            raise errors.InvalidInput(
                f"Resource provider {change.provider_uuid} in inventories not found: "
                f"No resource provider with uuid {change.provider_uuid} found",
                code=errors.PROVIDER_NOT_FOUND)
        providers.check_generation(provider, change.generation)
        targets.append((provider, change))
    # 3-4. Consumer generations, then the providers the allocations name.
    allocations.check_consumer_generations(conn, writes)
    allocations.require_providers(conn, writes)

    # 5. Validate the new records before anything is written.
    wanted = {rc for change in changes for rc in change.records}
    known = names.rc_ids(conn, {rc for rc in wanted if _RC_NAME.fullmatch(rc)})
    for change in changes:
        for rc, record in change.records.items():
            if rc not in known:
                raise MalformedReshape(f"No such resource class {rc}.")
            # Quirk docs/design/placement-quirks.md#q7 fixed: the reshaper applies the same reserved-vs-total
            # rule as the inventory endpoints do at mv >= 1.26.
            inventories.check_capacity(change.provider_uuid, record,
                                       reserved_may_equal_total=True, action="update")

    # Interim inventories: current records overlaid with the new ones, so
    # nothing in use disappears yet and every new class already exists.
    generations = {provider.uuid: provider.generation for provider, _ in targets}
    for provider, change in targets:
        if not change.records:
            continue
        current = inventories.get_all(conn, provider).records
        generations[provider.uuid] = _bump(conn, provider, generations[provider.uuid])
        inventories.replace_inventories(conn, provider, {**current, **change.records})

    try:
        bumped = allocations.replace_allocations(conn, writes)
    except allocations.UnknownResourceClass as exc:
        raise MalformedReshape(exc.detail) from None
    generations.update({uuid: gen for uuid, gen in bumped.items() if uuid in generations})

    # Final inventories: exactly what was asked for.
    for provider, change in targets:
        generations[provider.uuid] = _bump(conn, provider, generations[provider.uuid])
        try:
            inventories.replace_inventories(conn, provider, change.records)
        except errors.InventoryInUse as exc:
            raise errors.InventoryInUse(f"update conflict: {exc.detail}") from None


def _bump(conn: Connection, provider: Provider, seen: int) -> int:
    """Compare-and-set; a lost race re-runs the unit of work, whose generation
    check then reports the conflict to the client."""
    try:
        return providers.bump_generation(conn, provider.id, seen)
    except errors.ConcurrentUpdate:
        raise Retry(f"resource provider {provider.uuid} generation changed") from None
