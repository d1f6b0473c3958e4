"""``create_providers``: the in-process client writes a batch of providers
through Placement's own functions in a few transactions; what it leaves
must be what the standard calls leave (same generations, inventories,
traits, aggregates, tree), and it refuses what the API refuses."""
from __future__ import annotations

import uuid as uuidlib

import pytest

from billeting.placement_client.client import PlacementClient, PlacementError
from billeting.placement_client.inprocess import CREATE_BATCH, InProcessPlacementClient
from billeting.placement_client.model import Inventory, NewProvider


def _fleet(tag: str, hosts: int) -> list[NewProvider]:
    agg = str(uuidlib.uuid5(uuidlib.NAMESPACE_URL, f"rack-{tag}"))
    out = []
    for i in range(hosts):
        root = str(uuidlib.uuid5(uuidlib.NAMESPACE_URL, f"{tag}-{i}"))
        out.append(NewProvider(uuid=root, name=f"{tag}-host-{i}",
                               inventories={"VCPU": Inventory(total=16, allocation_ratio=2.0),
                                            "MEMORY_MB": Inventory(total=4096, reserved=512, max_unit=2048)},
                               traits=frozenset({"HW_CPU_X86_AVX2", "COMPUTE_VOLUME_MULTI_ATTACH"}) if i % 2 else
                               frozenset(), aggregates=frozenset({agg}) if i % 3 else frozenset()))
        if i % 4 == 0:
            out.append(NewProvider(uuid=str(uuidlib.uuid5(uuidlib.NAMESPACE_URL, f"{tag}-{i}-gpu")),
                                   name=f"{tag}-host-{i}-gpu", parent_uuid=root,
                                   inventories={"VGPU": Inventory(total=4, step_size=2)},
                                   traits=frozenset({"CUSTOM_GPU_MODEL_X"})))
    return out


def _seen(client: PlacementClient, p: NewProvider) -> tuple:
    record = client.get_provider(p.uuid)
    parent = client.get_provider(record.parent_provider_uuid).name if record.parent_provider_uuid else None
    return (record.generation, parent and parent.split("-host-")[1], record.root_provider_uuid == p.uuid,
            client.get_inventories(p.uuid).inventories, sorted(client.get_traits(p.uuid).traits),
            len(client.get_aggregates(p.uuid).aggregates))


def test_the_batch_leaves_what_the_standard_calls_leave(engine):
    client = InProcessPlacementClient(engine)
    client.ensure_trait("CUSTOM_GPU_MODEL_X")
    bulk, calls = _fleet("bulk", CREATE_BATCH + 7), _fleet("calls", CREATE_BATCH + 7)  # two batches
    client.create_providers(bulk)
    PlacementClient.create_providers(client, calls)  # the standard calls, through the WSGI application
    assert [_seen(client, p) for p in bulk] == [_seen(client, p) for p in calls]
    assert _seen(client, bulk[2])[0] == 3  # host 1: inventories, traits, aggregates, each moved it once


@pytest.mark.parametrize("create", [InProcessPlacementClient.create_providers, PlacementClient.create_providers],
                         ids=["in-process", "standard calls"])
def test_refusals_are_the_apis(engine, create):
    client = InProcessPlacementClient(engine)
    one = _fleet("once", 1)[0]
    create(client, [one])
    with pytest.raises(PlacementError) as taken:
        create(client, [one])
    assert taken.value.status == 409
    bad = NewProvider(uuid=str(uuidlib.uuid4()), name="bad", inventories={"CUSTOM_NOT_THERE": Inventory(total=1)})
    with pytest.raises(PlacementError) as unknown:
        create(client, [bad])
    assert unknown.value.status == 400 and "CUSTOM_NOT_THERE" in unknown.value.detail
    orphan = NewProvider(uuid=str(uuidlib.uuid4()), name="orphan", parent_uuid=str(uuidlib.uuid4()))
    with pytest.raises(PlacementError) as missing:
        create(client, [orphan])
    assert missing.value.status in (400, 404)
