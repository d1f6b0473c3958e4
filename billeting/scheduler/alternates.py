"""The last stage: claimed picks become Selections, each line with its
alternates from the chosen host's cell (unclaimed: the cell conductor
claims one only if the build on the chosen host fails).

An alternate is used only after a build failed, so a host that has failed
its last build and runs nothing (``suspect``: it has not shown it can build
anything) is the worst alternate there is. While BuildFailureWeigher is on,
alternates come from the other hosts and fall back on suspects only when too
few are left. (Spread over a sampled cell's few hosts, the last alternate
would otherwise land on exactly such a host, which the weigher sinks to the
bottom.) A host that failed once among instances it runs stays an alternate:
it is most likely fine, and an alternate's build is what clears its count.

Cost: one pass over the ranked list (ids and cells only) per cell of the
chosen hosts; only the picks are made into Selections.
"""
from __future__ import annotations

from billeting.scheduler.claiming import Claimed
from billeting.scheduler.decision import Decision
from billeting.scheduler.hoststate import HostState
from billeting.scheduler.selection import Selection
from billeting.scheduler.weighers import sinks_failed_hosts


def suspect(host: HostState) -> bool:
    """A host whose last build failed and on which nothing is allocated: it
    has not shown it can build anything. (A host that failed once among
    instances it runs is most likely fine; passing it over would leave it
    sunk by BuildFailureWeigher with no build to clear its count.)"""
    if not host.record.failed_builds:
        return False
    summaries = host.summaries
    return not any(cap.used for rp in host.tree for cap in summaries[rp].resources.values())


def selections(claimed: list[Claimed], ranked, dropped: set[str], decision: Decision, alternates: int,
               level: str | None, alternates_from: str, claim: bool = True) -> list[list[Selection]]:
    """Per pick, ``[chosen, alternate, ...]``."""
    version = decision.version
    hold_back_suspects = sinks_failed_hosts(decision.settings)
    chosen = {c.host.uuid for c in claimed}
    # Alternates depend only on the cell here (same ranking, same chosen
    # and dropped hosts, nothing claimed meanwhile): once per cell, not
    # one pass over the ranked hosts per instance.
    by_cell: dict[str, list] = {}
    result = []
    for c in claimed:
        rec = c.host.record
        picks = by_cell.get(rec.cell_uuid)
        if picks is None:
            picks = by_cell[rec.cell_uuid] = pick(ranked, rec.cell_uuid, chosen, dropped, alternates,
                                                  alternates_from, hold_back_suspects=hold_back_suspects)
        first = Selection(service_host=rec.service_host, nodename=rec.name, compute_node_uuid=rec.uuid,
                          cell_uuid=rec.cell_uuid, consumer_uuid=c.instance, allocation_request=c.request,
                          allocation_request_version=version, claimed=claim,
                          availability_zone=rec.availability_zone, domain_level=level, weight=c.weight,
                          claims_lost=c.lost)
        line = [first]
        for r, candidate in picks:
            arec = r.host.record
            line.append(Selection(service_host=arec.service_host, nodename=arec.name,
                                  compute_node_uuid=arec.uuid, cell_uuid=arec.cell_uuid,
                                  consumer_uuid=c.instance, allocation_request=candidate,
                                  allocation_request_version=version, claimed=False,
                                  availability_zone=arec.availability_zone, domain_level=level,
                                  weight=r.weight))
        result.append(line)
    return result


def pick(ranked, cell_uuid: str, chosen: set[str], dropped: set[str], wanted: int, alternates_from: str,
         *, hold_back_suspects: bool = True):
    """Up to ``wanted`` (ranked host, allocation request) pairs from
    ``cell_uuid``, never a chosen or dropped host, best first.

    "next": the hosts ranked right after the chosen. "spread": hosts
    spaced evenly through the ranked hosts of the cell (for 2 of 90, the
    30th and the 60th), moving on when one has no candidate left.
    ``hold_back_suspects``: suspect hosts come after every other host of the
    cell, whatever their rank."""
    if not wanted or not ranked:
        return []

    def eligible(h: HostState) -> bool:
        return h.uuid not in chosen and h.uuid not in dropped and h.record.cell_uuid == cell_uuid

    # Ranks, not ``Ranked`` entries: only the picks are made into entries.
    if alternates_from == "spread":
        pool = ranked.positions_in_cell(cell_uuid, chosen | dropped)
        suspects: list[int] = []
        if hold_back_suspects:
            pool, suspects = _split_suspects(ranked, pool)
        n = len(pool)
        if n > wanted:
            starts = [(i + 1) * n // (wanted + 1) for i in range(wanted)]
            picked = []
            # Each alternate takes the first host with a candidate left
            # in its stretch of the ranking (up to the next one's start).
            for start, end in zip(starts, starts[1:] + [n]):
                for i in pool[start:end]:
                    candidate = ranked.host(i).first_candidate()
                    if candidate is not None:
                        picked.append((ranked[i], candidate))
                        break
            if len(picked) == wanted or not suspects:
                return picked
            # Too few hosts that are not suspect had a candidate left.
            return picked + _first_with_candidates(ranked, iter(suspects), wanted - len(picked))
        positions = iter(pool + suspects)
    else:
        positions = (i for i in range(len(ranked)) if eligible(ranked.host(i)))
        if hold_back_suspects:
            trusted, suspects = _split_suspects(ranked, positions)
            positions = iter(trusted + suspects)
    return _first_with_candidates(ranked, positions, wanted)


def _split_suspects(ranked, positions) -> tuple[list[int], list[int]]:
    """``positions`` as (hosts that are not suspect, suspects), each in rank order."""
    trusted, suspects = [], []
    for i in positions:
        (suspects if suspect(ranked.host(i)) else trusted).append(i)
    return trusted, suspects


def _first_with_candidates(ranked, positions, wanted: int) -> list:
    """The first hosts at ``positions`` with a candidate left, up to ``wanted``."""
    picked = []
    for i in positions:
        candidate = ranked.host(i).first_candidate()
        if candidate is not None:
            picked.append((ranked[i], candidate))
            if len(picked) == wanted:
                break
    return picked
