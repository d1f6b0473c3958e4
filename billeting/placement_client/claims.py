"""The claim rules, written once for every component that claims
(docs/design/select-destinations.md#claim-and-fall-back,
docs/design/scheduling-flow.md#the-reschedule-walk): the scheduler claims the
chosen host, the cell conductor claims alternates, computes un-claim a failed build.

A build claim is a *new-consumer* write (``consumer_generation: null``) of a
candidate's allocation request, sent back verbatim at the microversion it
came from. It never reads and merges what the consumer already holds: if the
consumer exists, Placement answers with a consumer generation conflict and
the claim fails loudly instead of doubling an allocation (the failure mode
docs/design/scheduling-flow.md#the-reschedule-walk warns about). Moves that do need a merge say so.
"""
from __future__ import annotations

from billeting.placement_client.client import PlacementClient
from billeting.placement_client.model import AllocationRequest, AllocationWrite, WriteOutcome


def claim_body(request: AllocationRequest, *, project_id: str, user_id: str,
               consumer_type: str | None = None) -> AllocationWrite:
    """The one body that claims ``request`` for a new consumer: ``PUT
    /allocations/{consumer}`` alone, or one entry of ``POST /allocations``."""
    return AllocationWrite(
        allocations=request.allocations,
        project_id=project_id,
        user_id=user_id,
        consumer_generation=None,
        mappings=request.mappings or None,
        consumer_type=consumer_type,
    )


def claim(client: PlacementClient, consumer_uuid: str, request: AllocationRequest, *,
          project_id: str, user_id: str, consumer_type: str | None = None,
          version: str | None = None) -> WriteOutcome:
    """Claim ``request`` for a consumer that must not hold anything yet."""
    write = claim_body(request, project_id=project_id, user_id=user_id, consumer_type=consumer_type)
    return client.put_allocations(consumer_uuid, write, version=version)


def unclaim(client: PlacementClient, consumer_uuid: str) -> bool:
    """Force-delete everything the consumer holds (no generation check, as
    the scheduler's rollback and a failed build's clean-up need). False when
    it held nothing."""
    return client.delete_allocations(consumer_uuid)
