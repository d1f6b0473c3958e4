"""GET/PUT/DELETE /allocations/{consumer_uuid} (docs/design/placement-model.md#consumers, #allocations,
#generations, docs/design/placement-endpoints.md#allocations)."""
from __future__ import annotations

import threading
import uuid as uuidlib

import pytest

from billeting.placement import allocations as allocations_module
from billeting.placement import providers as providers_module
from billeting.placement.api.app import make_app
from tests.conftest import PlacementClient

INCOMPLETE = "00000000-0000-0000-0000-000000000000"


# --- helpers shared with the other allocation test modules -----------------

def new_uuid() -> str:
    return str(uuidlib.uuid4())


def set_inventory(client, rp_uuid: str, inventories: dict) -> int:
    """Replace the provider's inventory through the API; returns the new generation.
    Values are either a total or a full record."""
    generation = client.get(f"/resource_providers/{rp_uuid}", mv="1.14").json["generation"]
    records = {rc: value if isinstance(value, dict) else {"total": value}
               for rc, value in inventories.items()}
    resp = client.put(f"/resource_providers/{rp_uuid}/inventories", mv="1.26",
                      json={"resource_provider_generation": generation, "inventories": records})
    assert resp.status == 200, resp
    return resp.json["resource_provider_generation"]


def generation_of(client, rp_uuid: str) -> int:
    return client.get(f"/resource_providers/{rp_uuid}", mv="1.14").json["generation"]


def usages_of(client, rp_uuid: str) -> dict:
    return client.get(f"/resource_providers/{rp_uuid}/allocations").json["allocations"]


def body_at(mv: str, allocations: dict, *, generation=None, project="proj", user="user",
            consumer_type="INSTANCE") -> dict:
    """A dict-form PUT body carrying exactly the fields ``mv`` requires."""
    major, minor = (int(p) for p in mv.split("."))
    body = {"allocations": {rp: {"resources": res} for rp, res in allocations.items()},
            "project_id": project, "user_id": user}
    if (major, minor) >= (1, 28):
        body["consumer_generation"] = generation
    if (major, minor) >= (1, 38):
        body["consumer_type"] = consumer_type
    return body


def put_allocations(client, consumer: str, allocations: dict, *, mv: str = "1.38", **kw):
    return client.put(f"/allocations/{consumer}", json=body_at(mv, allocations, **kw), mv=mv)


@pytest.fixture
def provider(client, create_provider):
    """A provider with 8 VCPU, 4096 MEMORY_MB and 100 DISK_GB."""
    rp = create_provider()
    set_inventory(client, rp["uuid"], {"VCPU": 8, "MEMORY_MB": 4096, "DISK_GB": 100})
    return rp["uuid"]


# --- GET --------------------------------------------------------------------

@pytest.mark.parametrize("mv", ["1.0", "1.12", "1.28", "1.38"])
def test_get_unknown_or_malformed_consumer_is_empty(client, mv):
    for consumer in (new_uuid(), "not-a-uuid"):
        resp = client.get(f"/allocations/{consumer}", mv=mv)
        assert resp.status == 200
        assert resp.json == {"allocations": {}}


def test_get_shape_per_microversion(client, provider):
    consumer = new_uuid()
    assert put_allocations(client, consumer, {provider: {"VCPU": 2, "MEMORY_MB": 512}}).status == 204
    gen = generation_of(client, provider)
    expected_allocs = {provider: {"generation": gen, "resources": {"VCPU": 2, "MEMORY_MB": 512}}}
    assert client.get(f"/allocations/{consumer}", mv="1.11").json == {"allocations": expected_allocs}
    assert client.get(f"/allocations/{consumer}", mv="1.12").json == {
        "allocations": expected_allocs, "project_id": "proj", "user_id": "user"}
    assert client.get(f"/allocations/{consumer}", mv="1.27").json == {
        "allocations": expected_allocs, "project_id": "proj", "user_id": "user"}
    assert client.get(f"/allocations/{consumer}", mv="1.28").json == {
        "allocations": expected_allocs, "project_id": "proj", "user_id": "user",
        "consumer_generation": 1}
    assert client.get(f"/allocations/{consumer}", mv="1.38").json == {
        "allocations": expected_allocs, "project_id": "proj", "user_id": "user",
        "consumer_generation": 1, "consumer_type": "INSTANCE"}


def test_get_cache_headers_from_1_15(client, provider):
    consumer = new_uuid()
    put_allocations(client, consumer, {provider: {"VCPU": 1}})
    resp = client.get(f"/allocations/{consumer}", mv="1.15")
    assert resp.headers["cache-control"] == "no-cache"
    assert resp.headers["last-modified"].endswith("GMT")
    assert "last-modified" in client.get(f"/allocations/{new_uuid()}", mv="1.15").headers
    old = client.get(f"/allocations/{consumer}", mv="1.14")
    assert "cache-control" not in old.headers and "last-modified" not in old.headers


def test_get_accept_and_policy(client, provider):
    consumer = new_uuid()
    assert client.get(f"/allocations/{consumer}", headers={"Accept": "text/html"}).status == 406
    resp = client.get(f"/allocations/{consumer}", token="user", mv="1.23")
    assert resp.status == 403
    assert resp.error["detail"] == "Policy does not allow placement:allocations:list to be performed."
    service = client.get(f"/allocations/{consumer}", token="nova", headers={"X-Roles": "service"})
    assert service.status == 200


# --- PUT: the list form (1.0 - 1.11) ---------------------------------------

def test_list_form_before_1_8_uses_incomplete_consumer_owner(client, provider):
    consumer = new_uuid()
    resp = client.put(f"/allocations/{consumer}", mv="1.0", json={"allocations": [
        {"resource_provider": {"uuid": provider}, "resources": {"VCPU": 1, "DISK_GB": 10}}]})
    assert resp.status == 204
    assert resp.text == "" and "content-type" not in resp.headers
    got = client.get(f"/allocations/{consumer}", mv="1.12").json
    assert got["project_id"] == INCOMPLETE and got["user_id"] == INCOMPLETE
    assert got["allocations"][provider]["resources"] == {"VCPU": 1, "DISK_GB": 10}


def test_list_form_rejects_owner_before_1_8_and_requires_it_from_1_8(client, provider):
    consumer = new_uuid()
    item = {"resource_provider": {"uuid": provider}, "resources": {"VCPU": 1}}
    resp = client.put(f"/allocations/{consumer}", mv="1.7",
                      json={"allocations": [item], "project_id": "p", "user_id": "u"})
    assert resp.status == 400
    assert "JSON does not validate" in resp.error["detail"]
    resp = client.put(f"/allocations/{consumer}", mv="1.8", json={"allocations": [item]})
    assert resp.status == 400
    assert "'project_id' is a required property" in resp.error["detail"]
    resp = client.put(f"/allocations/{consumer}", mv="1.8",
                      json={"allocations": [item], "project_id": "p8", "user_id": "u8"})
    assert resp.status == 204
    got = client.get(f"/allocations/{consumer}", mv="1.12").json
    assert (got["project_id"], got["user_id"]) == ("p8", "u8")


def test_list_form_repeated_provider_adds_up(client, provider):
    consumer = new_uuid()
    item = {"resource_provider": {"uuid": provider}, "resources": {"VCPU": 1}}
    resp = client.put(f"/allocations/{consumer}", mv="1.11",
                      json={"allocations": [item, item], "project_id": "p", "user_id": "u"})
    assert resp.status == 204
    assert client.get(f"/allocations/{consumer}").json["allocations"][provider]["resources"] == {"VCPU": 2}


def _item(rp, resources=None, **extra):
    item = {"resource_provider": {"uuid": rp}, "resources": resources or {"VCPU": 1}}
    return {**item, **extra}


@pytest.mark.parametrize("make", [
    lambda rp: [],                                                   # at least one item
    lambda rp: [_item("x")],                                         # not UUID-like
    lambda rp: [{"resource_provider": {}, "resources": {"VCPU": 1}}],
    lambda rp: [{"resources": {"VCPU": 1}}],
    lambda rp: [{"resource_provider": {"uuid": rp}}],
    lambda rp: [{"resource_provider": {"uuid": rp}, "resources": {}}],
    lambda rp: [_item(rp, {"VCPU": 0})],
    lambda rp: [_item(rp, extra=1)],
    lambda rp: [{"resource_provider": {"uuid": rp, "name": "x"}, "resources": {"VCPU": 1}}],
    lambda rp: {rp: {"resources": {"VCPU": 1}}},                     # dict form is 1.12+
])
def test_list_form_bad_bodies(client, provider, make):
    resp = client.put(f"/allocations/{new_uuid()}", mv="1.11",
                      json={"allocations": make(provider), "project_id": "p", "user_id": "u"})
    assert resp.status == 400
    assert resp.error["detail"].startswith("JSON does not validate")


# --- PUT: the dict form (1.12+) ---------------------------------------------

def test_dict_form_from_1_12_and_list_form_refused(client, provider):
    consumer = new_uuid()
    listed = {"allocations": [{"resource_provider": {"uuid": provider}, "resources": {"VCPU": 1}}],
              "project_id": "p", "user_id": "u"}
    assert client.put(f"/allocations/{consumer}", json=listed, mv="1.12").status == 400
    resp = client.put(f"/allocations/{consumer}", mv="1.12", json={
        "allocations": {provider: {"resources": {"VCPU": 1}, "generation": 99}},
        "project_id": "p", "user_id": "u"})
    assert resp.status == 204  # provider generation in the entry is ignored
    # The 1.12+ GET body minus read-only parts is a valid PUT body.
    got = client.get(f"/allocations/{consumer}", mv="1.12").json
    assert client.put(f"/allocations/{consumer}", json=got, mv="1.12").status == 204


def test_dict_form_owner_required_and_empty_refused_before_1_28(client, provider):
    consumer = new_uuid()
    resp = client.put(f"/allocations/{consumer}", mv="1.12",
                      json={"allocations": {provider: {"resources": {"VCPU": 1}}}})
    assert resp.status == 400
    resp = client.put(f"/allocations/{consumer}", json=body_at("1.27", {}), mv="1.27")
    assert resp.status == 400
    assert "minProperties" in resp.error["detail"]


def test_consumer_generation_field_boundary(client, provider):
    consumer = new_uuid()
    body = body_at("1.27", {provider: {"VCPU": 1}})
    assert client.put(f"/allocations/{consumer}", json={**body, "consumer_generation": None},
                      mv="1.27").status == 400
    resp = client.put(f"/allocations/{consumer}", json=body, mv="1.28")
    assert resp.status == 400
    assert "'consumer_generation' is a required property" in resp.error["detail"]


def test_consumer_generation_rules(client, provider):
    consumer = new_uuid()
    resp = put_allocations(client, consumer, {provider: {"VCPU": 1}}, mv="1.28", generation=0)
    assert resp.status == 409
    assert resp.error["code"] == "placement.concurrent_update"
    assert "consumer generation conflict - expected null but got 0" in resp.error["detail"]

    assert put_allocations(client, consumer, {provider: {"VCPU": 1}}, mv="1.28").status == 204
    assert client.get(f"/allocations/{consumer}", mv="1.28").json["consumer_generation"] == 1

    resp = put_allocations(client, consumer, {provider: {"VCPU": 2}}, mv="1.28", generation=None)
    assert resp.status == 409
    assert "consumer generation conflict - expected 1 but got None" in resp.error["detail"]
    resp = put_allocations(client, consumer, {provider: {"VCPU": 2}}, mv="1.28", generation=5)
    assert "consumer generation conflict - expected 1 but got 5" in resp.error["detail"]

    # Unchanged allocations still bump the consumer generation.
    assert put_allocations(client, consumer, {provider: {"VCPU": 1}}, mv="1.28", generation=1).status == 204
    assert client.get(f"/allocations/{consumer}", mv="1.28").json["consumer_generation"] == 2
    # Before 1.28 nothing is checked, but the generation still moves.
    assert put_allocations(client, consumer, {provider: {"VCPU": 1}}, mv="1.27").status == 204
    assert client.get(f"/allocations/{consumer}", mv="1.28").json["consumer_generation"] == 3


def test_error_code_only_from_1_23(client, provider):
    resp = put_allocations(client, new_uuid(), {provider: {"VCPU": 99}}, mv="1.22")
    assert resp.status == 409
    assert "code" not in resp.error
    resp = put_allocations(client, new_uuid(), {provider: {"VCPU": 99}}, mv="1.23")
    assert resp.error["code"] == "placement.undefined_code"


def test_empty_allocations_delete_the_consumer_from_1_28(client, provider):
    consumer = new_uuid()
    put_allocations(client, consumer, {provider: {"VCPU": 3}}, mv="1.28")
    before = generation_of(client, provider)
    resp = put_allocations(client, consumer, {}, mv="1.28", generation=1)
    assert resp.status == 204
    assert client.get(f"/allocations/{consumer}", mv="1.28").json == {"allocations": {}}
    # The provider that held the cleared allocations is bumped.
    assert generation_of(client, provider) == before + 1
    # The consumer record is gone: a new write must use null again.
    assert put_allocations(client, consumer, {provider: {"VCPU": 1}}, mv="1.28", generation=1).status == 409
    assert put_allocations(client, consumer, {provider: {"VCPU": 1}}, mv="1.28").status == 204


def test_empty_allocations_for_new_consumer_leave_no_orphan(client, provider):
    consumer = new_uuid()
    assert put_allocations(client, consumer, {}, mv="1.28").status == 204
    assert client.get(f"/allocations/{consumer}", mv="1.28").json == {"allocations": {}}
    # Not quirk docs/design/placement-quirks.md#q1: null is still the right generation afterwards.
    assert put_allocations(client, consumer, {provider: {"VCPU": 1}}, mv="1.28").status == 204
    # A stale generation for an absent consumer is still a conflict.
    resp = put_allocations(client, new_uuid(), {}, mv="1.28", generation=3)
    assert resp.status == 409
    assert "expected null but got 3" in resp.error["detail"]


def test_failed_writes_leave_no_consumer_behind(client, provider):
    consumer = new_uuid()
    resp = put_allocations(client, consumer, {new_uuid(): {"VCPU": 1}}, mv="1.28")
    assert resp.status == 400
    resp = put_allocations(client, consumer, {provider: {"VCPU": 99}}, mv="1.28")
    assert resp.status == 409
    resp = put_allocations(client, consumer, {provider: {"CUSTOM_NOPE": 1}}, mv="1.28")
    assert resp.status == 400
    assert client.get(f"/allocations/{consumer}", mv="1.28").json == {"allocations": {}}
    assert put_allocations(client, consumer, {provider: {"VCPU": 1}}, mv="1.28").status == 204
    assert usages_of(client, provider) == {consumer: {"resources": {"VCPU": 1}}}


def test_mappings_accepted_from_1_34(client, provider):
    consumer = new_uuid()
    body = body_at("1.34", {provider: {"VCPU": 1}})
    mapped = {**body, "mappings": {"": [provider], "_NIC": [provider]}}
    resp = client.put(f"/allocations/{consumer}", json=mapped, mv="1.33")
    assert resp.status == 400
    assert "Additional properties are not allowed ('mappings' was unexpected)" in resp.error["detail"]
    assert client.put(f"/allocations/{consumer}", json=mapped, mv="1.34").status == 204
    assert "mappings" not in client.get(f"/allocations/{consumer}", mv="1.34").json
    for bad in ({}, {"": []}, {"": ["not-a-uuid"]}, {"": provider}):
        resp = client.put(f"/allocations/{consumer}", mv="1.34",
                          json={**body_at("1.34", {provider: {"VCPU": 1}}, generation=1), "mappings": bad})
        assert resp.status == 400, bad


def test_consumer_type_from_1_38(client, provider):
    consumer = new_uuid()
    body = body_at("1.37", {provider: {"VCPU": 1}})
    resp = client.put(f"/allocations/{consumer}", json={**body, "consumer_type": "INSTANCE"}, mv="1.37")
    assert resp.status == 400
    resp = client.put(f"/allocations/{consumer}", json=body, mv="1.38")
    assert resp.status == 400
    assert "'consumer_type' is a required property" in resp.error["detail"]
    for bad in ("instance", "", "X" * 256, 5, None):
        resp = client.put(f"/allocations/{consumer}", json={**body, "consumer_type": bad}, mv="1.38")
        assert resp.status == 400, bad

    # Created below 1.38: no type, reported as "unknown".
    assert client.put(f"/allocations/{consumer}", json=body, mv="1.37").status == 204
    assert client.get(f"/allocations/{consumer}", mv="1.38").json["consumer_type"] == "unknown"
    # At 1.38 the type is set (silently, without a separate bump) ...
    assert put_allocations(client, consumer, {provider: {"VCPU": 1}}, generation=1,
                           consumer_type="MIGRATION").status == 204
    got = client.get(f"/allocations/{consumer}", mv="1.38").json
    assert got["consumer_type"] == "MIGRATION" and got["consumer_generation"] == 2
    # ... and a write below 1.38 never changes it.
    assert put_allocations(client, consumer, {provider: {"VCPU": 2}}, mv="1.37", generation=2).status == 204
    assert client.get(f"/allocations/{consumer}", mv="1.38").json["consumer_type"] == "MIGRATION"


def test_project_and_user_change_silently(client, provider):
    consumer = new_uuid()
    put_allocations(client, consumer, {provider: {"VCPU": 1}})
    assert put_allocations(client, consumer, {provider: {"VCPU": 1}}, generation=1,
                           project="other", user="someone").status == 204
    got = client.get(f"/allocations/{consumer}", mv="1.38").json
    assert (got["project_id"], got["user_id"], got["consumer_generation"]) == ("other", "someone", 2)


def test_consumer_uuid_in_path(client, provider):
    resp = put_allocations(client, "not-a-uuid", {provider: {"VCPU": 1}})
    assert resp.status == 400
    assert resp.error["detail"] == "Malformed consumer_uuid: not-a-uuid"
    upper = new_uuid().upper()
    assert put_allocations(client, upper.replace("-", ""), {provider: {"VCPU": 1}}).status == 204
    # Normalised on PUT; GET looks the id up verbatim.
    assert client.get(f"/allocations/{upper.lower()}").json["allocations"] != {}
    assert client.get(f"/allocations/{upper}").json == {"allocations": {}}


# --- provider generations (docs/design/placement-model.md#generations) --------------------------------------

def test_provider_generation_bumps(client, create_provider, provider):
    other = create_provider()["uuid"]
    set_inventory(client, other, {"VCPU": 8})
    consumer = new_uuid()
    g1, g2 = generation_of(client, provider), generation_of(client, other)
    put_allocations(client, consumer, {provider: {"VCPU": 1}, other: {"VCPU": 1}})
    assert (generation_of(client, provider), generation_of(client, other)) == (g1 + 1, g2 + 1)
    # Moving off ``other``: only the provider named in the new set is bumped.
    put_allocations(client, consumer, {provider: {"VCPU": 2}}, generation=1)
    assert (generation_of(client, provider), generation_of(client, other)) == (g1 + 2, g2 + 1)
    # DELETE bumps nothing.
    assert client.delete(f"/allocations/{consumer}").status == 204
    assert (generation_of(client, provider), generation_of(client, other)) == (g1 + 2, g2 + 1)


# --- admission (docs/design/placement-model.md#allocations) -------------------------------------------------

def test_unknown_provider(client, provider):
    missing = new_uuid()
    resp = put_allocations(client, new_uuid(), {provider: {"VCPU": 1}, missing: {"VCPU": 1}})
    assert resp.status == 400
    assert resp.error["detail"] == f"Allocation for resource provider '{missing}' that does not exist."


def test_unknown_resource_class(client, provider):
    consumer = new_uuid()
    resp = put_allocations(client, consumer, {provider: {"CUSTOM_NOPE": 1}})
    assert resp.status == 400
    assert resp.error["detail"] == (
        f"Unable to allocate inventory for consumer {consumer}: No such resource class CUSTOM_NOPE.")
    assert resp.error["code"] == "placement.undefined_code"


def test_no_inventory_for_class(client, provider):
    resp = put_allocations(client, new_uuid(), {provider: {"VCPU": 1, "VGPU": 1, "PCPU": 2}})
    assert resp.status == 409
    assert resp.error["code"] == "placement.undefined_code"
    assert resp.error["detail"] == (
        f"Unable to allocate inventory: Inventory for 'VGPU, PCPU' on resource provider "
        f"'{provider}' invalid.")


@pytest.mark.parametrize("amount", [1, 2, 3, 5, 14, 16])
def test_min_max_step_violations(client, create_provider, amount):
    rp = create_provider()["uuid"]
    set_inventory(client, rp, {"DISK_GB": {"total": 100, "min_unit": 4, "max_unit": 12, "step_size": 2}})
    resp = put_allocations(client, new_uuid(), {rp: {"DISK_GB": amount}})
    assert resp.status == 409
    assert resp.error["detail"] == (
        f"Unable to allocate inventory: Unable to create allocation for 'DISK_GB' on resource "
        f"provider '{rp}'. The requested amount would violate inventory constraints.")


def test_min_max_step_accepted(client, create_provider):
    rp = create_provider()["uuid"]
    set_inventory(client, rp, {"DISK_GB": {"total": 100, "min_unit": 4, "max_unit": 12, "step_size": 2}})
    for amount in (4, 6, 12):
        assert put_allocations(client, new_uuid(), {rp: {"DISK_GB": amount}}).status == 204


def test_capacity_uses_reserved_and_ratio(client, create_provider):
    rp = create_provider()["uuid"]
    set_inventory(client, rp, {"VCPU": {"total": 4, "reserved": 1, "allocation_ratio": 1.5}})
    # (4 - 1) * 1.5 = 4.5: four fit, a fifth does not.
    assert put_allocations(client, new_uuid(), {rp: {"VCPU": 4}}).status == 204
    resp = put_allocations(client, new_uuid(), {rp: {"VCPU": 1}})
    assert resp.status == 409
    assert resp.error["detail"] == (
        f"Unable to allocate inventory: Unable to create allocation for 'VCPU' on resource "
        f"provider '{rp}'. The requested amount would exceed the capacity.")
    assert resp.error["code"] == "placement.undefined_code"


def test_own_previous_allocations_do_not_count(client, create_provider):
    rp = create_provider()["uuid"]
    set_inventory(client, rp, {"VCPU": 4})
    consumer = new_uuid()
    put_allocations(client, consumer, {rp: {"VCPU": 3}})
    assert put_allocations(client, consumer, {rp: {"VCPU": 4}}, generation=1).status == 204
    assert put_allocations(client, new_uuid(), {rp: {"VCPU": 1}}).status == 409


def test_over_capacity_write_allowed_when_not_worse(client, create_provider):
    rp = create_provider()["uuid"]
    set_inventory(client, rp, {"VCPU": 8})
    consumer = new_uuid()
    put_allocations(client, consumer, {rp: {"VCPU": 6}})
    set_inventory(client, rp, {"VCPU": 4})  # shrunk below usage: allowed
    assert put_allocations(client, consumer, {rp: {"VCPU": 6}}, generation=1).status == 204
    assert put_allocations(client, consumer, {rp: {"VCPU": 5}}, generation=2).status == 204
    resp = put_allocations(client, consumer, {rp: {"VCPU": 6}}, generation=3)
    assert resp.status == 409
    assert "would exceed the capacity" in resp.error["detail"]


def test_huge_amount_is_a_409_not_a_500(client, provider):
    resp = put_allocations(client, new_uuid(), {provider: {"VCPU": 2 ** 40}})
    assert resp.status == 409
    assert "violate inventory constraints" in resp.error["detail"]
    resp = put_allocations(client, new_uuid(), {provider: {"VCPU": 1}}, generation=2 ** 62)
    assert resp.status == 409


def test_deleting_provider_with_allocations(client, provider):
    consumer = new_uuid()
    put_allocations(client, consumer, {provider: {"VCPU": 1}})
    resp = client.delete(f"/resource_providers/{provider}", mv="1.23")
    assert resp.status == 409
    assert resp.error["code"] == "placement.resource_provider.inuse"
    assert client.delete(f"/allocations/{consumer}").status == 204
    assert client.delete(f"/resource_providers/{provider}").status == 204


# --- bad input ------------------------------------------------------------------

@pytest.mark.parametrize("mutate", [
    lambda b, rp: b["allocations"][rp]["resources"].update(VCPU=0),
    lambda b, rp: b["allocations"][rp]["resources"].update(VCPU=-1),
    lambda b, rp: b["allocations"][rp]["resources"].update(VCPU="1"),
    lambda b, rp: b["allocations"][rp]["resources"].update(VCPU=1.5),
    lambda b, rp: b["allocations"][rp]["resources"].update(VCPU=True),
    lambda b, rp: b["allocations"][rp]["resources"].update(VCPU=None),
    lambda b, rp: b["allocations"][rp]["resources"].update(vcpu=1),
    lambda b, rp: b["allocations"][rp].update(resources={}),
    lambda b, rp: b["allocations"][rp].pop("resources"),
    lambda b, rp: b["allocations"][rp].update(extra=1),
    lambda b, rp: b["allocations"][rp].update(generation="x"),
    lambda b, rp: b["allocations"].update({"not-a-uuid": {"resources": {"VCPU": 1}}}),
    lambda b, rp: b.update(allocations=[]),
    lambda b, rp: b.update(allocations=None),
    lambda b, rp: b.update(project_id=""),
    lambda b, rp: b.update(project_id="p" * 256),
    lambda b, rp: b.update(user_id=7),
    lambda b, rp: b.pop("user_id"),
    lambda b, rp: b.update(consumer_generation="1"),
    lambda b, rp: b.update(surprise=True),
])
def test_bad_bodies_are_400(client, provider, mutate):
    body = body_at("1.38", {provider: {"VCPU": 1}})
    mutate(body, provider)
    resp = client.put(f"/allocations/{new_uuid()}", json=body, mv="1.38")
    assert resp.status == 400, resp
    assert resp.error["detail"].startswith("JSON does not validate: ")


def test_unparseable_and_wrong_media_type(client, provider):
    consumer = new_uuid()
    for raw in (b"", b"{", b"[1,", b"\xff"):
        resp = client.put(f"/allocations/{consumer}", body=raw, content_type="application/json")
        assert resp.status == 400
        assert resp.error["detail"].startswith("Malformed JSON")
    resp = client.put(f"/allocations/{consumer}", body=b"{}", content_type="text/plain")
    assert resp.status == 415
    assert resp.error["detail"] == "The media type text/plain is not supported, use application/json"
    assert client.put(f"/allocations/{consumer}", json=[1, 2], mv="1.38").status == 400


def test_put_and_delete_policy(client, provider):
    consumer = new_uuid()
    body = body_at("1.38", {provider: {"VCPU": 1}})
    resp = client.put(f"/allocations/{consumer}", json=body, mv="1.38", token="user")
    assert resp.status == 403
    assert resp.error["detail"] == "Policy does not allow placement:allocations:update to be performed."
    resp = client.put(f"/allocations/{consumer}", json=body, mv="1.38", token="nova",
                      headers={"X-Roles": "service"})
    assert resp.status == 204
    resp = client.delete(f"/allocations/{consumer}", token="user")
    assert resp.status == 403
    assert resp.error["detail"] == "Policy does not allow placement:allocations:delete to be performed."


def test_allow_header(client):
    resp = client.post(f"/allocations/{new_uuid()}", json={})
    assert resp.status == 405
    assert resp.headers["allow"] == "GET, PUT, DELETE"


# --- DELETE -------------------------------------------------------------------

def test_delete(client, provider):
    consumer = new_uuid()
    put_allocations(client, consumer, {provider: {"VCPU": 2}})
    resp = client.delete(f"/allocations/{consumer}")
    assert resp.status == 204 and resp.text == ""
    assert client.get(f"/allocations/{consumer}").json == {"allocations": {}}
    assert usages_of(client, provider) == {}
    resp = client.delete(f"/allocations/{consumer}")
    assert resp.status == 404
    assert resp.error["detail"] == f"No allocations for consumer '{consumer}'"
    assert client.delete("/allocations/whatever").status == 404
    # The consumer record went with its allocations.
    assert put_allocations(client, consumer, {provider: {"VCPU": 1}}, mv="1.28").status == 204


# --- concurrency: lost races are retried, exhausted retries are a 409 ------------

def _client_with_retries(settings, engine, retries: int) -> PlacementClient:
    settings.allocation_conflict_retry_count = retries
    return PlacementClient(make_app(settings, engine))


def test_lost_generation_race_is_retried(settings, engine, create_provider, client, monkeypatch):
    rp = create_provider()["uuid"]
    set_inventory(client, rp, {"VCPU": 4})
    real = providers_module.bump_generations
    calls = {"n": 0}

    def flaky(conn, seen):
        calls["n"] += 1
        if calls["n"] == 1:   # another writer "won" once
            return real(conn, [(provider_id, generation - 1) for provider_id, generation in seen])
        return real(conn, seen)

    monkeypatch.setattr(providers_module, "bump_generations", flaky)
    retrying = _client_with_retries(settings, engine, 3)
    before = generation_of(client, rp)
    assert put_allocations(retrying, new_uuid(), {rp: {"VCPU": 1}}).status == 204
    assert calls["n"] == 2
    assert generation_of(client, rp) == before + 1


def test_one_lost_compare_and_set_among_many_fails_the_bump(engine, create_provider, client):
    """The providers of a write are bumped in one executemany: a single
    stale generation among them must still be noticed (the drivers sum the
    row counts), and nothing of the bump may be kept."""
    from billeting.placement import errors as placement_errors
    from billeting.placement.store.tx import run_write

    uuids = [create_provider()["uuid"] for _ in range(3)]
    with engine.connect() as conn:
        found = providers_module.get_many(conn, uuids)
    seen = sorted((p.id, p.generation) for p in found.values())
    stale = seen[:2] + [(seen[2][0], seen[2][1] + 7)]   # the last one was changed meanwhile
    before = {u: generation_of(client, u) for u in uuids}

    def work(conn):
        providers_module.bump_generations(conn, stale)

    with pytest.raises(placement_errors.ConcurrentUpdate):
        run_write(engine, work)
    assert {u: generation_of(client, u) for u in uuids} == before
    run_write(engine, lambda conn: providers_module.bump_generations(conn, seen))
    assert {u: generation_of(client, u) for u in uuids} == {u: g + 1 for u, g in before.items()}


def test_exhausted_retries_are_409(settings, engine, create_provider, client, monkeypatch):
    rp = create_provider()["uuid"]
    set_inventory(client, rp, {"VCPU": 4})
    real = providers_module.bump_generations
    monkeypatch.setattr(providers_module, "bump_generations",
                        lambda conn, seen: real(conn, [(p, g - 1) for p, g in seen]))
    retrying = _client_with_retries(settings, engine, 2)
    consumer = new_uuid()
    resp = put_allocations(retrying, consumer, {rp: {"VCPU": 1}})
    assert resp.status == 409
    assert resp.error["code"] == "placement.concurrent_update"
    assert resp.error["detail"].startswith(
        "Inventory and/or allocations changed while attempting to allocate: ")
    monkeypatch.undo()
    assert client.get(f"/allocations/{consumer}").json == {"allocations": {}}


def test_concurrent_writers_never_overcommit(client, create_provider, app):
    rp = create_provider()["uuid"]
    set_inventory(client, rp, {"VCPU": 5})
    results: list[tuple[int, str]] = []
    lock = threading.Lock()

    def claim():
        mine = PlacementClient(app)
        resp = put_allocations(mine, new_uuid(), {rp: {"VCPU": 1}})
        with lock:
            results.append((resp.status, resp.error["detail"] if resp.status != 204 else ""))

    threads = [threading.Thread(target=claim) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(status for status, _ in results) == [204] * 5 + [409] * 3
    # The losers were refused on capacity, with fresh data, not on exhausted retries.
    assert all("would exceed the capacity" in detail for status, detail in results if status == 409)
    used = sum(c["resources"]["VCPU"] for c in usages_of(client, rp).values())
    assert used == 5


@pytest.mark.parametrize("hook", ["_read_state", "_admit"])
def test_commit_inside_the_read_write_window_is_caught(test_database, app, client, create_provider,
                                                       monkeypatch, hook):
    """Another writer commits around this write's one-statement read of
    generations and usage: just before it (the read must then see the new
    usage) or between it and the compare-and-set (which must then fail, and
    the re-run see the new usage)."""
    if test_database.backend == "sqlite":
        pytest.skip("SQLite serializes writers at BEGIN IMMEDIATE; no window to hit")
    rp = create_provider()["uuid"]
    set_inventory(client, rp, {"VCPU": 1})
    real = getattr(allocations_module, hook)
    intruder: list[int] = []

    def intrude(*args, **kwargs):
        if not intruder:
            intruder.append(0)
            other = threading.Thread(target=lambda: intruder.append(
                put_allocations(PlacementClient(app), new_uuid(), {rp: {"VCPU": 1}}).status))
            other.start()
            other.join(timeout=60)
        return real(*args, **kwargs)

    monkeypatch.setattr(allocations_module, hook, intrude)
    resp = put_allocations(client, new_uuid(), {rp: {"VCPU": 1}})
    assert intruder == [0, 204]
    assert resp.status == 409
    assert "would exceed the capacity" in resp.error["detail"]
    assert len(usages_of(client, rp)) == 1


def test_text_no_database_can_hold_is_refused_not_crashed(client, provider):
    """NUL characters and over-long keys never reach the database as 500s."""
    assert client.get("/allocations/%00abc").json == {"allocations": {}}
    assert client.delete("/allocations/%00abc").status == 404
    resp = put_allocations(client, new_uuid(), {provider: {"VCPU": 1}}, project="a\u0000b")
    assert resp.status == 400
    assert resp.error["detail"].startswith("JSON does not validate: ")
    assert client.get(f"/allocations/{'x' * 500}").json == {"allocations": {}}
    resp = client.put(f"/allocations/{new_uuid()}", mv="1.38", json={
        **body_at("1.38", {}), "allocations": {provider + "\n": {"resources": {"VCPU": 1}}}})
    assert resp.status == 400
