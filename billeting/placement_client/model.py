"""Typed Placement objects as a client sees them on the wire.

msgspec decodes Placement's JSON straight into these Structs (and encodes
them back), so nothing above the client handles dicts. The shapes are those
of the newest microversion this client speaks (1.39); older shapes are
never produced because the client refuses Placements below its minimum.

Structs that arrive by the thousand (candidates, summaries) are declared
``gc=False``: they never take part in reference cycles, and not tracking
them makes decoding a large candidates answer about three times faster.

Placement's candidates engine has its own types for the same objects
(``billeting.placement.candidates.model``: ``ResolvedGroup``, ``EngineSummary``,
``EngineAllocation``): they hold database ids and pre-serialized JSON. This
module does not import them; only ``direct``, which runs the engine in
process, converts the engine's into these.
"""
from __future__ import annotations

import enum

import msgspec


class RequestGroup(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One request group of an allocation-candidates query, by name (Placement
    resolves it into the engine's ``ResolvedGroup``). ``suffix`` "" is
    the unsuffixed group, whose resources may come from several providers of
    one tree (or sharing providers); a suffixed group comes from one provider."""

    suffix: str = ""
    resources: dict[str, int] = {}
    # Each entry is an any-of set: a plain required trait is a one-element set.
    required: tuple[frozenset[str], ...] = ()
    forbidden: frozenset[str] = frozenset()
    # Each entry is an any-of set of aggregate uuids; entries are ANDed.
    member_of: tuple[frozenset[str], ...] = ()
    forbidden_aggregates: frozenset[str] = frozenset()
    in_tree: str | None = None


class CandidateQuery(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One ``GET /allocation_candidates``, by name (docs/design/allocation-candidates.md#validation-order)."""

    groups: tuple[RequestGroup, ...]
    limit: int | None = None
    group_policy: str | None = None
    root_required: frozenset[str] = frozenset()
    root_forbidden: frozenset[str] = frozenset()
    same_subtree: tuple[frozenset[str], ...] = ()


class ProviderResources(msgspec.Struct, frozen=True, gc=False):
    resources: dict[str, int]


class AllocationRequest(msgspec.Struct, frozen=True, gc=False, omit_defaults=True):
    """One element of ``allocation_requests`` (mv >= 1.12 dict form). Sent back
    as the body of ``PUT /allocations/{consumer}`` to claim it. (The engine's
    twin, without the ``resources`` level, is ``EngineAllocation``.)"""

    allocations: dict[str, ProviderResources]
    mappings: dict[str, list[str]] = {}

    def amounts(self) -> list[tuple[str, str, int]]:
        """(provider uuid, resource class, amount) for every allocated pair."""
        return [(rp, rc, n) for rp, part in self.allocations.items() for rc, n in part.resources.items()]

    def as_resources(self) -> dict[str, dict[str, int]]:
        return {rp: dict(part.resources) for rp, part in self.allocations.items()}


class Capacity(msgspec.Struct, frozen=True, gc=False):
    capacity: int
    used: int


class ProviderSummary(msgspec.Struct, frozen=True, gc=False):
    """One entry of ``provider_summaries`` as decoded (the engine's is ``EngineSummary``)."""

    resources: dict[str, Capacity]
    traits: tuple[str, ...] = ()
    parent_provider_uuid: str | None = None
    root_provider_uuid: str | None = None


class Candidates(msgspec.Struct, frozen=True, gc=False):
    """The answer to a candidates query, with the microversion it came from
    (claims reuse it, docs/design/select-destinations.md#contract)."""

    allocation_requests: list[AllocationRequest]
    provider_summaries: dict[str, ProviderSummary]
    version: str = ""


class AllocationWrite(msgspec.Struct, frozen=True, omit_defaults=True):
    """The body of ``PUT /allocations/{consumer}`` (and one entry of ``POST
    /allocations``). ``consumer_generation`` is always sent: None means
    "this consumer must be new"."""

    allocations: dict[str, ProviderResources]
    project_id: str
    user_id: str
    consumer_generation: int | None
    mappings: dict[str, list[str]] | None = None
    consumer_type: str | None = None


class HeldAllocation(msgspec.Struct, frozen=True, gc=False):
    resources: dict[str, int]
    generation: int | None = None


class ConsumerAllocations(msgspec.Struct, frozen=True, gc=False, omit_defaults=True):
    """``GET /allocations/{consumer}``; empty ``allocations`` when it holds nothing."""

    allocations: dict[str, HeldAllocation] = {}
    consumer_generation: int | None = None
    project_id: str | None = None
    user_id: str | None = None
    consumer_type: str | None = None

    def as_resources(self) -> dict[str, dict[str, int]]:
        return {rp: dict(part.resources) for rp, part in self.allocations.items()}


class ProviderRecord(msgspec.Struct, frozen=True, gc=False, omit_defaults=True):
    """A resource provider as ``GET /resource_providers`` lists it (mv >= 1.14)."""

    uuid: str
    name: str
    generation: int
    root_provider_uuid: str | None = None
    parent_provider_uuid: str | None = None


class Inventory(msgspec.Struct, frozen=True, omit_defaults=True):
    total: int
    reserved: int = 0
    min_unit: int = 1
    max_unit: int | None = None  # None: Placement's default
    step_size: int = 1
    allocation_ratio: float = 1.0


class NewProvider(msgspec.Struct, frozen=True, kw_only=True):
    """A provider to create with its inventories, traits and aggregates
    (``PlacementClient.create_providers``); its parent, if any, comes first."""

    uuid: str
    name: str
    parent_uuid: str | None = None
    inventories: dict[str, Inventory] = {}
    traits: frozenset[str] = frozenset()
    aggregates: frozenset[str] = frozenset()


class ProviderInventories(msgspec.Struct, frozen=True):
    """``GET /resource_providers/{uuid}/inventories``."""

    inventories: dict[str, Inventory]
    resource_provider_generation: int


class ProviderAllocations(msgspec.Struct, frozen=True):
    """``GET /resource_providers/{uuid}/allocations``: consumer uuid → what it
    holds on this provider."""

    allocations: dict[str, ProviderResources]
    resource_provider_generation: int


class ProviderTraits(msgspec.Struct, frozen=True):
    traits: list[str]
    resource_provider_generation: int


class ProviderAggregates(msgspec.Struct, frozen=True):
    aggregates: list[str]
    resource_provider_generation: int


class WriteResult(enum.Enum):
    """How Placement answered an allocation write."""

    OK = "ok"
    # 409 other than a concurrent update: not enough capacity, max_unit, ...
    NO_CAPACITY = "no_capacity"
    # 409 placement.concurrent_update for a provider generation race that
    # Placement's own retries did not absorb: try elsewhere or again.
    PROVIDER_CONFLICT = "provider_conflict"
    # 409 consumer generation conflict: someone else wrote this consumer.
    CONSUMER_CONFLICT = "consumer_conflict"
    # 400: a provider or class named in the body no longer exists, bad body.
    INVALID = "invalid"


class WriteOutcome(msgspec.Struct, frozen=True):
    result: WriteResult
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.result is WriteResult.OK
