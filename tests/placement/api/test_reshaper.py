"""POST /reshaper (docs/design/placement-endpoints.md#reshaper)."""
from __future__ import annotations

import pytest

from tests.placement.api.test_allocations import (
    generation_of,
    new_uuid,
    put_allocations,
    set_inventory,
    usages_of,
)

SERVICE = {"X-Roles": "service"}


def reshape(client, body, *, mv="1.38", headers=SERVICE, **kw):
    return client.post("/reshaper", json=body, mv=mv, headers=headers, **kw)


def inventories_of(client, rp: str) -> dict:
    return client.get(f"/resource_providers/{rp}/inventories").json["inventories"]


def consumer_entry(allocations: dict, generation, *, consumer_type: str | None = "INSTANCE") -> dict:
    """A consumer's entry; ``consumer_type`` None leaves it out (mv < 1.38)."""
    body = {"allocations": {rp: {"resources": res} for rp, res in allocations.items()},
            "project_id": "p", "user_id": "u", "consumer_generation": generation}
    if consumer_type is not None:
        body["consumer_type"] = consumer_type
    return body


@pytest.fixture
def tree(client, create_provider):
    """A root with VCPU (8 of them used by an instance) and DISK_GB, and an
    empty child: the typical before-picture of a reshape."""
    root = create_provider("root")["uuid"]
    child = create_provider("child", parent=root)["uuid"]
    set_inventory(client, root, {"VCPU": 10, "DISK_GB": 100})
    instance = new_uuid()
    assert put_allocations(client, instance, {root: {"VCPU": 8, "DISK_GB": 10}}).status == 204
    return root, child, instance


def move_vcpu_body(client, root, child, instance, *, child_vcpu=10, root_gen=None, child_gen=None,
                   consumer_gen=1):
    return {
        "inventories": {
            root: {"resource_provider_generation": generation_of(client, root) if root_gen is None else root_gen,
                   "inventories": {"DISK_GB": {"total": 100}}},
            child: {"resource_provider_generation": generation_of(client, child) if child_gen is None else child_gen,
                    "inventories": {"VCPU": {"total": child_vcpu, "max_unit": 8}}},
        },
        "allocations": {
            instance: consumer_entry({root: {"DISK_GB": 10}, child: {"VCPU": 8}}, consumer_gen),
        },
    }


def snapshot(client, *rps):
    return [(generation_of(client, rp), inventories_of(client, rp), usages_of(client, rp)) for rp in rps]


def test_version_gate_methods_and_policy(client, tree):
    root, child, instance = tree
    body = move_vcpu_body(client, root, child, instance)
    assert reshape(client, body, mv="1.29").status == 404
    resp = client.get("/reshaper", mv="1.30")
    assert resp.status == 405 and resp.headers["allow"] == "POST"
    # Admin alone is not enough under the default (new) policy.
    resp = reshape(client, body, headers={})
    assert resp.status == 403
    assert resp.error["detail"] == "Policy does not allow placement:reshaper:reshape to be performed."
    resp = reshape(client, body, headers={}, token="admin", content_type="text/plain")
    assert resp.status == 415


def test_move_vcpu_to_child(client, tree):
    root, child, instance = tree
    root_gen, child_gen = generation_of(client, root), generation_of(client, child)
    resp = reshape(client, move_vcpu_body(client, root, child, instance))
    assert resp.status == 204 and resp.text == ""
    assert set(inventories_of(client, root)) == {"DISK_GB"}
    assert inventories_of(client, child)["VCPU"]["max_unit"] == 8
    got = client.get(f"/allocations/{instance}", mv="1.38").json
    assert {rp: part["resources"] for rp, part in got["allocations"].items()} == {
        root: {"DISK_GB": 10}, child: {"VCPU": 8}}
    assert got["consumer_generation"] == 2
    # Interim +1, allocations +1, final +1 for each re-inventoried provider
    # that the new allocations name.
    assert generation_of(client, root) == root_gen + 3
    assert generation_of(client, child) == child_gen + 3


def test_generation_bumps_without_allocation_changes(client, tree, create_provider):
    root, child, _ = tree
    spare = create_provider("spare")["uuid"]
    set_inventory(client, spare, {"VCPU": 2})
    gens = {rp: generation_of(client, rp) for rp in (child, spare)}
    resp = reshape(client, {"inventories": {
        child: {"resource_provider_generation": gens[child], "inventories": {"VGPU": {"total": 2}}},
        spare: {"resource_provider_generation": gens[spare], "inventories": {}},
    }, "allocations": {}})
    assert resp.status == 204
    assert generation_of(client, child) == gens[child] + 2   # interim + final
    assert generation_of(client, spare) == gens[spare] + 1   # empty: final only
    assert inventories_of(client, spare) == {}


def test_unknown_provider_in_inventories(client, tree):
    root, child, instance = tree
    body = move_vcpu_body(client, root, child, instance)
    missing = new_uuid()
    body["inventories"][missing] = {"resource_provider_generation": 0, "inventories": {}}
    before = snapshot(client, root, child)
    resp = reshape(client, body)
    assert resp.status == 400
    assert resp.error["code"] == "placement.resource_provider.not_found"
    assert resp.error["detail"].startswith(f"Resource provider {missing} in inventories not found: ")
    assert snapshot(client, root, child) == before


def test_provider_generation_mismatch(client, tree):
    root, child, instance = tree
    actual = generation_of(client, child)
    before = snapshot(client, root, child)
    resp = reshape(client, move_vcpu_body(client, root, child, instance, child_gen=actual + 5))
    assert resp.status == 409
    assert resp.error["code"] == "placement.concurrent_update"
    assert resp.error["detail"] == (
        f"resource provider generation conflict for provider {child}: "
        f"actual: {actual}, given: {actual + 5}")
    assert snapshot(client, root, child) == before


def test_consumer_generation_mismatch(client, tree):
    root, child, instance = tree
    before = snapshot(client, root, child)
    resp = reshape(client, move_vcpu_body(client, root, child, instance, consumer_gen=None))
    assert resp.status == 409
    assert resp.error["code"] == "placement.concurrent_update"
    assert "consumer generation conflict - expected 1 but got None" in resp.error["detail"]
    assert snapshot(client, root, child) == before


def test_unknown_provider_in_allocations(client, tree):
    root, child, instance = tree
    body = move_vcpu_body(client, root, child, instance)
    missing = new_uuid()
    body["allocations"][instance]["allocations"][missing] = {"resources": {"VCPU": 1}}
    resp = reshape(client, body)
    assert resp.status == 400
    assert resp.error["detail"] == f"Allocation for resource provider '{missing}' that does not exist."


@pytest.mark.parametrize("where", ["inventories", "allocations"])
def test_unknown_resource_class(client, tree, where):
    root, child, instance = tree
    body = move_vcpu_body(client, root, child, instance)
    if where == "inventories":
        body["inventories"][child]["inventories"]["CUSTOM_NOPE"] = {"total": 1}
    else:
        body["allocations"][instance]["allocations"][child]["resources"]["CUSTOM_NOPE"] = 1
    before = snapshot(client, root, child)
    resp = reshape(client, body)
    assert resp.status == 400
    assert resp.error["detail"] == "malformed reshaper data: No such resource class CUSTOM_NOPE."
    assert snapshot(client, root, child) == before


def test_removing_inventory_still_in_use(client, tree):
    root, child, instance = tree
    body = move_vcpu_body(client, root, child, instance)
    body["allocations"] = {}   # the instance stays on the root's VCPU
    before = snapshot(client, root, child)
    resp = reshape(client, body)
    assert resp.status == 409
    assert resp.error["code"] == "placement.inventory.inuse"
    assert resp.error["detail"] == (
        f"update conflict: Inventory for 'VCPU' on resource provider '{root}' in use.")
    assert snapshot(client, root, child) == before


def test_admission_failure_rolls_everything_back(client, tree):
    root, child, instance = tree
    before = snapshot(client, root, child)
    resp = reshape(client, move_vcpu_body(client, root, child, instance, child_vcpu=4))
    assert resp.status == 409
    assert resp.error["code"] == "placement.undefined_code"
    assert resp.error["detail"] == (
        f"Unable to allocate inventory: Unable to create allocation for 'VCPU' on resource "
        f"provider '{child}'. The requested amount would exceed the capacity.")
    assert snapshot(client, root, child) == before


def test_new_consumer_and_cleared_consumer(client, tree):
    root, child, instance = tree
    newcomer = new_uuid()
    body = move_vcpu_body(client, root, child, instance)
    body["allocations"][instance] = consumer_entry({}, 1)
    body["allocations"][newcomer] = consumer_entry({child: {"VCPU": 2}}, None, consumer_type="NEW")
    assert reshape(client, body).status == 204
    assert client.get(f"/allocations/{instance}").json == {"allocations": {}}
    got = client.get(f"/allocations/{newcomer}", mv="1.38").json
    assert got["consumer_generation"] == 1 and got["consumer_type"] == "NEW"


def test_consumer_type_boundary(client, tree):
    root, child, instance = tree
    body = move_vcpu_body(client, root, child, instance)
    resp = reshape(client, body, mv="1.37")
    assert resp.status == 400   # consumer_type not allowed before 1.38
    del body["allocations"][instance]["consumer_type"]
    resp = reshape(client, body, mv="1.38")
    assert resp.status == 400
    assert "'consumer_type' is a required property" in resp.error["detail"]
    assert reshape(client, body, mv="1.30").status == 204
    got = client.get(f"/allocations/{instance}", mv="1.38").json
    assert got["consumer_type"] == "INSTANCE"   # a pre-1.38 write keeps the type


def test_mappings_from_1_34(client, tree):
    root, child, instance = tree
    body = move_vcpu_body(client, root, child, instance)
    del body["allocations"][instance]["consumer_type"]
    body["allocations"][instance]["mappings"] = {"": [child]}
    assert reshape(client, body, mv="1.33").status == 400
    assert reshape(client, body, mv="1.34").status == 204


def test_reserved_above_total_is_refused(client, tree):
    root, child, instance = tree
    body = move_vcpu_body(client, root, child, instance)
    body["inventories"][child]["inventories"]["VCPU"]["reserved"] = 11
    resp = reshape(client, body)
    assert resp.status == 400
    assert "The reserved value is greater than total." in resp.error["detail"]


@pytest.mark.parametrize("mutate", [
    lambda b, rp, c: b.pop("allocations"),
    lambda b, rp, c: b.pop("inventories"),
    lambda b, rp, c: b.update(inventories={}),
    lambda b, rp, c: b.update(extra=1),
    lambda b, rp, c: b["inventories"][rp].update(resource_provider_generation=None),
    lambda b, rp, c: b["inventories"][rp].update(resource_provider_generation="1"),
    lambda b, rp, c: b["inventories"][rp].pop("resource_provider_generation"),
    lambda b, rp, c: b["inventories"][rp].pop("inventories"),
    lambda b, rp, c: b["inventories"][rp]["inventories"].update(VCPU={"total": 0}),
    lambda b, rp, c: b["inventories"][rp]["inventories"].update(VCPU={"reserved": 1}),
    lambda b, rp, c: b["inventories"][rp]["inventories"].update(VCPU={"total": 2 ** 31}),
    lambda b, rp, c: b["inventories"][rp]["inventories"].update(vcpu=5),
    lambda b, rp, c: b["inventories"].update({"short": {"resource_provider_generation": 0,
                                                         "inventories": {}}}),
    lambda b, rp, c: b["allocations"].update({"short": b["allocations"][c]}),
    lambda b, rp, c: b["allocations"][c].pop("consumer_generation"),
    lambda b, rp, c: b["allocations"][c]["allocations"][rp]["resources"].update(VCPU=0),
    lambda b, rp, c: b["allocations"][c].pop("project_id"),
])
def test_bad_bodies(client, tree, mutate):
    root, child, instance = tree
    body = move_vcpu_body(client, root, child, instance)
    mutate(body, child, instance)
    resp = reshape(client, body)
    assert resp.status == 400, resp
    assert resp.error["detail"].startswith("JSON does not validate: ")


def test_malformed_json(client):
    resp = client.post("/reshaper", body=b"{", mv="1.30", headers=SERVICE, content_type="application/json")
    assert resp.status == 400
    assert resp.error["detail"].startswith("Malformed JSON")


def test_keys_no_database_can_hold(client, tree):
    root, child, instance = tree
    body = move_vcpu_body(client, root, child, instance)
    body["inventories"][child]["inventories"]["VC\u0000PU"] = {"total": 1}
    resp = reshape(client, body)
    assert resp.status == 400
    assert resp.error["detail"] == ("JSON does not validate: NUL characters (\\u0000) are not allowed in strings: "
                                    f"instance['inventories']['{child}']['inventories'] (key 'VC\\x00PU')")
    body = move_vcpu_body(client, root, child, instance)
    body["inventories"][child + "\n"] = body["inventories"].pop(child)
    assert reshape(client, body).status == 400
