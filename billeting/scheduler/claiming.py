"""The claim stage: a pick becomes the instance's allocations in Placement.

Placement's claim is the arbiter: whatever the scheduler's view of a host
(a sample that is a few milliseconds old, another scheduler's claim since),
a claim that no longer fits is refused and the next host of the ranking is
tried. A request of several instances is all or nothing.

Cost: one ``PUT /allocations/{consumer}`` per host tried, or one
``POST /allocations`` for a whole batch; on failure, one ``DELETE`` per
instance already claimed (``rollback``).
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from billeting.placement_client import claims
from billeting.placement_client.client import PlacementClient, PlacementError
from billeting.placement_client.model import AllocationRequest, AllocationWrite, WriteResult
from billeting.scheduler import metrics
from billeting.scheduler.decision import Decision
from billeting.scheduler.errors import ConsumerConflict, PlacementTrouble
from billeting.scheduler.hoststate import HostState
from billeting.scheduler.pipeline import RankedList
from billeting.scheduler.request import ScheduleRequest

LOG = logging.getLogger("billeting.scheduler.core")  # (the log lines operators grep for keep their logger)

ROLLBACK_TRIES = 3


@dataclass(slots=True)
class Claimed:
    """One instance's pick: its host and the candidate claimed (or to claim)."""

    instance: str
    host: HostState
    request: AllocationRequest
    weight: float
    lost: int = 0  # claims lost before this one won


class BatchLost(Exception):
    """A multi-instance batch claim was refused as a whole."""


def claim_body(picked: Claimed | AllocationRequest, request: ScheduleRequest) -> AllocationWrite:
    """The claim of a pick (or of a candidate) for ``request``'s owner."""
    candidate = picked.request if isinstance(picked, Claimed) else picked
    return claims.claim_body(candidate, project_id=request.project_id, user_id=request.user_id,
                             consumer_type=request.consumer_type)


def claim_down(client: PlacementClient, ranked: RankedList, instance: str, request: ScheduleRequest,
               decision: Decision, dropped: set[str], claim: bool = True) -> tuple[Claimed | None, int]:
    """Claim the first host of ``ranked`` that accepts (only pick it, when
    ``claim`` is false); (the claim, claims lost). A lost host goes into
    ``dropped`` for the rest of the request."""
    lost = 0
    for r in ranked:
        if r.host.uuid in dropped:
            continue
        candidate = r.host.first_candidate()
        if candidate is None:
            continue  # the request's own earlier claims used it up
        if not claim:
            return Claimed(instance, r.host, candidate, r.weight), 0
        outcome = claims.claim(client, instance, candidate, project_id=request.project_id,
                               user_id=request.user_id, consumer_type=request.consumer_type,
                               version=decision.version)
        if outcome.ok:
            return Claimed(instance, r.host, candidate, r.weight, lost), lost
        if outcome.result is WriteResult.CONSUMER_CONFLICT:
            raise ConsumerConflict(f"instance {instance} already holds allocations in Placement; "
                                   "a build must use a new consumer")
        lost += 1
        metrics.observe_claims_lost(1)
        dropped.add(r.host.uuid)  # for the rest of this request too
        LOG.info("claim for %s on %s lost (%s): %s; trying the next host",
                 instance, r.host.name, outcome.result.value, outcome.detail)
    return None, lost


def claim_batch(client: PlacementClient, planned: list[Claimed], request: ScheduleRequest) -> None:
    """Claim every pick of one request in one ``POST /allocations``; raises
    BatchLost when Placement refuses it as a whole for capacity."""
    writes = {c.instance: claim_body(c, request) for c in planned}
    try:
        outcome = client.post_allocations(writes)
    except PlacementError as exc:
        raise PlacementTrouble(f"Placement could not take the claims: {exc.detail or exc}") from None
    if outcome.ok:
        return
    if outcome.result is WriteResult.CONSUMER_CONFLICT:
        raise ConsumerConflict("an instance of this request already holds allocations in Placement; "
                               f"a build must use new consumers ({outcome.detail})")
    raise BatchLost(outcome.detail)


def rollback(client: PlacementClient, claimed: list[Claimed]) -> None:
    """Delete the claims of a request that could not be placed whole."""
    for c in claimed:
        for attempt in range(ROLLBACK_TRIES):
            try:
                claims.unclaim(client, c.instance)
                break
            except PlacementError as exc:
                if attempt == ROLLBACK_TRIES - 1:
                    LOG.error("could not roll back the claim of %s on %s: %s; it must be removed "
                              "by an audit", c.instance, c.host.name, exc)
                else:
                    time.sleep(0.05 * (attempt + 1))
