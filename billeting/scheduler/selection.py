"""What the scheduler answers: one ``Selection`` per host it offers.

``select_destinations`` returns, per instance, ``[chosen, alternate, ...]``.
The chosen Selection's allocation request is already claimed in Placement
for that instance; alternates carry their own, unclaimed, for the cell
conductor to claim when a build fails (docs/design/select-destinations.md#contract, #alternates).
"""
from __future__ import annotations

import msgspec

from billeting import typeinfo
from billeting.placement_client import claims
from billeting.placement_client.model import AllocationRequest, AllocationWrite


class Limits(msgspec.Struct, frozen=True, omit_defaults=True):
    """Oversubscription limits for the compute's local claim (NUMA only, in Nova)."""

    numa_topology: str | None = None


class Selection(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    service_host: str          # the compute service: where a build is cast
    nodename: str              # the compute node (an Ironic node's uuid)
    compute_node_uuid: str     # = the root resource provider's uuid
    cell_uuid: str
    consumer_uuid: str         # the instance this Selection is for
    allocation_request: AllocationRequest | None
    allocation_request_version: str
    claimed: bool              # True only for the chosen host of an instance
    availability_zone: str | None = None
    limits: Limits | None = None
    # For requests with soft affinity by distance: the topology level that was
    # met ("rack", "row", ...), or None when the request had to go anywhere.
    domain_level: str | None = None
    weight: float = 0.0
    # The chosen host only: claims this instance lost to other schedulers
    # (each on a better-ranked host) before this one won.
    claims_lost: int = 0

    def claim_body(self, *, project_id: str, user_id: str, consumer_type: str | None = None) -> AllocationWrite:
        """The exact body of ``PUT /allocations/{consumer_uuid}`` that claims this Selection."""
        if self.allocation_request is None:
            raise ValueError("this Selection carries no allocation request")
        return claims.claim_body(self.allocation_request, project_id=project_id, user_id=user_id,
                                 consumer_type=consumer_type)


encode = msgspec.json.Encoder().encode
decode_lists = typeinfo.decoder(list[list[Selection]]).decode
