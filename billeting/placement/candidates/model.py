"""The typed interface of the candidates engine: a parsed request in, allocation
requests and provider summaries out.

Everything coming in is already validated and resolved to database ids by the
HTTP layer; everything going out is keyed by the public names (provider uuids,
resource class and trait names) so that the HTTP layer only has to wrap it in
the shape of the negotiated microversion. Leaf values are plain dicts and lists
that serialize directly with orjson, which keeps response building cheap.

A client's view of the same objects is ``billeting.placement_client.model``
(``RequestGroup``, ``ProviderSummary``, ``AllocationRequest``): msgspec Structs
in the wire shape, keyed by names. The engine's types stay separate because
they hold something else: database ids, pre-serialized fragments and a
response memo, built by the thousand per request without a wire round trip.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypedDict

from orjson import Fragment


@dataclass(slots=True, frozen=True)
class ResolvedGroup:
    """One request group (docs/design/allocation-candidates.md#one-request-group), its classes and
    traits resolved to database ids (the client's by-name form is
    ``placement_client.model.RequestGroup``). ``suffix`` is ``""`` for the
    unsuffixed group."""

    suffix: str
    # resource class id -> amount; empty for a resourceless group (>= 1.36)
    resources: dict[int, int] = field(default_factory=dict)
    # every set must be hit by at least one trait (a plain name is a 1-element set)
    required: tuple[frozenset[int], ...] = ()
    forbidden: frozenset[int] = frozenset()
    # every set must be hit by at least one directly associated aggregate uuid
    member_of: tuple[frozenset[str], ...] = ()
    forbidden_aggregates: frozenset[str] = frozenset()
    in_tree: str | None = None  # provider uuid whose tree the group is confined to

    @property
    def suffixed(self) -> bool:
        return self.suffix != ""


@dataclass(slots=True, frozen=True)
class CandidateRequest:
    groups: tuple[ResolvedGroup, ...]
    limit: int | None = None
    group_policy: str | None = None  # "none", "isolate" or None
    root_required: frozenset[int] = frozenset()
    root_forbidden: frozenset[int] = frozenset()
    # each entry: suffixes whose chosen providers must share one subtree root
    same_subtree: tuple[frozenset[str], ...] = ()
    nested_aware: bool = True  # mv >= 1.29; below, one provider per tree only
    summary_all_classes: bool = True  # mv >= 1.27; below, requested classes only
    summary_traits: bool = True  # mv >= 1.17
    randomize: bool = False  # [placement] randomize_allocation_candidates
    max_candidates: int = -1  # [placement] max_allocation_candidates, -1 = no cap
    # With a cap: take each tree's combinations in turn (depth-first) or one
    # from every tree per round (breadth-first)
    breadth_first: bool = False

    @property
    def requested_classes(self) -> frozenset[int]:
        return frozenset(rc for g in self.groups for rc in g.resources)


class EngineCapacity(TypedDict):
    """One class in a provider summary (a plain dict: cheapest to build and serialize)."""

    capacity: int
    used: int


@dataclass(slots=True)
class EngineSummary:
    """One provider of ``provider_summaries`` as the engine finds it (the
    decoded wire form is ``placement_client.model.ProviderSummary``)."""

    uuid: str
    parent_uuid: str | None
    root_uuid: str
    # resource class name -> capacity/usage, and trait names; either may be
    # already-serialized JSON of that shape (an orjson.Fragment)
    resources: dict[str, EngineCapacity] | Fragment
    traits: list[str] | Fragment
    # (response shape, its serialized form), memoized by the HTTP layer:
    # cached summaries are sent again and again unchanged. One shape only
    # (replaced whole, so threads never see a shape with another's text),
    # which is what the summary cache budgets for.
    wire: tuple | None = field(default=None, compare=False, repr=False)


@dataclass(slots=True)
class EngineAllocation:
    """One allocation request as the engine builds it: plain dicts, without
    the wire's ``resources`` level (that is ``placement_client.model.AllocationRequest``)."""

    # provider uuid -> {resource class name: amount}; the inner dicts may be
    # shared between requests and must be treated as read-only
    allocations: dict[str, dict[str, int]]
    mappings: dict[str, list[str]]  # group suffix -> provider uuids (lists shared, read-only too)


@dataclass(slots=True)
class SingleProviderRequests:
    """Many allocation requests that each take the same ``resources`` from one
    provider, for one group: ``{"allocations": {p: resources}, "mappings":
    {suffix: [p]}}`` for every ``p`` in ``providers``. A compact form of the
    commonest answer (one group, flat fleet) that spares building thousands
    of identical small objects twice."""

    suffix: str
    resources: dict[str, int]
    providers: list[str]  # uuids, one request each


@dataclass(slots=True)
class CandidateResult:
    allocation_requests: list[EngineAllocation] | SingleProviderRequests
    provider_summaries: list[EngineSummary]

    def __len__(self) -> int:
        requests = self.allocation_requests
        return len(requests.providers if isinstance(requests, SingleProviderRequests) else requests)

    def requests(self) -> list[EngineAllocation]:
        """The allocation requests, always in the general form."""
        requests = self.allocation_requests
        if isinstance(requests, SingleProviderRequests):
            return [EngineAllocation({p: requests.resources}, {requests.suffix: [p]}) for p in requests.providers]
        return requests


def empty_result() -> CandidateResult:
    return CandidateResult([], [])
