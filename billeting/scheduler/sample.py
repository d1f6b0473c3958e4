"""How many candidates a decision asks Placement for: the sample stage.

Ranking a thousand candidates to place one instance made every decision
read the whole answer from the database (about 15,000 rows at 5,000 hosts)
and spend most of its CPU on hosts it would never pick. A decision now asks
for a small sample first and grows it only when the sample was not enough:

    adaptive   fleets of up to 100 hosts: max_placement_results at once
               (every host is looked at, as kube-scheduler does below 100
               nodes); larger ones: first max(8, 2 × wanted, ⌈log2 fleet⌉)
               candidates, where wanted = instances + alternates (hosts a
               request can use); then 8 × as many, and so on up to
               max_placement_results.
    all        max_placement_results at once (the behaviour before sampling).
    N          max(N, wanted) candidates first, then as adaptive.

A server group request that used to need every candidate (a host-scoped
group, or several instances at once) is sampled too, with one more step
after max_placement_results: no limit at all, so what only the whole fleet
holds is still found. Each sample of a group scoped to a failure-domain
level is asked for per domain (``domain_sample``): one small query, then
one more that leaves out the domains already seen, until the sample spans
as many domains as the group needs (``domains_needed``), because a limited
scan returns a stretch of consecutive providers, often one or two racks.

Placement chooses which hosts: Billeting's Placement walks its providers
from a random id (``randomize_allocation_candidates`` makes upstream's draw
at random), so concurrent schedulers sample different hosts and race less
for the same one. What it costs in packing quality: the weighers pick the
best of a sample, not of the fleet. ``docs/scheduler-sampling.md`` has the
reasoning and the measurements.

Cost of this stage: nothing but arithmetic; each growth step costs one more
candidates query of the next size (only when filters left too few hosts).
"""
from __future__ import annotations

import math

from billeting.scheduler.request import HOST_SCOPE, ServerGroup

ALL = "all"
ADAPTIVE = "adaptive"
# A size that means "no limit": every candidate Placement has.
EVERY = 0

# The smallest sample worth a query: below it, a filter or two that remove
# hosts Placement cannot see (disabled services, zones by host record) would
# send many decisions round a second time.
MIN_SAMPLE = 8
# Each retry asks for this many times more candidates than the last.
GROWTH = 8
# Up to this many hosts, sampling saves little and every host is ranked.
SMALL_FLEET = 100


def check(setting: str) -> None:
    """Raise ValueError unless ``setting`` is ``adaptive``, ``all`` or a positive integer."""
    if setting in (ADAPTIVE, ALL):
        return
    try:
        size = int(setting)
    except (TypeError, ValueError):
        raise ValueError(f"candidate_sample must be 'adaptive', 'all' or a positive integer, "
                         f"not {setting!r}") from None
    if size < 1:
        raise ValueError(f"candidate_sample must be at least 1, not {size}")


def sizes(setting: str, *, fleet: int, wanted: int, cap: int, every: bool = False) -> tuple[int, ...]:
    """The candidate limits to try, smallest first, the last one ``cap``
    (``every``: then ``EVERY``; where nothing is sampled, with ``all`` or a
    small fleet, ``EVERY`` alone, as before sampling).

    ``fleet``: hosts the scheduler knows; ``wanted``: distinct hosts the
    request could use (instances + alternates); ``cap``: max_placement_results."""
    if setting == ALL or (setting == ADAPTIVE and fleet <= SMALL_FLEET):
        return (EVERY,) if every else (cap,)
    if setting == ADAPTIVE:
        first = max(MIN_SAMPLE, 2 * wanted, math.ceil(math.log2(max(fleet, 2))))
    else:
        first = max(int(setting), wanted)
    steps = []
    size = first
    while size < cap:
        steps.append(size)
        size *= GROWTH
    steps.append(cap)
    if every:
        steps.append(EVERY)
    return tuple(steps)


def needs_every(group: ServerGroup | None, instances: int) -> bool:
    """Does this request end on an unlimited query? The group requests that
    the filters may have to judge against every host: host-scoped groups,
    and several instances of one group at once (siblings keep apart)."""
    return group is not None and (group.scope == HOST_SCOPE or instances > 1)


def group_wanted(group: ServerGroup | None, instances: int) -> int:
    """Hosts a sample must hold beyond instances + alternates: under
    host-scoped hard anti-affinity, the hosts that may already hold as many
    members as the group allows (the filters will drop them)."""
    if group is None or group.scope != HOST_SCOPE or not (group.hard and group.anti):
        return 0
    return len(group.members) // group.max_server_per_host


def domains_needed(group: ServerGroup | None, instances: int, alternates: int = 0) -> int:
    """Distinct domains (at the group's level) a sample should span for the
    request's instances to keep apart: hard anti-affinity needs
    ⌈instances / max per domain⌉, and ``alternates`` more (an alternate
    must be in a domain no sibling holds); soft anti-affinity spreads one
    per instance when it can; 1 (any sample will do) otherwise."""
    if group is None or group.scope == HOST_SCOPE or not group.anti or instances < 2:
        return 1
    if group.hard:
        return -(-instances // group.max_server_per_host) + alternates
    return instances
