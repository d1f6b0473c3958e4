"""GET /resource_providers/{uuid}/allocations (docs/design/placement-endpoints.md#provider-allocations)."""
from __future__ import annotations

from tests.placement.api.test_allocations import generation_of, new_uuid, put_allocations, set_inventory


def test_unknown_provider_is_404(client):
    missing = new_uuid()
    resp = client.get(f"/resource_providers/{missing}/allocations")
    assert resp.status == 404
    assert resp.error["detail"].startswith(f"Resource provider '{missing}' not found: ")
    assert client.get("/resource_providers/not-a-uuid/allocations").status == 404


def test_provider_without_allocations(client, create_provider):
    rp = create_provider()["uuid"]
    resp = client.get(f"/resource_providers/{rp}/allocations")
    assert resp.status == 200
    assert resp.json == {"allocations": {}, "resource_provider_generation": 0}


def test_listing_and_consumer_generation_from_1_28(client, create_provider):
    rp = create_provider()["uuid"]
    set_inventory(client, rp, {"VCPU": 8, "MEMORY_MB": 1024})
    first, second = new_uuid(), new_uuid()
    put_allocations(client, first, {rp: {"VCPU": 1, "MEMORY_MB": 256}})
    put_allocations(client, second, {rp: {"VCPU": 2}})
    put_allocations(client, second, {rp: {"VCPU": 3}}, generation=1)
    gen = generation_of(client, rp)
    resp = client.get(f"/resource_providers/{rp}/allocations", mv="1.27")
    assert resp.json == {
        "allocations": {first: {"resources": {"VCPU": 1, "MEMORY_MB": 256}},
                        second: {"resources": {"VCPU": 3}}},
        "resource_provider_generation": gen}
    resp = client.get(f"/resource_providers/{rp}/allocations", mv="1.28")
    assert resp.json == {
        "allocations": {first: {"resources": {"VCPU": 1, "MEMORY_MB": 256}, "consumer_generation": 1},
                        second: {"resources": {"VCPU": 3}, "consumer_generation": 2}},
        "resource_provider_generation": gen}


def test_only_this_providers_part(client, create_provider):
    rp, other = create_provider()["uuid"], create_provider()["uuid"]
    set_inventory(client, rp, {"VCPU": 8})
    set_inventory(client, other, {"DISK_GB": 8})
    consumer = new_uuid()
    put_allocations(client, consumer, {rp: {"VCPU": 1}, other: {"DISK_GB": 2}})
    assert client.get(f"/resource_providers/{other}/allocations").json["allocations"] == {
        consumer: {"resources": {"DISK_GB": 2}}}


def test_cache_headers(client, create_provider):
    rp = create_provider()["uuid"]
    set_inventory(client, rp, {"VCPU": 8})
    put_allocations(client, new_uuid(), {rp: {"VCPU": 1}})
    resp = client.get(f"/resource_providers/{rp}/allocations", mv="1.15")
    assert resp.headers["cache-control"] == "no-cache"
    assert resp.headers["last-modified"].endswith("GMT")
    resp = client.get(f"/resource_providers/{rp}/allocations", mv="1.14")
    assert "cache-control" not in resp.headers and "last-modified" not in resp.headers


def test_accept_policy_and_methods(client, create_provider):
    rp = create_provider()["uuid"]
    path = f"/resource_providers/{rp}/allocations"
    assert client.get(path, headers={"Accept": "text/plain"}).status == 406
    resp = client.get(path, token="user")
    assert resp.status == 403
    assert resp.error["detail"] == (
        "Policy does not allow placement:resource_providers:allocations:list to be performed.")
    # 403 comes before the lookup of an unknown provider.
    assert client.get(f"/resource_providers/{new_uuid()}/allocations", token="user").status == 403
    resp = client.put(path, json={})
    assert resp.status == 405
    assert resp.headers["allow"] == "GET"


def test_path_with_nul_is_404(client):
    assert client.get("/resource_providers/%00abc/allocations").status == 404
