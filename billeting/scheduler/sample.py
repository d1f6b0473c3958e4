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

ALL = "all"
ADAPTIVE = "adaptive"

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


def sizes(setting: str, *, fleet: int, wanted: int, cap: int) -> tuple[int, ...]:
    """The candidate limits to try, smallest first, the last one ``cap``.

    ``fleet``: hosts the scheduler knows; ``wanted``: distinct hosts the
    request could use (instances + alternates); ``cap``: max_placement_results."""
    if setting == ALL or (setting == ADAPTIVE and fleet <= SMALL_FLEET):
        return (cap,)
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
    return tuple(steps)
