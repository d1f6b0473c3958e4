"""The cell conductor's reschedule walk (docs/design/scheduling-flow.md#the-reschedule-walk), once.

A build failed on its compute; the compute has already deleted the
instance's allocation (it must: claiming on top would merge two
allocations). The conductor claims the next alternate with that
alternate's own allocation request; an alternate whose claim is refused is
skipped without counting an attempt; the first claim that wins is where the
build is cast next, with what is left of the list. Alternates on hosts
named in ``avoid`` (the cell just saw them fail; see ``recent_failures``)
are tried after all the others, keeping their order. When nothing is left the
instance goes to ERROR with "Exhausted all hosts available for retrying
build failures" (an unshelve's build: back to SHELVED_OFFLOADED with that
fault). The walk never asks the scheduler (a cell cannot call up).

The control plane's cell conductor and the simulator both call this, so
the designs they compare retry with the same code.
"""
from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from billeting.placement_client import claims
from billeting.placement_client.client import PlacementClient
from billeting.placement_client.model import WriteResult
from billeting.scheduler.selection import Selection

EXHAUSTED = "Exhausted all hosts available for retrying build failures"


class ConsumerHoldsAllocations(RuntimeError):
    """The instance already holds an allocation, so claiming an alternate
    would double it: the failed host's was not deleted, or another conductor
    handling the same reschedule claimed first. The caller looks at what is
    held and decides (the cell conductor adopts a claimed alternate)."""


@dataclass(frozen=True, slots=True)
class NextHost:
    selection: Selection | None      # claimed; None when the alternates ran out
    remaining: tuple[Selection, ...]  # to pass on with the build
    refused: int                      # alternates skipped because their claim lost
    deferred: int = 0                 # alternates moved to the end of the walk (hosts to avoid)

    @property
    def exhausted(self) -> bool:
        return self.selection is None


def claim_next_alternate(client: PlacementClient, instance_uuid: str, alternates: tuple[Selection, ...], *,
                         project_id: str, user_id: str, consumer_type: str | None = None,
                         avoid: Collection[str] = ()) -> NextHost:
    refused = 0
    pending = list(alternates)
    deferred = 0
    if avoid:
        later = [a for a in pending if a.service_host in avoid]
        if later:
            pending = [a for a in pending if a.service_host not in avoid] + later
            deferred = len(later)
    while pending:
        alt = pending.pop(0)
        if alt.allocation_request is None:
            refused += 1
            continue
        outcome = claims.claim(client, instance_uuid, alt.allocation_request, project_id=project_id,
                               user_id=user_id, consumer_type=consumer_type,
                               version=alt.allocation_request_version or None)
        if outcome.ok:
            chosen = Selection(**{f: getattr(alt, f) for f in alt.__struct_fields__ if f != "claimed"},
                               claimed=True)
            return NextHost(chosen, tuple(pending), refused, deferred)
        if outcome.result is WriteResult.CONSUMER_CONFLICT:
            # The failed host's allocation is still there: claiming now would
            # double it. The compute must un-claim first (see module doc).
            raise ConsumerHoldsAllocations(f"instance {instance_uuid} still holds allocations; "
                                           "the failed build's allocation must be deleted before rescheduling")
        refused += 1
    return NextHost(None, (), refused, deferred)
