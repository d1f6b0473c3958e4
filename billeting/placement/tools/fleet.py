"""The fleet file: everything ``export`` reads and ``import`` writes.

Generations are left out on purpose: they are per-service counters, and an
import starts its own. Providers are listed parents first, so a reader can
create them in file order.
"""
from __future__ import annotations

from typing import Literal

import msgspec

FORMAT = "billeting-placement-fleet"
VERSION = 1


class Inventory(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    total: int
    reserved: int = 0
    min_unit: int = 1
    max_unit: int = 2147483647
    step_size: int = 1
    allocation_ratio: float = 1.0

    def capacity(self) -> float:
        """What allocations may add up to (the admission test of docs/design/placement-model.md#inventory)."""
        return (self.total - self.reserved) * self.allocation_ratio


class Provider(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    uuid: str
    name: str
    parent_provider_uuid: str | None = None
    inventories: dict[str, Inventory] = {}
    traits: list[str] = []
    aggregates: list[str] = []


class Consumer(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    uuid: str
    project_id: str
    user_id: str
    # None: a consumer written before types existed (Placement shows "unknown").
    consumer_type: str | None
    # provider uuid -> resource class -> amount
    allocations: dict[str, dict[str, int]]


class Fleet(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    format: Literal["billeting-placement-fleet"]
    version: int
    source: str
    microversion: str
    exported_at: str
    resource_classes: list[str]  # custom classes only
    traits: list[str]  # custom traits only
    providers: list[Provider]
    consumers: list[Consumer]


def encode(fleet: Fleet) -> bytes:
    return msgspec.json.format(msgspec.json.encode(fleet), indent=1) + b"\n"


def decode(data: bytes) -> Fleet:
    """Parse and type-check a fleet file; any problem is a ``ValueError`` naming it."""
    try:
        fleet = msgspec.json.decode(data, type=Fleet)
    except msgspec.ValidationError as exc:
        raise ValueError(f"not a fleet file: {exc}") from None
    except msgspec.DecodeError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if fleet.version != VERSION:
        raise ValueError(f"fleet file version {fleet.version} is not supported (this Billeting reads {VERSION})")
    return fleet


def parents_first(providers: list[Provider]) -> list[Provider]:
    """Order providers so that each comes after its parent (when the parent is listed)."""
    by_uuid = {p.uuid: p for p in providers}
    children: dict[str | None, list[Provider]] = {}
    for p in providers:
        parent = p.parent_provider_uuid if p.parent_provider_uuid in by_uuid else None
        children.setdefault(parent, []).append(p)
    ordered: list[Provider] = []
    level = sorted(children.get(None, []), key=lambda p: p.name)
    while level:
        ordered += level
        level = sorted((c for p in level for c in children.get(p.uuid, [])), key=lambda p: p.name)
    if len(ordered) != len(providers):
        raise ValueError("the providers' parent links form a loop")
    return ordered


def depth_levels(providers: list[Provider]) -> list[list[Provider]]:
    """Providers grouped by depth (roots first); one level can be created in parallel."""
    depth: dict[str, int] = {}
    levels: list[list[Provider]] = []
    for p in parents_first(providers):
        d = depth[p.parent_provider_uuid] + 1 if p.parent_provider_uuid in depth else 0
        depth[p.uuid] = d
        if d == len(levels):
            levels.append([])
        levels[d].append(p)
    return levels
