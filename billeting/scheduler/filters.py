"""Filters: yes/no checks on a host, after Placement.

Capacity, traits and aggregate membership are never checked here: Placement
did that in the candidates query, and the claim re-checks capacity. What is
left is what Placement cannot know: whether the compute is up, where the
request's siblings and server-group members are, which hosts the caller
excluded, what the host's hypervisor is and can run (``capability_filters``).
Each filter is a small class (``filter_base.Filter``) registered by name; configuration picks which
run. They always run cheapest first (``cost``), whatever order configuration
lists them in, so a host is dropped by the cheapest check that can drop it:

* cost 1 — one attribute of the host record: no allocation, no lookup.
* cost 2 — one set or counter lookup per host, or a scan of a few entries.
* cost 3 — a lookup per topology level, or several per host.

``once_per_request`` filters depend only on things that do not change while
a request is decided; they run for its first instance only.
"""
from __future__ import annotations

import importlib
import pkgutil

from billeting.scheduler.filter_base import REGISTRY, Filter
from billeting.scheduler.prefilters import DISABLED_TRAIT
from billeting.scheduler.request import HOST_SCOPE


class ComputeFilter(Filter):
    """The compute service is enabled and heartbeating."""

    name = "ComputeFilter"
    cost = 1
    once_per_request = True
    explains = "were disabled or down"

    def passes(self, host, decision):
        # The trait is normally forbidden in the query already; it is checked
        # here too for Placements older than 1.35 (no root_required).
        return host.record.enabled and host.record.up and DISABLED_TRAIT not in host.traits


class IgnoreHostsFilter(Filter):
    """Hosts the caller excluded (a move's source, hosts already tried)."""

    name = "IgnoreHostsFilter"
    cost = 1
    once_per_request = True
    explains = "were excluded by the request (ignore_hosts)"

    def active(self, decision):
        return bool(decision.request.ignore_hosts)

    def passes(self, host, decision):
        ignored = decision.memoized(self.name, lambda: {h.lower() for h in decision.request.ignore_hosts})
        return host.record.service_host.lower() not in ignored and host.record.name.lower() not in ignored


class DestinationFilter(Filter):
    """A requested destination host, node or cell."""

    name = "DestinationFilter"
    cost = 1
    once_per_request = True
    explains = "were not the requested destination"

    def active(self, decision):
        return decision.request.destination is not None

    def passes(self, host, decision):
        dest = decision.request.destination
        rec = host.record
        if dest.host and rec.service_host.lower() != dest.host.lower():
            return False
        if dest.node and rec.name.lower() != dest.node.lower() and rec.uuid != dest.node:
            return False
        return not dest.cell or rec.cell_uuid == dest.cell

    def explained(self, decision):
        # Say what was asked: a cell alone (a move's own cell) is no "destination" to the user.
        dest = decision.request.destination
        target = " ".join(f"{kind} {name}" for kind, name in (("host", dest.host), ("node", dest.node)) if name)
        if not target:
            return f"were in another cell than {dest.cell}, the only cell the request allows"
        return f"were not the requested {target}" + (f" in cell {dest.cell}" if dest.cell else "")


class AvailabilityZoneFilter(Filter):
    """The host is in the requested availability zone. Placement already
    kept only the zone's aggregates when the zone has any; this also covers
    zones known only from host reports."""

    name = "AvailabilityZoneFilter"
    cost = 1
    once_per_request = True
    explains = "were in another availability zone"

    def active(self, decision):
        return decision.request.availability_zone is not None

    def passes(self, host, decision):
        return host.record.availability_zone == decision.request.availability_zone

    def explained(self, decision):
        return f"were outside availability zone {decision.request.availability_zone!r}"


class SameHostFilter(Filter):
    """Hint ``same_host``: the host runs every named instance's host."""

    name = "SameHostFilter"
    cost = 2
    once_per_request = True
    explains = "did not run the instances named in same_host"

    def active(self, decision):
        return bool(decision.request.same_host)

    def passes(self, host, decision):
        return host.uuid in decision.same_hosts


class DifferentHostFilter(Filter):
    """Hint ``different_host``: the host runs none of the named instances."""

    name = "DifferentHostFilter"
    cost = 2
    once_per_request = True
    explains = "ran an instance named in different_host"

    def active(self, decision):
        return bool(decision.request.different_host)

    def passes(self, host, decision):
        return host.uuid not in decision.different_hosts


class ServerGroupAntiAffinityFilter(Filter):
    """Hard anti-affinity: fewer than ``max_server_per_host`` members in the
    host's failure domain (the host itself, or its rack/row/... when the group
    has a scope). Members placed earlier in this request count too."""

    name = "ServerGroupAntiAffinityFilter"
    cost = 2
    explains = "were removed by server group anti-affinity"

    def active(self, decision):
        group = decision.request.server_group
        return group is not None and group.policy == "anti-affinity"

    def passes(self, host, decision):
        group = decision.request.server_group
        if group.scope != HOST_SCOPE and group.scope not in host.domains:
            return False  # outside every domain of the scope: cannot prove separation
        return decision.members_near(host) < group.max_server_per_host


class ServerGroupAffinityFilter(Filter):
    """Hard affinity: once the group has members, only their failure domain."""

    name = "ServerGroupAffinityFilter"
    cost = 2
    explains = "were removed by server group affinity"

    def active(self, decision):
        group = decision.request.server_group
        return group is not None and group.policy == "affinity"

    def passes(self, host, decision):
        if not decision.group_hosts:
            return True  # the first member may go anywhere
        if decision.group_scope == HOST_SCOPE:
            return decision.group_hosts[host.uuid] > 0
        return decision.members_near(host) > 0


class FailureDomainFilter(Filter):
    """"Same/different <level> as instance X" hints. The candidates query
    already applied them as ``member_of``; this keeps a host whose domain
    membership changed since from slipping through, and hosts that belong
    to no domain at that level from passing a "same" constraint."""

    name = "FailureDomainFilter"
    cost = 3
    once_per_request = True
    explains = "were in the wrong failure domain"

    def active(self, decision):
        return bool(decision.request.domain_constraints)

    def passes(self, host, decision):
        for (relation, level), names in decision.domain_targets.items():
            mine = host.domains.get(level)
            if relation == "same" and mine not in names:
                return False
            if relation == "different" and mine in names:
                return False
        return True


def default_names() -> tuple[str, ...]:
    return tuple(name for name, cls in REGISTRY.items() if cls.default_on)


def build(names: tuple[str, ...] | None) -> list[Filter]:
    """Instances of the named filters, cheapest first (stable for equal cost)."""
    chosen = default_names() if names is None else names
    unknown = [n for n in chosen if n not in REGISTRY]
    if unknown:
        raise ValueError(f"unknown scheduler filter(s): {', '.join(unknown)} "
                         f"(available: {', '.join(REGISTRY)})")
    classes = [REGISTRY[n] for n in dict.fromkeys(chosen)]
    return [cls() for cls in sorted(classes, key=lambda c: c.cost)]


def import_filter_modules(package: str = "billeting.scheduler") -> list[str]:
    """Import every module of ``package`` named ``*_filters`` (name order);
    their filters register as their classes are defined, so a new module of
    filters needs no line here. Returns the modules' names."""
    found = sorted(info.name for info in pkgutil.iter_modules(importlib.import_module(package).__path__)
                   if info.name.endswith("_filters"))
    for name in found:
        importlib.import_module(f"{package}.{name}")
    return found


# Filters kept in modules of their own (the hypervisor's capabilities against
# the flavor and image, on by default; the operator's opt-in ones, aggregate
# metadata and load): imported last, so the registry lists this module's
# filters first, as ``build`` orders equal costs.
import_filter_modules()

