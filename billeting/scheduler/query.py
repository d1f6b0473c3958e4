"""Turn a request into one Placement candidates query (request filters).

Everything that Placement can check is pushed into the query, because one
clause there is cheaper than a filter over thousands of hosts afterwards:

* availability zone → ``member_of=in:<the zone's aggregates>``
* tenant isolation (when enabled) → ``member_of=in:<the project's aggregates>``
* disabled computes → ``root_required=!COMPUTE_STATUS_DISABLED``
* image type support (when enabled) → ``root_required=COMPUTE_IMAGE_TYPE_<FORMAT>``
* a requested node (or a host with one node) → ``in_tree``
* "same <level> as X" → ``member_of=in:<X's domain aggregate>``;
  "different <level> from X" → ``member_of=!in:<X's domain aggregate>``
* a server group scoped to a level: domains already holding the most
  members it allows → ``member_of=!in:...``; affinity → ``member_of=in:``
* soft affinity by distance: the domain being tried → ``member_of=in:``

What cannot be known before the first claim (siblings within this request)
is left to the filters. ``Unsatisfiable`` says, before asking Placement at
all, that a request cannot succeed and why.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

import msgspec

from billeting.placement_client.model import CandidateQuery, RequestGroup
from billeting.scheduler import nova_features
from billeting.scheduler.catalog import HostCatalog, HostRecord
from billeting.scheduler.decision import Decision, Exclusion
from billeting.scheduler.directory import Directory, Domain
from billeting.scheduler.request import HOST_SCOPE, ScheduleRequest

DISABLED_TRAIT = "COMPUTE_STATUS_DISABLED"


class Unsatisfiable(Exception):
    """The request cannot succeed whatever Placement says; ``str`` says why."""


def referenced_instances(request: ScheduleRequest) -> set[str]:
    """Instances whose hosts the decision depends on."""
    found = set(request.same_host) | set(request.different_host)
    if request.server_group is not None:
        found |= set(request.server_group.members)
    for c in request.domain_constraints:
        found |= set(c.instances)
    if request.near is not None:
        found |= set(request.near.instances)
    return found - set(request.instance_uuids)


def seed(decision: Decision, located: Mapping[str, str], records: Mapping[str, HostRecord]) -> None:
    """Fill the decision with where the referenced instances are."""
    request, directory = decision.request, decision.directory

    def domains(host: str) -> dict[str, Domain]:
        rec = records.get(host)
        return directory.domains_of(rec.aggregates) if rec is not None else {}

    group = request.server_group
    if group is not None:
        for member in group.members:
            host = located.get(member)
            if host is None:
                continue  # not placed (yet, or any more): constrains nothing
            decision.group_hosts[host] += 1
            if group.scope != HOST_SCOPE:
                dom = domains(host).get(group.scope)
                if dom is not None:
                    decision.group_domains[dom.name] += 1
    decision.same_hosts = frozenset(located[i] for i in request.same_host if i in located)
    decision.different_hosts = frozenset(located[i] for i in request.different_host if i in located)
    for c in request.domain_constraints:
        names = set()
        for inst in c.instances:
            host = located.get(inst)
            dom = domains(host).get(c.level) if host else None
            if dom is None:
                if c.relation == "same":
                    where = "is not placed" if host is None else f"is on a host in no {c.level}"
                    raise Unsatisfiable(f"instance {inst} {where}, so no host can share its {c.level}")
                continue
            names.add(dom.name)
        key = (c.relation, c.level)
        decision.domain_targets[key] = frozenset(decision.domain_targets.get(key, frozenset()) | names)
        if c.relation == "same" and len(decision.domain_targets[key]) > 1:
            raise Unsatisfiable(f"the instances to share a {c.level} with are in different "
                                f"{c.level}s: {', '.join(sorted(decision.domain_targets[key]))}")
    missing_same = [i for i in request.same_host if i not in located]
    if missing_same:
        raise Unsatisfiable(f"same_host names instance(s) that are not placed: {', '.join(missing_same)}")
    if len(decision.same_hosts) > 1:
        raise Unsatisfiable("same_host names instances that run on different hosts")


def _aggregates(directory: Directory, level: str, names) -> frozenset[str]:
    found = set()
    for name in names:
        dom = directory.domain(level, name)
        if dom is not None:
            found.add(dom.aggregate)
    return frozenset(found)


def _few(names, most: int = 5) -> str:
    """At most ``most`` names, then how many more (an explanation stays readable)."""
    names = list(names)
    shown = ", ".join(names[:most])
    return shown + (f" and {len(names) - most:,} more" if len(names) > most else "")


def _members(n: int) -> str:
    return f"{n} member" + ("s" if n != 1 else "")


def _domains(level: str, names) -> str:
    return _few([f"{level} {name}" for name in sorted(names)])


_TRAIT_KEY = "trait:"


def _required_traits(directory: Directory, aggregate: str) -> set[str]:
    """The traits an aggregate's metadata requires (``trait:T=required``)."""
    return {key[len(_TRAIT_KEY):] for key, value in directory.aggregate_metadata(aggregate).items()
            if key.startswith(_TRAIT_KEY) and value == "required"}


def isolated_aggregates(directory: Directory, request: ScheduleRequest) -> frozenset[str]:
    """Request filter 5 of spec 2.4: the aggregates whose metadata requires a
    trait this request does not require anywhere; the hosts in them are kept
    for the requests that do."""
    wanted = {t for g in request.groups for any_of in g.required for t in any_of} | set(request.root_required)
    return frozenset(agg for agg in directory.known_aggregates() if _required_traits(directory, agg) - wanted)


def image_type_traits(request: ScheduleRequest) -> frozenset[str]:
    """Request filter 3 of spec 2.4: the trait of the hosts that can boot the
    image's disk format. None when booting from a volume (the hypervisor
    reads the volume, never the image) or when the image names no format.
    A format no host can ever report fails here, naming the trait, where
    Placement would only refuse the query for an unknown trait."""
    disk_format = request.image_disk_format
    if request.is_bfv or not disk_format:
        return frozenset()
    trait = nova_features.image_type_trait(disk_format)
    if trait not in nova_features.IMAGE_TYPE_TRAITS:
        known = nova_features.disk_formats(nova_features.IMAGE_TYPE_TRAITS)
        raise Unsatisfiable(f"the image's disk format {disk_format!r} needs trait {trait}, which no compute "
                            f"host can report (hosts can support the disk formats {known})")
    return frozenset({trait})


def build(decision: Decision, catalog: HostCatalog, *, version: tuple[int, int],
          near: Domain | None = None, sample: int | None = None) -> CandidateQuery:
    """The Placement query of ``decision``'s request. ``sample``: ask for at
    most that many candidates (the sample stage's size), unless the request
    needs every candidate seen (then there is no limit at all)."""
    request, settings, directory = decision.request, decision.settings, decision.directory
    member_of: list[frozenset[str]] = []
    forbidden: set[str] = set()
    in_tree: str | None = None
    limit: int | None = settings.max_placement_results
    if sample is not None:
        limit = min(limit, sample)

    if request.availability_zone:
        zone_aggs = directory.az_aggregates(request.availability_zone)
        if zone_aggs:
            member_of.append(zone_aggs)
    if settings.limit_tenants_to_placement_aggregate:
        tenant_aggs = directory.tenant_aggregates(request.project_id)
        if tenant_aggs:
            member_of.append(tenant_aggs)
        elif settings.placement_aggregate_required_for_tenants:
            raise Unsatisfiable(f"project {request.project_id} has no aggregate of its own and "
                                "tenant aggregates are required")

    dest = request.destination
    if dest is not None and (dest.node or dest.host):
        name = dest.node or dest.host
        nodes = [r for r in catalog.by_name(name)
                 if (not dest.host or r.service_host.lower() == dest.host.lower())
                 and (not dest.node or dest.node.lower() in (r.name.lower(), r.uuid))]
        if dest.node and not nodes:
            nodes = catalog.records([dest.node]).values()  # a node given by uuid
            nodes = list(nodes)
        if not nodes:
            if dest.host and dest.node and catalog.by_name(dest.node):
                raise Unsatisfiable(f"node {dest.node} is not a node of host {dest.host}")
            raise Unsatisfiable(f"no such {'node' if dest.node else 'host'}: {name}")
        if len(nodes) == 1:
            in_tree = nodes[0].uuid
        else:
            limit = None  # every node of the host must stay visible

    exclusions: list[Exclusion] = []
    for (relation, level), names in decision.domain_targets.items():
        aggs = _aggregates(directory, level, names)
        if relation == "same":
            member_of.append(aggs)
        elif aggs:
            forbidden |= aggs
            apart = sorted({i for c in request.domain_constraints
                            if c.relation == "different" and c.level == level for i in c.instances})
            exclusions.append(Exclusion(aggs, _domains(level, names),
                                        f"where the request must not share a {level} with instance(s) "
                                        f"{_few(apart)}"))

    group = request.server_group
    if group is not None:
        if group.scope == HOST_SCOPE or request.num_instances > 1:
            limit = None  # the filters must see every candidate (and siblings need a spread)
        if group.scope != HOST_SCOPE and group.hard:
            if group.anti:
                full = [name for name, n in decision.group_domains.items() if n >= group.max_server_per_host]
                aggs = _aggregates(directory, group.scope, full)
                if aggs:
                    forbidden |= aggs
                    exclusions.append(Exclusion(
                        aggs, _domains(group.scope, full),
                        f"which each already hold {_members(group.max_server_per_host)} of server group "
                        f"{group.uuid}, the most its anti-affinity per {group.scope} allows"))
            elif decision.group_domains:
                member_of.append(_aggregates(directory, group.scope, decision.group_domains))
    if request.same_host or request.different_host:
        limit = None
    if settings.enable_isolated_aggregate_filtering:
        isolated = isolated_aggregates(directory, request)
        if isolated:
            forbidden |= isolated
            traits = sorted(set().union(*(_required_traits(directory, agg) for agg in isolated)))
            exclusions.append(Exclusion(isolated, f"aggregate(s) {_few(sorted(isolated))}",
                                        f"kept for requests that require trait(s) {_few(traits)}"))
    decision.exclusions = exclusions
    if near is not None:
        member_of.append(frozenset({near.aggregate}))

    groups = list(request.groups)
    base = next((g for g in groups if g.suffix == ""), None)
    extra_member_of = tuple(m for m in member_of if m)
    if any(not m for m in member_of):
        raise Unsatisfiable("a required failure domain or zone has no aggregate in Placement")
    if extra_member_of or forbidden or in_tree:
        if base is None:
            base = RequestGroup()
            groups.insert(0, base)
        index = groups.index(base)
        groups[index] = msgspec.structs.replace(
            base, member_of=base.member_of + extra_member_of,
            forbidden_aggregates=base.forbidden_aggregates | forbidden,
            in_tree=in_tree or base.in_tree)

    root_required = request.root_required
    if settings.query_placement_for_image_type_support:
        root_required = root_required | image_type_traits(request)
    if settings.image_metadata_prefilter:
        root_required = root_required | nova_features.image_metadata_traits(request.image_properties)
    root_forbidden = set(request.root_forbidden)
    if version >= (1, 35):
        root_forbidden.add(DISABLED_TRAIT)  # older Placements: ComputeFilter checks the trait
    return CandidateQuery(groups=tuple(groups), limit=limit, group_policy=request.group_policy,
                          root_required=root_required, root_forbidden=frozenset(root_forbidden),
                          same_subtree=request.same_subtree)


def nearness_domains(decision: Decision, located: Mapping[str, str],
                     records: Mapping[str, HostRecord]) -> list[tuple[str, Domain] | tuple[None, None]]:
    """For soft affinity by distance: the domains to try, nearest first, then
    "anywhere" as (None, None)."""
    near = decision.request.near
    directory = decision.directory
    levels = directory.levels
    if near.level not in levels:
        raise Unsatisfiable(f"unknown topology level {near.level!r} (levels: {', '.join(levels)})")
    start: Domain | None = None
    if near.domain is not None:
        start = directory.domain(near.level, near.domain)
        if start is None:
            raise Unsatisfiable(f"no {near.level} named {near.domain!r}")
    else:
        counts: Counter = Counter()
        for inst in near.instances:
            host = located.get(inst)
            rec = records.get(host) if host else None
            if rec is not None:
                dom = directory.domains_of(rec.aggregates).get(near.level)
                if dom is not None:
                    counts[dom.name] += 1
        if counts:
            start = directory.domain(near.level, counts.most_common(1)[0][0])
    tries: list = []
    if start is not None:
        for level in levels[levels.index(near.level):]:
            dom = start if level == start.level else directory.enclosing(start, level)
            if dom is not None:
                tries.append((level, dom))
    tries.append((None, None))
    return tries
