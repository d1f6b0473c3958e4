"""Pre-filters: what a request asks of Placement, before any host is seen.

Everything Placement can check goes into the candidates query, because one
clause there is cheaper than a filter over the hosts afterwards. Each
pre-filter is a small class registered by name (like the filters and the
weighers): ``active`` says whether this request and configuration give it
anything to do, ``apply`` adds its clauses to the query being drafted.
They run in ``order``; what each adds:

* availability zone → ``member_of=in:<the zone's aggregates>``
* tenant isolation (when enabled) → ``member_of=in:<the project's aggregates>``
* a requested node (or a host with one node) → ``in_tree``
* "same <level> as X" → ``member_of=in:<X's domain aggregate>``;
  "different <level> from X" → ``member_of=!in:<X's domain aggregate>``
* a server group scoped to a level: domains already holding the most
  members it allows → ``member_of=!in:...``; affinity → ``member_of=in:``
* isolated aggregates (when enabled) → ``member_of=!in:...``
* soft affinity by distance: the domain being tried → ``member_of=in:``
* image type support / image metadata (when enabled) → ``root_required=...``
* disabled computes → ``root_required=!COMPUTE_STATUS_DISABLED``

A pre-filter that makes the filters need every candidate (same/different
host hints, a host with several nodes) drops the query's limit. Server
groups do not: their requests are sampled, ending on an unlimited query
(``sample``), and a group kept apart per failure domain samples enough
domains (``domain_sample``). ``Unsatisfiable`` says, before asking Placement at all, that
a request cannot succeed and why.

Cost: no database or Placement reads; lookups in the directory and the
catalog's in-memory records only.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from os_traits import COMPUTE_STATUS_DISABLED as DISABLED_TRAIT

from billeting.scheduler import nova_features
from billeting.scheduler.catalog import HostCatalog
from billeting.scheduler.decision import Decision, Exclusion
from billeting.scheduler.directory import Directory, Domain
from billeting.scheduler.request import HOST_SCOPE, ScheduleRequest

REGISTRY: dict[str, type["PreFilter"]] = {}


class Unsatisfiable(Exception):
    """The request cannot succeed whatever Placement says; ``str`` says why."""


@dataclass(slots=True)
class Draft:
    """The query's clauses as the pre-filters add them."""

    limit: int | None
    version: tuple[int, int]                     # Placement's microversion
    near: Domain | None = None                   # the domain being tried (soft affinity by distance)
    member_of: list[frozenset[str]] = field(default_factory=list)   # each: in one of these
    forbidden: set[str] = field(default_factory=set)                # in none of these
    in_tree: str | None = None
    root_required: set[str] = field(default_factory=set)
    root_forbidden: set[str] = field(default_factory=set)
    exclusions: list[Exclusion] = field(default_factory=list)       # forbidden aggregates, and why


class PreFilter:
    name: ClassVar[str]
    order: ClassVar[int]

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        if "name" in cls.__dict__:
            REGISTRY[cls.name] = cls

    def active(self, decision: Decision, draft: Draft) -> bool:
        return True

    def apply(self, draft: Draft, decision: Decision, catalog: HostCatalog) -> None:
        raise NotImplementedError


def build_all() -> list[PreFilter]:
    """Every registered pre-filter, in order."""
    return [cls() for cls in sorted(REGISTRY.values(), key=lambda c: c.order)]


# --- helpers -------------------------------------------------------------------

def aggregates(directory: Directory, level: str, names) -> frozenset[str]:
    found = set()
    for name in names:
        dom = directory.domain(level, name)
        if dom is not None:
            found.add(dom.aggregate)
    return frozenset(found)


def few(names, most: int = 5) -> str:
    """At most ``most`` names, then how many more (an explanation stays readable)."""
    names = list(names)
    shown = ", ".join(names[:most])
    return shown + (f" and {len(names) - most:,} more" if len(names) > most else "")


def _members(n: int) -> str:
    return f"{n} member" + ("s" if n != 1 else "")


def _domains(level: str, names) -> str:
    return few([f"{level} {name}" for name in sorted(names)])


_TRAIT_KEY = "trait:"


def required_traits(directory: Directory, aggregate: str) -> set[str]:
    """The traits an aggregate's metadata requires (``trait:T=required``)."""
    return {key[len(_TRAIT_KEY):] for key, value in directory.aggregate_metadata(aggregate).items()
            if key.startswith(_TRAIT_KEY) and value == "required"}


def isolated_aggregates(directory: Directory, request: ScheduleRequest) -> frozenset[str]:
    """The aggregates whose metadata requires a trait this request does not
    require anywhere; the hosts in them are kept for the requests that do."""
    wanted = {t for g in request.groups for any_of in g.required for t in any_of} | set(request.root_required)
    return frozenset(agg for agg in directory.known_aggregates() if required_traits(directory, agg) - wanted)


def image_type_traits(request: ScheduleRequest) -> frozenset[str]:
    """The trait of the hosts that can boot the image's disk format. Empty
    when booting from a volume (the hypervisor reads the volume, never the
    image) or when the image names no format. A format no host can ever
    report fails here, naming the trait, where Placement would only refuse
    the query for an unknown trait."""
    disk_format = request.image_disk_format
    if request.is_bfv or not disk_format:
        return frozenset()
    trait = nova_features.image_type_trait(disk_format)
    if trait not in nova_features.IMAGE_TYPE_TRAITS:
        known = nova_features.disk_formats(nova_features.IMAGE_TYPE_TRAITS)
        raise Unsatisfiable(f"the image's disk format {disk_format!r} needs trait {trait}, which no compute "
                            f"host can report (hosts can support the disk formats {known})")
    return frozenset({trait})


# --- the built-in pre-filters, in the order they run ------------------------------

class AvailabilityZone(PreFilter):
    name, order = "AvailabilityZone", 10

    def active(self, decision, draft):
        return bool(decision.request.availability_zone)

    def apply(self, draft, decision, catalog):
        zone_aggs = decision.directory.az_aggregates(decision.request.availability_zone)
        if zone_aggs:
            draft.member_of.append(zone_aggs)


class TenantAggregates(PreFilter):
    """``limit_tenants_to_placement_aggregate``: projects with aggregates of
    their own go only there; with ``placement_aggregate_required_for_tenants``
    projects without any fail."""

    name, order = "TenantAggregates", 20

    def active(self, decision, draft):
        return decision.settings.limit_tenants_to_placement_aggregate

    def apply(self, draft, decision, catalog):
        request = decision.request
        tenant_aggs = decision.directory.tenant_aggregates(request.project_id)
        if tenant_aggs:
            draft.member_of.append(tenant_aggs)
        elif decision.settings.placement_aggregate_required_for_tenants:
            raise Unsatisfiable(f"project {request.project_id} has no aggregate of its own and "
                                "tenant aggregates are required")


class Destination(PreFilter):
    """A requested node, or a host with one node: ``in_tree``. A host with
    several nodes keeps them all visible (no limit)."""

    name, order = "Destination", 30

    def active(self, decision, draft):
        dest = decision.request.destination
        return dest is not None and bool(dest.node or dest.host)

    def apply(self, draft, decision, catalog):
        dest = decision.request.destination
        name = dest.node or dest.host
        nodes = [r for r in catalog.by_name(name)
                 if (not dest.host or r.service_host.lower() == dest.host.lower())
                 and (not dest.node or dest.node.lower() in (r.name.lower(), r.uuid))]
        if dest.node and not nodes:
            nodes = list(catalog.records([dest.node]).values())  # a node given by uuid
        if not nodes:
            if dest.host and dest.node and catalog.by_name(dest.node):
                raise Unsatisfiable(f"node {dest.node} is not a node of host {dest.host}")
            raise Unsatisfiable(f"no such {'node' if dest.node else 'host'}: {name}")
        if len(nodes) == 1:
            draft.in_tree = nodes[0].uuid
        else:
            draft.limit = None  # every node of the host must stay visible


class FailureDomains(PreFilter):
    """"same <level> as X" → only X's domain; "different <level> from X" →
    never X's domain."""

    name, order = "FailureDomains", 40

    def active(self, decision, draft):
        return bool(decision.domain_targets)

    def apply(self, draft, decision, catalog):
        request, directory = decision.request, decision.directory
        for (relation, level), names in decision.domain_targets.items():
            aggs = aggregates(directory, level, names)
            if relation == "same":
                draft.member_of.append(aggs)
            elif aggs:
                draft.forbidden |= aggs
                apart = sorted({i for c in request.domain_constraints
                                if c.relation == "different" and c.level == level for i in c.instances})
                draft.exclusions.append(Exclusion(aggs, _domains(level, names),
                                                  f"where the request must not share a {level} with "
                                                  f"instance(s) {few(apart)}"))


class ServerGroup(PreFilter):
    """A group scoped to a level: the domains already holding the most
    members anti-affinity allows are left out; affinity keeps to the
    members' domain. The query keeps its limit: host-scoped groups and
    several instances at once grow their sample up to no limit at all
    (``sample.needs_every``)."""

    name, order = "ServerGroup", 50

    def active(self, decision, draft):
        return decision.request.server_group is not None

    def apply(self, draft, decision, catalog):
        group = decision.request.server_group
        if group.scope == HOST_SCOPE or not group.hard:
            return
        if group.anti:
            full = [name for name, n in decision.group_domains.items() if n >= group.max_server_per_host]
            aggs = aggregates(decision.directory, group.scope, full)
            if aggs:
                draft.forbidden |= aggs
                draft.exclusions.append(Exclusion(
                    aggs, _domains(group.scope, full),
                    f"which each already hold {_members(group.max_server_per_host)} of server group "
                    f"{group.uuid}, the most its anti-affinity per {group.scope} allows"))
        elif decision.group_domains:
            draft.member_of.append(aggregates(decision.directory, group.scope, decision.group_domains))


class HostHints(PreFilter):
    """same_host / different_host are checked by filters over every candidate."""

    name, order = "HostHints", 60

    def active(self, decision, draft):
        return bool(decision.request.same_host or decision.request.different_host)

    def apply(self, draft, decision, catalog):
        draft.limit = None


class IsolatedAggregates(PreFilter):
    """``enable_isolated_aggregate_filtering``: an aggregate whose metadata
    says ``trait:T=required`` keeps out every request that does not require T."""

    name, order = "IsolatedAggregates", 70

    def active(self, decision, draft):
        return decision.settings.enable_isolated_aggregate_filtering

    def apply(self, draft, decision, catalog):
        directory = decision.directory
        isolated = isolated_aggregates(directory, decision.request)
        if isolated:
            draft.forbidden |= isolated
            traits = sorted(set().union(*(required_traits(directory, agg) for agg in isolated)))
            draft.exclusions.append(Exclusion(isolated, f"aggregate(s) {few(sorted(isolated))}",
                                              f"kept for requests that require trait(s) {few(traits)}"))


class Nearness(PreFilter):
    """Soft affinity by distance: the domain being tried."""

    name, order = "Nearness", 80

    def active(self, decision, draft):
        return draft.near is not None

    def apply(self, draft, decision, catalog):
        draft.member_of.append(frozenset({draft.near.aggregate}))


class ImageTypeSupport(PreFilter):
    """``query_placement_for_image_type_support``: a host that can boot the
    image's disk format."""

    name, order = "ImageTypeSupport", 90

    def active(self, decision, draft):
        return decision.settings.query_placement_for_image_type_support

    def apply(self, draft, decision, catalog):
        draft.root_required |= image_type_traits(decision.request)


class ImageMetadata(PreFilter):
    """``image_metadata_prefilter``: the image's bus, video, NIC model and
    architecture properties become traits the compute node must have."""

    name, order = "ImageMetadata", 100

    def active(self, decision, draft):
        return decision.settings.image_metadata_prefilter

    def apply(self, draft, decision, catalog):
        draft.root_required |= nova_features.image_metadata_traits(decision.request.image_properties)


class ComputeDisabled(PreFilter):
    """Disabled computes carry a trait Placement can leave out (1.35+; older
    Placements: ComputeFilter checks the trait)."""

    name, order = "ComputeDisabled", 110

    def active(self, decision, draft):
        return draft.version >= (1, 35)

    def apply(self, draft, decision, catalog):
        draft.root_forbidden.add(DISABLED_TRAIT)
