"""The cell conductor's walk over alternates after a failed build."""
from __future__ import annotations

import pytest

from billeting.conductor.reschedule import EXHAUSTED, claim_next_alternate
from billeting.placement_client import claims
from billeting.placement_client.model import AllocationRequest, ProviderResources
from billeting.scheduler.nova import Flavor, request_from_nova
from tests.scheduler.fleet import new_uuids


def build_and_fail(make_scheduler, placement, alternates=3):
    request = request_from_nova(Flavor(vcpus=2, memory_mb=4096), instance_uuids=new_uuids(1),
                                project_id="p", user_id="u")
    [[chosen, *alts]] = make_scheduler().select_destinations(request, alternates=alternates)
    assert claims.unclaim(placement, chosen.consumer_uuid)  # what the failed compute does first
    return chosen, tuple(alts)


def test_the_next_alternate_is_claimed_with_its_own_request(fleet, make_scheduler, placement):
    for i in range(4):
        fleet.host(f"h{i}", memory_mb=65536 - 4096 * i)
    chosen, alts = build_and_fail(make_scheduler, placement)
    nxt = claim_next_alternate(placement, chosen.consumer_uuid, alts, project_id="p", user_id="u")
    assert nxt.selection.nodename == alts[0].nodename and nxt.selection.claimed
    assert nxt.remaining == alts[1:] and nxt.refused == 0
    held = placement.get_allocations(chosen.consumer_uuid)
    assert held.as_resources() == alts[0].allocation_request.as_resources()


def test_an_alternate_that_filled_up_is_skipped(fleet, make_scheduler, placement):
    for i in range(4):
        fleet.host(f"h{i}", memory_mb=16384 - 2048 * i)
    chosen, alts = build_and_fail(make_scheduler, placement)
    # Another request takes all of the first alternate's memory meanwhile.
    first = alts[0].compute_node_uuid
    free = 16384 - 2048 * int(alts[0].nodename[1:])
    grab = AllocationRequest({first: ProviderResources({"MEMORY_MB": free})})
    assert claims.claim(placement, new_uuids(1)[0], grab, project_id="x", user_id="x").ok
    nxt = claim_next_alternate(placement, chosen.consumer_uuid, alts, project_id="p", user_id="u")
    assert nxt.refused == 1 and nxt.selection.nodename == alts[1].nodename


def test_exhausted_alternates_leave_nothing_claimed(fleet, make_scheduler, placement):
    fleet.host("only")
    fleet.host("second")
    chosen, alts = build_and_fail(make_scheduler, placement, alternates=1)
    nxt = claim_next_alternate(placement, chosen.consumer_uuid, (), project_id="p", user_id="u")
    assert nxt.exhausted and nxt.remaining == () and EXHAUSTED.startswith("Exhausted all hosts")
    assert placement.get_allocations(chosen.consumer_uuid).allocations == {}


def test_claiming_before_the_failed_allocation_is_gone_is_refused(fleet, make_scheduler, placement):
    for i in range(3):
        fleet.host(f"h{i}")
    request = request_from_nova(Flavor(vcpus=1, memory_mb=512), instance_uuids=new_uuids(1),
                                project_id="p", user_id="u")
    [[chosen, *alts]] = make_scheduler().select_destinations(request, alternates=2)
    with pytest.raises(RuntimeError, match="still holds allocations"):
        claim_next_alternate(placement, chosen.consumer_uuid, tuple(alts), project_id="p", user_id="u")
    assert placement.get_allocations(chosen.consumer_uuid).as_resources() == \
        chosen.allocation_request.as_resources()


def test_alternates_on_hosts_to_avoid_are_tried_last_in_their_order(fleet, make_scheduler, placement):
    for i in range(4):
        fleet.host(f"h{i}", memory_mb=65536 - 4096 * i)
    chosen, alts = build_and_fail(make_scheduler, placement)
    avoid = {alts[0].service_host, alts[1].service_host}
    nxt = claim_next_alternate(placement, chosen.consumer_uuid, alts, project_id="p", user_id="u", avoid=avoid)
    assert nxt.selection.nodename == alts[2].nodename and nxt.deferred == 2
    assert nxt.remaining == alts[:2]           # still there, as a last resort
    claims.unclaim(placement, chosen.consumer_uuid)
    # When every alternate is to be avoided, the first of them is still claimed.
    nxt = claim_next_alternate(placement, chosen.consumer_uuid, alts[:2], project_id="p", user_id="u",
                               avoid=avoid)
    assert nxt.selection.nodename == alts[0].nodename and nxt.remaining == alts[1:2]
