"""Why no host was found, in words a person can act on.

A failed request is explained in three layers, each with counts:

1. Placement — how many hosts it offered out of how many exist, and, when
   it offered fewer, how many hosts fall short of each single constraint of
   the query (a class amount, a required trait, an aggregate set, disabled).
   These counts come from cheap ``GET /resource_providers`` questions asked
   only when a request fails; they overlap (a host can lack two things), so
   each reads as "N hosts lack X".
2. Filters — how many of the offered hosts each filter removed.
3. Claims — how many claims lost a race to another scheduler.
"""
from __future__ import annotations

from collections.abc import Sequence

import msgspec

from billeting.placement_client.client import PlacementClient, PlacementError
from billeting.placement_client.model import CandidateQuery
from billeting.scheduler.decision import Exclusion
from billeting.scheduler.nova_features import IMAGE_TYPE_PREFIX, disk_format_of
from billeting.scheduler.pipeline import FilterStep
from billeting.scheduler.prefilters import DISABLED_TRAIT


class Shortfall(msgspec.Struct, frozen=True):
    hosts: int
    reason: str


class FilterCount(msgspec.Struct, frozen=True):
    filter: str
    removed: int
    reason: str


class Explanation(msgspec.Struct, frozen=True, kw_only=True):
    message: str
    instances: int
    hosts_total: int
    hosts_offered: int
    query: str
    placement: list[Shortfall] = []
    filters: list[FilterCount] = []
    claims_lost: int = 0


def _amount(rc: str, n: int) -> str:
    if rc == "MEMORY_MB":
        return f"{n:,} MB of memory"
    if rc == "DISK_GB":
        return f"{n:,} GB of disk"
    if rc == "VCPU":
        return f"{n:,} vCPU" + ("s" if n != 1 else "")
    return f"{n:,} {rc}"


def _lacked(trait: str) -> str:
    if trait.startswith(IMAGE_TYPE_PREFIX):  # (request filter 3) say what it means for the image
        return f"lacked trait {trait} (cannot boot {disk_format_of(trait)} images)"
    return f"lacked trait {trait}"


def _roots(records) -> set[str]:
    return {p.root_provider_uuid or p.uuid for p in records}


def _listed(aggregates: frozenset[str]) -> str:
    return f"aggregate(s) {', '.join(sorted(aggregates))}"


def aggregate_names(directory, zone: str | None = None):
    """How an explanation names a set of aggregates: the availability zone
    the request asked for, the failure domains they stand for ("rack r1 or
    rack r2"), else their uuids."""
    zone_aggs = directory.az_aggregates(zone) if zone else frozenset()

    def name(aggregates: frozenset[str]) -> str:
        if zone and aggregates == zone_aggs:
            return f"availability zone {zone!r}"
        domains = [directory.domains_of([agg]) for agg in sorted(aggregates)]
        if domains and all(len(found) == 1 for found in domains):
            return " or ".join(sorted(f"{d.level} {d.name}" for found in domains for d in found.values()))
        return _listed(aggregates)

    return name


def placement_shortfalls(client: PlacementClient, query: CandidateQuery, host_uuids: set[str],
                         names=None, exclusions: Sequence[Exclusion] = ()) -> list[Shortfall]:
    """Per constraint of ``query``: how many of the hosts fail it alone.
    ``names``: how to word a set of aggregates (``aggregate_names``);
    ``exclusions``: the query's forbidden aggregates and why (``Decision``)."""
    names = names or _listed
    found: list[Shortfall] = []
    total = len(host_uuids)

    def listed(**ask) -> int | None:
        """How many of the hosts own a provider Placement lists for ``ask``
        (None when it cannot say: an explanation must never hide the real failure)."""
        try:
            return len(_roots(client.list_providers(**ask)) & host_uuids)
        except PlacementError:
            return None

    def lacking(reason: str, **ask) -> None:
        having = listed(**ask)
        if having is not None and total - having:
            found.append(Shortfall(total - having, reason))

    def inside(reason: str, **ask) -> None:
        there = listed(**ask)
        if there:
            found.append(Shortfall(there, reason))

    for group in query.groups:
        where = f" (request group {group.suffix!r})" if group.suffix else ""
        for rc, n in sorted(group.resources.items()):
            lacking(f"had no {_amount(rc, n)} free in one provider{where}", resources={rc: n})
        for any_of in group.required:
            if len(any_of) == 1:
                trait = next(iter(any_of))
                lacking(f"lacked trait {trait}{where}", required=[trait])
        for any_of in group.member_of:
            lacking(f"were outside {names(any_of)}{where}", member_of=any_of)
    for ex in exclusions:
        inside(f"were in {ex.where}, {ex.why}", member_of=ex.aggregates)
    explained = frozenset().union(*(ex.aggregates for ex in exclusions))
    for group in query.groups:  # what the caller itself excluded
        rest = group.forbidden_aggregates - explained
        if rest:
            where = f" (request group {group.suffix!r})" if group.suffix else ""
            inside(f"were in {names(rest)}, which the request excludes{where}", member_of=rest)
    for trait in sorted(query.root_required):
        lacking(_lacked(trait), required=[trait])
    if DISABLED_TRAIT in query.root_forbidden:
        inside("were disabled", required=[DISABLED_TRAIT])
    return found


def explain(*, instances: int, hosts_total: int, hosts_offered: int, query: str,
            placement: list[Shortfall], steps: list[FilterStep], claims_lost: int,
            placed: int = 0, prefix: str | None = None) -> Explanation:
    reasons = [f"{s.hosts:,} {s.reason}" for s in placement]
    if hosts_offered == 0 and not placement:
        reasons.append("Placement found no host matching the whole request")
    reasons += [f"{s.removed:,} {s.explains}" for s in steps]
    if claims_lost:
        reasons.append(f"{claims_lost:,} claim{'s' if claims_lost != 1 else ''} lost to concurrent requests")
    head = prefix or (f"No valid host was found for {instances} instance{'s' if instances != 1 else ''}"
                      + (f" (placed {placed} before running out; all rolled back)" if placed else ""))
    message = (f"{head}. Placement offered {hosts_offered:,} of {hosts_total:,} hosts"
               + (": " + "; ".join(reasons) if reasons else "") + ".")
    return Explanation(message=message, instances=instances, hosts_total=hosts_total,
                       hosts_offered=hosts_offered, query=query, placement=placement,
                       filters=[FilterCount(s.name, s.removed, s.explains) for s in steps],
                       claims_lost=claims_lost)


def unsatisfiable(reason: str) -> Explanation:
    """A request that cannot succeed whatever the fleet holds."""
    return Explanation(message=f"No valid host: {reason}.", instances=0, hosts_total=0, hosts_offered=0,
                       query="")
