"""The HTTP and the in-process Placement clients give the scheduler the same
answers, so the same requests get the same decisions through either."""
from __future__ import annotations

import random

import pytest

from billeting.scheduler import Scheduler, SchedulerSettings, ServerGroup
from billeting.scheduler.catalog import PlacementHostCatalog
from billeting.scheduler.nova import Flavor, request_from_nova
from tests.scheduler.fleet import new_uuids


@pytest.fixture(params=["4", "all"])
def candidate_sample(request, monkeypatch):
    """A small sample (grown where the filters leave too few) and none. Placement starts a limited scan at a random
    provider (on purpose: concurrent schedulers sample different hosts);
    "the same state" includes where the scan starts, so it is pinned here."""
    from billeting.placement.candidates import engine

    monkeypatch.setattr(engine, "_scan_start", lambda world: world.min_provider_id + 3)
    return request.param


@pytest.fixture
def mixed_fleet(fleet):
    # No two hosts weigh the same: among equals the order is Placement's.
    for i in range(8):
        fleet.host(f"flat{i}", memory_mb=16384 + 2048 * (i % 3), vcpus=8 + i % 4,
                   traits=("HW_CPU_X86_AVX2",) if i % 2 else ())
    for i in range(3):
        fleet.host(f"nested{i}", vcpus=4, memory_mb=4096 + 512 * i)
        fleet.child(f"nested{i}", f"nested{i}-pf0", {"SRIOV_NET_VF": 8}, traits=("CUSTOM_PHYSNET_A",))
        fleet.child(f"nested{i}", f"nested{i}-pf1", {"SRIOV_NET_VF": 8}, traits=("CUSTOM_PHYSNET_B",))
    # Racks of consecutive hosts: a group apart per rack samples rack by rack.
    fleet.domain("rack", "r1", [f"flat{i}" for i in range(4)])
    fleet.domain("rack", "r2", [f"flat{i}" for i in range(4, 8)])
    fleet.domain("rack", "r3", [f"nested{i}" for i in range(3)])
    return fleet


REQUESTS = [
    dict(flavor=Flavor(vcpus=2, memory_mb=2048, root_gb=10), n=1),
    dict(flavor=Flavor(vcpus=1, memory_mb=1024, root_gb=5), n=5),
    dict(flavor=Flavor(vcpus=2, memory_mb=4096, extra_specs={"trait:HW_CPU_X86_AVX2": "required"}), n=2),
    dict(flavor=Flavor(vcpus=1, memory_mb=512, extra_specs={
        "resources1:SRIOV_NET_VF": "1", "trait1:CUSTOM_PHYSNET_A": "required",
        "resources2:SRIOV_NET_VF": "1", "trait2:CUSTOM_PHYSNET_B": "required", "group_policy": "isolate"}), n=2),
    dict(flavor=Flavor(vcpus=1, memory_mb=1024), n=3, group=ServerGroup(uuid="g", policy="anti-affinity")),
    dict(flavor=Flavor(vcpus=1, memory_mb=1024), n=3,
         group=ServerGroup(uuid="r", policy="anti-affinity", scope="rack")),
]


def schedulers(mixed_fleet, placement, http_placement, candidate_sample):
    settings = SchedulerSettings(candidate_sample=candidate_sample)

    def make(client):
        return Scheduler(client, PlacementHostCatalog(client, mixed_fleet.directory), mixed_fleet.directory,
                         settings, rng=random.Random(3))
    return make(placement), make(http_placement)


def test_same_rankings_and_selections_through_both_clients(mixed_fleet, placement, http_placement,
                                                          candidate_sample):
    local, remote = schedulers(mixed_fleet, placement, http_placement, candidate_sample)
    assert remote.client.version == local.client.version == (1, 39)
    for spec in REQUESTS:
        request = request_from_nova(spec["flavor"], instance_uuids=new_uuids(spec["n"]), project_id="p",
                                    user_id="u", server_group=spec.get("group"))
        assert local.dry_run(request) == remote.dry_run(request)
        assert (local.select_destinations(request, alternates=2, claim=False)
                == remote.select_destinations(request, alternates=2, claim=False))


def test_same_claims_through_both_clients(mixed_fleet, placement, http_placement, candidate_sample):
    local, remote = schedulers(mixed_fleet, placement, http_placement, candidate_sample)
    for spec in REQUESTS:
        request = request_from_nova(spec["flavor"], instance_uuids=new_uuids(spec["n"]), project_id="p",
                                    user_id="u", server_group=spec.get("group"))
        mine = local.select_destinations(request, alternates=1)
        for consumer in request.instance_uuids:
            assert placement.delete_allocations(consumer)
        theirs = remote.select_destinations(request, alternates=1)
        assert mine == theirs
        for consumer in request.instance_uuids:
            held = http_placement.get_allocations(consumer)
            line = next(line for line in theirs if line[0].consumer_uuid == consumer)
            assert held.as_resources() == line[0].allocation_request.as_resources()
