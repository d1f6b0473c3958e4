"""A sample that spans failure domains, for a group kept apart per domain.

Placement's limited scan starts at a random provider and returns the next
providers that fit, in id order; hosts are usually registered rack by rack,
so a sample of 13 covers one to three racks. Three instances anti-affine
per rack need three racks: that sample was too small however the filters
ranked it, and such requests used to ask for every candidate instead (about
50 times the cost of a plain request at 5,000 hosts).

Here a sample is asked for in steps of the same limit: the first query as
drafted, then, while the hosts seen span fewer domains than the request
needs and the last answer was cut short, the same query with the domains
seen so far left out (``member_of=!in:``). Each step adds at least one new
domain or ends the walk, so a sample costs at most ``needed`` queries, each
of the standard API. The answers are merged into one, each host once.

Cost: one candidates query per domain found (at most ``needed``), plus a
catalog look-up of each answer's hosts.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping

import msgspec

from billeting.placement_client.model import Candidates, CandidateQuery, RequestGroup
from billeting.scheduler.catalog import HostRecord
from billeting.scheduler.directory import Directory


def _roots(answer: Candidates) -> dict[str, str]:
    """Provider → its tree's root, for every summarized provider."""
    return {rp: s.root_provider_uuid or rp for rp, s in answer.provider_summaries.items()}


def leave_out(query: CandidateQuery, aggregates: frozenset[str]) -> CandidateQuery:
    """``query`` with ``member_of=!in:<aggregates>`` on its unsuffixed group
    (added when it has none), which applies to the whole tree."""
    groups = list(query.groups)
    base = next((i for i, g in enumerate(groups) if g.suffix == ""), None)
    if base is None:
        groups.insert(0, RequestGroup())
        base = 0
    groups[base] = msgspec.structs.replace(
        groups[base], forbidden_aggregates=groups[base].forbidden_aggregates | aggregates)
    return msgspec.structs.replace(query, groups=tuple(groups))


def ask(query: CandidateQuery, level: str, needed: int, *, candidates: Callable[[CandidateQuery], Candidates],
        records: Callable[[set[str]], Mapping[str, HostRecord]],
        directory: Directory) -> tuple[Candidates, bool]:
    """(the merged answer, whether any answer was cut short at its limit).

    ``candidates``: asks Placement; ``records``: catalog records by host
    uuid (hosts it does not know are not hosts, e.g. sharing providers)."""
    answer = candidates(query)
    truncated = query.limit is not None and len(answer.allocation_requests) >= query.limit
    hosts: set[str] = set()  # the hosts sampled so far (not sharing providers)
    seen: set[str] = set()   # their domains' aggregates

    def add(roots: set[str]) -> set[str]:
        """The hosts among ``roots`` (new ones only); their domains join ``seen``."""
        found = set()
        for uuid, rec in records(roots - hosts).items():
            found.add(uuid)
            dom = directory.domains_of(rec.aggregates).get(level) if rec.aggregates else None
            if dom is not None:
                seen.add(dom.aggregate)
        hosts.update(found)
        return found

    add(set(_roots(answer).values()))
    requests = list(answer.allocation_requests)
    summaries = dict(answer.provider_summaries)
    last_cut = truncated
    # (no domain at all among the first hosts: the level means nothing to
    # them, and leaving nothing out would only ask the same again)
    while last_cut and seen and len(seen) < needed:
        step = leave_out(query, frozenset(seen))
        more = candidates(step)
        last_cut = len(more.allocation_requests) >= step.limit  # type: ignore[operator]
        truncated = truncated or last_cut
        root_of = _roots(more)
        before = len(seen)
        new_hosts = add(set(root_of.values()))
        if len(seen) == before:
            break  # nothing outside the domains seen (hosts in no domain, or none at all)
        old_hosts = hosts - new_hosts
        for request in more.allocation_requests:
            roots = {root_of.get(rp, rp) for rp in request.allocations}
            if roots & new_hosts and not roots & old_hosts:
                requests.append(request)
        for rp, summary in more.provider_summaries.items():
            summaries.setdefault(rp, summary)
    if len(requests) == len(answer.allocation_requests):
        return answer, truncated
    return Candidates(requests, summaries, answer.version), truncated
