"""Allocation writes of moves (docs/design/moves.md), written once for
the conductor and the computes.

Every write here is generation-checked: it reads the consumers it touches,
then writes with the generations it read, so a concurrent writer (a delete,
the other half of a racing move) makes it fail with a consumer conflict
instead of resurrecting or doubling an allocation. A provider generation
race is retried with a fresh read, like a claim.

* ``swap_to_migration``  one ``POST /allocations``: the migration takes what
  the instance holds (the source), the instance takes the destination (or
  nothing) — the move's start, atomic, so neither set is ever unowned.
* ``move_back``          one ``POST /allocations``: the instance takes the
  migration's allocation again, which also drops its destination; the
  migration is emptied — revert and roll-back.
* ``drop``               a generation-checked delete (``PUT`` with ``{}``):
  confirm, and a finished live migration.
* ``add``/``remove_providers``  evacuation's doubled allocation and the
  returning source's clean-up of its half.
"""
from __future__ import annotations

from collections.abc import Collection

import msgspec

from billeting.placement_client.client import PlacementClient
from billeting.placement_client.model import (
    AllocationRequest,
    AllocationWrite,
    ConsumerAllocations,
    ProviderResources,
    WriteOutcome,
    WriteResult,
)

INSTANCE = "INSTANCE"
MIGRATION = "MIGRATION"
TRIES = 4

Held = dict[str, dict[str, int]]


class Owner(msgspec.Struct, frozen=True):
    project_id: str
    user_id: str


def _parts(held: Held) -> dict[str, ProviderResources]:
    return {rp: ProviderResources(dict(res)) for rp, res in held.items() if res}


def _write(current: ConsumerAllocations, allocations: Held, owner: Owner, consumer_type: str) -> AllocationWrite:
    return AllocationWrite(allocations=_parts(allocations), project_id=current.project_id or owner.project_id,
                           user_id=current.user_id or owner.user_id,
                           consumer_generation=current.consumer_generation if current.allocations else None,
                           consumer_type=consumer_type)


def _retrying(attempt) -> WriteOutcome:
    """Run ``attempt`` (read, then write) again while a provider generation race refuses it."""
    outcome = WriteOutcome(WriteResult.PROVIDER_CONFLICT)
    for _ in range(TRIES):
        outcome = attempt()
        if outcome.result is not WriteResult.PROVIDER_CONFLICT:
            return outcome
    return outcome


def swap_to_migration(client: PlacementClient, *, instance_uuid: str, migration_uuid: str, owner: Owner,
                      destination: AllocationRequest | None) -> WriteOutcome:
    """Source (what the instance holds now) → the migration; ``destination``
    (None: nothing) → the instance, in one transaction. Repeating a swap
    that already happened succeeds without writing."""
    dest = destination.as_resources() if destination is not None else {}

    def attempt() -> WriteOutcome:
        held = client.get_allocations(instance_uuid)
        moved = client.get_allocations(migration_uuid)
        if moved.allocations and held.as_resources() == dest:
            return WriteOutcome(WriteResult.OK, "already swapped")
        if moved.allocations:
            return WriteOutcome(WriteResult.CONSUMER_CONFLICT,
                                f"migration {migration_uuid} already holds allocations")
        if not held.allocations and not dest:
            return WriteOutcome(WriteResult.OK, "nothing to swap")
        writes = {}
        if held.allocations:
            writes[migration_uuid] = _write(moved, held.as_resources(), owner, MIGRATION)
        writes[instance_uuid] = _write(held, dest, owner, INSTANCE)
        return client.post_allocations(writes)

    return _retrying(attempt)


def move_back(client: PlacementClient, *, migration_uuid: str, instance_uuid: str, owner: Owner) -> WriteOutcome:
    """The migration's allocation (the source) → the instance, replacing
    whatever the instance holds (the destination); the migration ends empty.
    Succeeds without writing when the migration holds nothing."""
    def attempt() -> WriteOutcome:
        moved = client.get_allocations(migration_uuid)
        if not moved.allocations:
            return WriteOutcome(WriteResult.OK, "migration holds nothing")
        held = client.get_allocations(instance_uuid)
        if not held.allocations:
            # Freed by a delete meanwhile: giving the source back would resurrect it.
            return WriteOutcome(WriteResult.CONSUMER_CONFLICT, f"instance {instance_uuid} holds nothing")
        return client.post_allocations({
            instance_uuid: _write(held, moved.as_resources(), owner, INSTANCE),
            migration_uuid: AllocationWrite(allocations={}, project_id=moved.project_id or owner.project_id,
                                            user_id=moved.user_id or owner.user_id,
                                            consumer_generation=moved.consumer_generation,
                                            consumer_type=MIGRATION),
        })

    return _retrying(attempt)


def drop(client: PlacementClient, consumer_uuid: str, *, owner: Owner, consumer_type: str = MIGRATION) -> WriteOutcome:
    """Delete everything ``consumer_uuid`` holds, at the generation read
    (a safe delete: ``PUT`` with empty allocations)."""
    def attempt() -> WriteOutcome:
        held = client.get_allocations(consumer_uuid)
        if not held.allocations:
            return WriteOutcome(WriteResult.OK, "holds nothing")
        return client.put_allocations(consumer_uuid, AllocationWrite(
            allocations={}, project_id=held.project_id or owner.project_id, user_id=held.user_id or owner.user_id,
            consumer_generation=held.consumer_generation, consumer_type=consumer_type))

    return _retrying(attempt)


def add(client: PlacementClient, consumer_uuid: str, extra: AllocationRequest, *, owner: Owner,
        consumer_type: str = INSTANCE) -> WriteOutcome:
    """What the consumer holds plus ``extra`` (evacuation's doubled allocation)."""
    def attempt() -> WriteOutcome:
        held = client.get_allocations(consumer_uuid)
        merged = held.as_resources()
        for rp, res in extra.as_resources().items():
            into = merged.setdefault(rp, {})
            for rc, n in res.items():
                into[rc] = into.get(rc, 0) + n
        return client.put_allocations(consumer_uuid, _write(held, merged, owner, consumer_type))

    return _retrying(attempt)


def remove_providers(client: PlacementClient, consumer_uuid: str, providers: Collection[str], *, owner: Owner,
                     consumer_type: str = INSTANCE) -> WriteOutcome:
    """Drop the consumer's allocations on ``providers`` (one compute's tree),
    keeping the rest; OK without writing when it holds nothing there."""
    def attempt() -> WriteOutcome:
        held = client.get_allocations(consumer_uuid)
        current = held.as_resources()
        kept = {rp: res for rp, res in current.items() if rp not in providers}
        if kept == current:
            return WriteOutcome(WriteResult.OK, "nothing held on those providers")
        write = _write(held, kept, owner, consumer_type)
        if not kept:
            write = msgspec.structs.replace(write, consumer_generation=held.consumer_generation)
        return client.put_allocations(consumer_uuid, write)

    return _retrying(attempt)
