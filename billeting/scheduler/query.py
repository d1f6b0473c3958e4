"""Turn a request into one Placement candidates query.

``seed`` finds where the instances a request refers to are (server-group
members, "same/different <level> as X", soft affinity by distance);
``build`` drafts the query from the request and lets every registered
pre-filter (``prefilters``) add what Placement can check. What cannot be
known before the first claim (siblings within this request) is left to the
filters. ``Unsatisfiable`` says, before asking Placement at all, that a
request cannot succeed and why.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

import msgspec

from billeting.placement_client.model import CandidateQuery, RequestGroup
from billeting.scheduler.catalog import HostCatalog, HostRecord
from billeting.scheduler.decision import Decision
from billeting.scheduler.directory import Domain
from billeting.scheduler.prefilters import REGISTRY, Draft, Unsatisfiable, build_all
from billeting.scheduler.request import HOST_SCOPE, ScheduleRequest
from billeting.scheduler.sample import EVERY

_built: tuple[int, list] = (-1, [])


def _prefilters() -> list:
    """The registered pre-filters, built again only when one was registered
    since (a plugin module imported later); they keep no state between requests."""
    global _built
    count, found = _built
    if count != len(REGISTRY):
        _built = (len(REGISTRY), build_all())
        found = _built[1]
    return found


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
            if (rec := records.get(host)) is not None:
                decision.group_cells[rec.cell_uuid] += 1
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


def build(decision: Decision, catalog: HostCatalog, *, version: tuple[int, int],
          near: Domain | None = None, sample: int | None = None) -> CandidateQuery:
    """The Placement query of ``decision``'s request: the request's own
    groups and root traits, with what every active pre-filter adds.
    ``sample``: ask for at most that many candidates (the sample stage's
    size; ``sample.EVERY``: no limit), unless a pre-filter needs every
    candidate seen (no limit)."""
    request, settings = decision.request, decision.settings
    if sample == EVERY:
        limit = None
    else:
        limit = settings.max_placement_results if sample is None else min(settings.max_placement_results, sample)
    draft = Draft(limit=limit, version=version, near=near, root_required=set(request.root_required),
                  root_forbidden=set(request.root_forbidden))
    for prefilter in _prefilters():
        if prefilter.active(decision, draft):
            prefilter.apply(draft, decision, catalog)
    decision.exclusions = draft.exclusions

    groups = list(request.groups)
    base = next((g for g in groups if g.suffix == ""), None)
    extra_member_of = tuple(m for m in draft.member_of if m)
    if any(not m for m in draft.member_of):
        raise Unsatisfiable("a required failure domain or zone has no aggregate in Placement")
    if extra_member_of or draft.forbidden or draft.in_tree:
        if base is None:
            base = RequestGroup()
            groups.insert(0, base)
        index = groups.index(base)
        groups[index] = msgspec.structs.replace(
            base, member_of=base.member_of + extra_member_of,
            forbidden_aggregates=base.forbidden_aggregates | draft.forbidden,
            in_tree=draft.in_tree or base.in_tree)
    return CandidateQuery(groups=tuple(groups), limit=draft.limit, group_policy=request.group_policy,
                          root_required=frozenset(draft.root_required),
                          root_forbidden=frozenset(draft.root_forbidden), same_subtree=request.same_subtree)


def nearness_domains(decision: Decision, located: Mapping[str, str],
                     records: Mapping[str, HostRecord]) -> list[tuple[str, Domain] | tuple[None, None]]:
    """For soft affinity by distance: the domains to try, nearest first, then
    "anywhere" as (None, None)."""
    near = decision.request.near
    directory = decision.directory
    levels = directory.levels  # near.level is one of them (core.check_domains)
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
