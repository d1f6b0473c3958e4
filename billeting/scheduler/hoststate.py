"""Host states: one per host that Placement offered, for one request.

A host state joins the host's record (catalog) with what Placement said
about its provider tree (summaries) and the candidates that use it. Usage
claimed earlier in the same request is kept in one ``Consumption`` shared
by every host state, so a claim on a sharing provider is seen by every host
that uses it, and the next instance of the request ranks on the new figures.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from billeting.placement_client.model import AllocationRequest, Candidates, ProviderSummary
from billeting.scheduler.catalog import HostRecord
from billeting.scheduler.directory import Directory


@dataclass(slots=True)
class Consumption:
    """Amounts claimed by this request so far: provider → class → amount.

    A claim also tells whose free capacity changed: ``changed`` (drained by
    the weighing stage) and ``stale`` (host states whose cached free figures
    must be recomputed; each drops itself from it when it does). Hosts are
    named by uuid, never referenced: a host state refers to its consumption,
    and a reference back would make every request's thousand host states a
    reference cycle that only the cyclic collector could free."""

    by_provider: dict[str, dict[str, int]] = field(default_factory=dict)
    # Provider → the hosts whose tree holds it, for providers of trees of
    # more than one provider; any other provider is a flat host's own (or a
    # sharing provider's, which changes no host's free figures).
    owners: dict[str, list[str]] = field(default_factory=dict)
    changed: set[str] = field(default_factory=set)
    stale: set[str] = field(default_factory=set)

    def add(self, request: AllocationRequest) -> None:
        for rp, part in request.allocations.items():
            mine = self.by_provider.setdefault(rp, {})
            for rc, n in part.resources.items():
                mine[rc] = mine.get(rc, 0) + n
            hosts = self.owners.get(rp, (rp,))
            self.stale.update(hosts)
            self.changed.update(hosts)

    def of(self, provider: str, rc: str) -> int:
        mine = self.by_provider.get(provider)
        return mine.get(rc, 0) if mine else 0


@dataclass(slots=True, eq=False)
class HostState:
    record: HostRecord
    # Providers of this host's tree that Placement summarized, root first.
    tree: list[str]
    summaries: Mapping[str, ProviderSummary]
    consumption: Consumption
    # Candidates that take something from this host's tree, Placement's order.
    candidates: list[AllocationRequest]
    # Topology level → domain name (rack → "r1", ...); read only.
    domains: Mapping[str, str]
    # Free capacity per class, filled on first use (see ``free``).
    free_cache: dict[str, int] | None = None
    uuid: str = field(init=False)  # the record's, read very often

    def __post_init__(self) -> None:
        self.uuid = self.record.uuid
        # Free figures count the host's own tree only (not sharing
        # providers), so only claims on its tree change them.
        if len(self.tree) > 1:
            owners = self.consumption.owners
            for rp in self.tree:
                owners.setdefault(rp, []).append(self.uuid)

    @property
    def name(self) -> str:
        return self.record.name

    @property
    def traits(self) -> tuple[str, ...]:
        root = self.summaries.get(self.record.uuid)
        return root.traits if root is not None else ()

    def free(self, rc: str) -> int:
        """Unclaimed capacity of ``rc`` across the host's own tree."""
        cache = self.free_cache
        stale = self.consumption.stale
        if not cache or (stale and self.uuid in stale):
            self._fill_free()
            cache = self.free_cache
        return cache.get(rc, 0)

    def _fill_free(self) -> None:
        # Every class in one pass over the tree: the weighers ask for several.
        consumption = self.consumption
        consumed = consumption.by_provider
        consumption.stale.discard(self.uuid)
        tree = self.tree
        if len(tree) == 1 and not (consumed and tree[0] in consumed):
            # The common case (a flat host this request has not claimed on):
            # one comprehension, no per-class bookkeeping.
            cache = {rc: (v if (v := cap.capacity - cap.used) > 0 else 0)
                     for rc, cap in self.summaries[tree[0]].resources.items()}
            self.free_cache = cache if cache else {"": 0}  # filled, even without inventory
            return
        cache = self.free_cache = {}
        for rp in tree:
            mine = consumed.get(rp) if consumed else None
            for rc, cap in self.summaries[rp].resources.items():
                value = cap.capacity - cap.used
                if mine:
                    value -= mine.get(rc, 0)
                cache[rc] = cache.get(rc, 0) + value
        for rc, value in cache.items():
            if value < 0:
                cache[rc] = 0
        if not cache:
            cache[""] = 0  # filled, even for a tree without inventory

    def fits(self, request: AllocationRequest) -> bool:
        """Does ``request`` still fit after this request's earlier claims?
        (Placement checked it against usage before them.)"""
        consumed = self.consumption.by_provider
        if not consumed:
            return True
        for rp, part in request.allocations.items():
            mine = consumed.get(rp)
            if not mine:
                continue
            summary = self.summaries.get(rp)
            if summary is None:
                continue
            for rc, n in part.resources.items():
                cap = summary.resources.get(rc)
                if cap is not None and cap.capacity - cap.used - mine.get(rc, 0) < n:
                    return False
        return True

    def first_candidate(self) -> AllocationRequest | None:
        for request in self.candidates:
            if self.fits(request):
                return request
        return None


# The domains of every host outside any topology aggregate (most hosts).
_NO_DOMAINS: Mapping[str, str] = MappingProxyType({})


def free_values(hosts: list[HostState], rc: str) -> list[int]:
    """``[h.free(rc) for h in hosts]`` without a method call per host: the
    resource weighers ask this of every candidate, for several classes.
    A flat host nothing was claimed on yet is read straight from its
    summary (the first ranking of a request meets only such hosts, and
    filling a cache of every class there would cost twice as much)."""
    out = []
    append = out.append
    for h in hosts:
        cache = h.free_cache
        if cache is None:
            consumed = h.consumption.by_provider
            tree = h.tree
            if len(tree) == 1 and not (consumed and tree[0] in consumed):
                cap = h.summaries[tree[0]].resources.get(rc)
                append(0 if cap is None or (v := cap.capacity - cap.used) < 0 else v)
                continue
        elif not ((stale := h.consumption.stale) and h.uuid in stale):
            append(cache.get(rc, 0))
            continue
        h._fill_free()
        append(h.free_cache.get(rc, 0))
    return out


def host_states(candidates: Candidates, records: Mapping[str, HostRecord],
                directory: Directory) -> list[HostState]:
    """One state per catalogued host that appears in ``candidates``, in the
    order Placement first mentions each host. Linear in the answer's size:
    the common case (each request on one provider) takes one dict lookup."""
    summaries = candidates.provider_summaries
    root_of: dict[str, str] = {}
    nested: dict[str, list[str]] = {}  # root -> its other summarized providers
    for rp, s in summaries.items():
        root = s.root_provider_uuid or rp
        root_of[rp] = root
        if root != rp:
            nested.setdefault(root, []).append(rp)
    by_host: dict[str, list[AllocationRequest]] = {}
    for request in candidates.allocation_requests:
        allocations = request.allocations
        if len(allocations) == 1:
            for rp in allocations:
                root = root_of.get(rp, rp)
                found = by_host.get(root)
                if found is None:
                    by_host[root] = [request]
                else:
                    found.append(request)
            continue
        for root in dict.fromkeys(root_of.get(rp, rp) for rp in allocations):
            by_host.setdefault(root, []).append(request)
    consumption = Consumption()
    states = []
    append = states.append
    get_record = records.get
    for host, requests in by_host.items():
        record = get_record(host)
        if record is None:
            continue  # a sharing provider or anything else that is not a host
        tree = [host, *nested[host]] if nested and host in nested else [host]
        domains = ({level: dom.name for level, dom in directory.domains_of(record.aggregates).items()}
                   if record.aggregates else _NO_DOMAINS)
        append(HostState(record, tree, summaries, consumption, requests, domains))
    return states
