"""Inventories of one provider (docs/design/placement-model.md#inventory, #generations,
docs/design/placement-endpoints.md#inventories)."""
from __future__ import annotations

import re
import uuid as uuidlib

import pytest

from billeting.placement.store import tables as t
from tests.placement.api.direct_rows import allocate

MAX_INT = 2147483647
DEFAULTS = {"reserved": 0, "min_unit": 1, "max_unit": MAX_INT, "step_size": 1,
            "allocation_ratio": 1.0}
# The expression nova uses to pick the classes out of an in-use error.
NOVA_IN_USE = re.compile(r"Inventory for (.+) on resource provider (.+) in use")


def inv_path(rp_uuid: str, rc: str | None = None) -> str:
    path = f"/resource_providers/{rp_uuid}/inventories"
    return f"{path}/{rc}" if rc else path


@pytest.fixture
def rp(create_provider) -> str:
    return create_provider()["uuid"]


def generation(client, rp_uuid: str) -> int:
    return client.get(f"/resource_providers/{rp_uuid}").json["generation"]


def post(client, rp_uuid, mv="1.39", **fields):
    return client.post(inv_path(rp_uuid), json=fields, mv=mv)


def put_all(client, rp_uuid, gen, inventories, mv="1.39"):
    return client.put(inv_path(rp_uuid), json={"resource_provider_generation": gen,
                                               "inventories": inventories}, mv=mv)


# --- GET collection --------------------------------------------------------

def test_empty_collection(client, rp):
    resp = client.get(inv_path(rp))
    assert resp.status == 200
    assert resp.json == {"resource_provider_generation": 0, "inventories": {}}


def test_collection_of_unknown_provider_is_404(client):
    missing = str(uuidlib.uuid4())
    resp = client.get(inv_path(missing))
    assert resp.status == 404
    assert resp.error["detail"].startswith(f"No resource provider with uuid {missing} found")
    assert client.get(inv_path("not-a-uuid")).status == 404


def test_collection_lists_every_class_with_all_fields(client, rp):
    assert post(client, rp, resource_class="VCPU", total=16, allocation_ratio=16).status == 201
    assert post(client, rp, resource_class="DISK_GB", total=2048, reserved=512, min_unit=10,
                max_unit=1024, step_size=10).status == 201
    resp = client.get(inv_path(rp))
    assert resp.json == {
        "resource_provider_generation": 2,
        "inventories": {
            "VCPU": {**DEFAULTS, "total": 16, "allocation_ratio": 16.0},
            "DISK_GB": {"total": 2048, "reserved": 512, "min_unit": 10, "max_unit": 1024,
                        "step_size": 10, "allocation_ratio": 1.0},
        },
    }
    # allocation_ratio is always a JSON float, the rest are integers
    assert '"allocation_ratio":16.0' in resp.text
    assert '"total":16,' in resp.text


def test_get_needs_json_accept_and_policy(client, rp):
    assert client.get(inv_path(rp), headers={"Accept": "text/html"}).status == 406
    resp = client.get(inv_path(rp), token="user")
    assert resp.status == 403
    assert "placement:resource_providers:inventories:list" in resp.error["detail"]
    # policy is decided before the provider is looked up
    assert client.get(inv_path(str(uuidlib.uuid4())), token="user").status == 403


# --- POST (add one class) --------------------------------------------------

def test_post_defaults_location_and_generation(client, rp):
    resp = post(client, rp, mv="1.0", resource_class="VCPU", total=8)
    assert resp.status == 201
    assert resp.json == {**DEFAULTS, "total": 8, "resource_provider_generation": 1}
    assert resp.headers["location"].endswith(f"/resource_providers/{rp}/inventories/VCPU")
    assert resp.headers["content-type"] == "application/json"
    assert "last-modified" not in resp.headers
    assert generation(client, rp) == 1


def test_post_ignores_the_generation(client, rp):
    resp = post(client, rp, resource_class="VCPU", total=8, resource_provider_generation=99)
    assert resp.status == 201
    assert resp.json["resource_provider_generation"] == 1


def test_post_every_field(client, rp):
    fields = {"total": 2048, "reserved": 512, "min_unit": 10, "max_unit": 1024, "step_size": 10,
              "allocation_ratio": 1.5}
    resp = post(client, rp, resource_class="MEMORY_MB", **fields)
    assert resp.status == 201
    assert resp.json == {**fields, "resource_provider_generation": 1}
    assert client.get(inv_path(rp, "MEMORY_MB")).json == {**fields, "resource_provider_generation": 1}


def test_post_extreme_values_round_trip(client, rp):
    fields = {"total": MAX_INT, "reserved": MAX_INT - 1, "min_unit": MAX_INT, "max_unit": MAX_INT,
              "step_size": MAX_INT, "allocation_ratio": 3.40282e38}
    resp = post(client, rp, resource_class="DISK_GB", **fields)
    assert resp.status == 201, resp
    got = client.get(inv_path(rp, "DISK_GB")).json
    assert got["total"] == MAX_INT and got["reserved"] == MAX_INT - 1
    assert got["allocation_ratio"] == pytest.approx(3.40282e38)


def test_post_duplicate_class_is_concurrent_update(client, rp):
    assert post(client, rp, resource_class="VCPU", total=8).status == 201
    resp = post(client, rp, mv="1.23", resource_class="VCPU", total=4)
    assert resp.status == 409
    assert resp.error["code"] == "placement.concurrent_update"
    assert resp.error["detail"].startswith("Update conflict: ")
    assert generation(client, rp) == 1


def test_post_unknown_class(client, rp):
    resp = post(client, rp, resource_class="CUSTOM_NOPE", total=1)
    assert resp.status == 400
    assert resp.error["detail"] == (f"Unable to create inventory for resource provider {rp}: "
                                    "No such resource class CUSTOM_NOPE.")


def test_post_custom_class(client, rp, engine):
    with engine.begin() as conn:
        conn.execute(t.resource_classes.insert().values(id=t.CUSTOM_RC_START_ID, name="CUSTOM_FPGA"))
    assert post(client, rp, resource_class="CUSTOM_FPGA", total=2).status == 201


def test_post_to_unknown_provider_is_404_before_body(client):
    missing = str(uuidlib.uuid4())
    resp = client.post(inv_path(missing), body=b"{nope", content_type="application/json")
    assert resp.status == 404
    assert resp.error["detail"] == f"No resource provider with uuid {missing} found"


def test_post_content_type_and_policy(client, rp):
    resp = client.post(inv_path(rp), body=b'{"resource_class": "VCPU", "total": 1}',
                       content_type="text/plain")
    assert resp.status == 415
    resp = client.post(inv_path(rp), json={"resource_class": "VCPU", "total": 1}, token="user")
    assert resp.status == 403
    assert "placement:resource_providers:inventories:create" in resp.error["detail"]
    resp = client.post(inv_path(rp), body=b"{bad", content_type="application/json")
    assert resp.status == 400 and resp.error["detail"].startswith("Malformed JSON")
    resp = client.post(inv_path(rp), body=b"", content_type="application/json")
    assert resp.status == 400 and resp.error["detail"].startswith("Malformed JSON")


BAD_RECORDS = [
    {"resource_class": "VCPU"},                                   # total missing
    {"total": 1},                                                  # class missing
    {"resource_class": "VCPU", "total": 1, "colour": "red"},       # unknown field
    {"resource_class": "vcpu", "total": 1},                        # class pattern
    {"resource_class": "VCPU-1", "total": 1},
    {"resource_class": "", "total": 1},
    {"resource_class": 7, "total": 1},
    {"resource_class": "VCPU", "total": "1"},
    {"resource_class": "VCPU", "total": 1.5},
    {"resource_class": "VCPU", "total": True},
    {"resource_class": "VCPU", "total": None},
    {"resource_class": "VCPU", "total": 0},
    {"resource_class": "VCPU", "total": -1},
    {"resource_class": "VCPU", "total": MAX_INT + 1},
    {"resource_class": "VCPU", "total": 4, "reserved": -1},
    {"resource_class": "VCPU", "total": 4, "reserved": MAX_INT + 1},
    {"resource_class": "VCPU", "total": 4, "min_unit": 0},
    {"resource_class": "VCPU", "total": 4, "max_unit": 0},
    {"resource_class": "VCPU", "total": 4, "max_unit": MAX_INT + 1},
    {"resource_class": "VCPU", "total": 4, "step_size": 0},
    {"resource_class": "VCPU", "total": 4, "step_size": "1"},
    {"resource_class": "VCPU", "total": 4, "allocation_ratio": "1.0"},
    {"resource_class": "VCPU", "total": 4, "allocation_ratio": 3.5e38},
    {"resource_class": "VCPU", "total": 4, "allocation_ratio": None},
    {"resource_class": "VCPU", "total": 4, "resource_provider_generation": "1"},
]


@pytest.mark.parametrize("body", BAD_RECORDS)
def test_post_schema_errors(client, rp, body):
    resp = client.post(inv_path(rp), json=body, mv="1.39")
    assert resp.status == 400
    assert resp.error["detail"].startswith("JSON does not validate: ")
    assert generation(client, rp) == 0


@pytest.mark.parametrize("body", [[], "VCPU", 1, None])
def test_post_body_must_be_an_object(client, rp, body):
    resp = client.post(inv_path(rp), body=__import__("orjson").dumps(body),
                       content_type="application/json")
    assert resp.status == 400


def test_post_huge_integer_is_400(client, rp):
    resp = client.post(inv_path(rp), body=b'{"resource_class": "VCPU", "total": 1' + b"0" * 40 + b"}",
                       content_type="application/json")
    assert resp.status == 400


# --- capacity rule (docs/design/placement-model.md#inventory) ---------------------------------------------

@pytest.mark.parametrize("mv,reserved,ratio,ok", [
    ("1.25", 4, 1.0, False),     # reserved == total
    ("1.26", 4, 1.0, True),
    ("1.25", 5, 1.0, False),     # reserved > total
    ("1.26", 5, 1.0, False),
    ("1.25", 3, 0.5, False),     # int(1 * 0.5) == 0
    ("1.26", 3, 0.5, True),
    ("1.25", 3, 1.0, True),
    ("1.26", 0, -1.0, False),    # negative ratio passes the schema, fails here
    ("1.26", 0, 0.0, True),
])
def test_post_capacity_rule(client, rp, mv, reserved, ratio, ok):
    resp = post(client, rp, mv=mv, resource_class="VCPU", total=4, reserved=reserved,
                allocation_ratio=ratio)
    if ok:
        assert resp.status == 201
        return
    assert resp.status == 400
    reason = ("The reserved value is greater than total." if mv >= "1.26"
              else "The reserved value is greater than or equal to total.")
    assert resp.error["detail"] == (
        f"Unable to create inventory for resource provider {rp}: Invalid inventory for 'VCPU' "
        f"on resource provider '{rp}'. {reason}")


def test_no_other_cross_checks(client, rp):
    resp = post(client, rp, resource_class="VCPU", total=4, min_unit=8, max_unit=2, step_size=16)
    assert resp.status == 201
    resp = post(client, rp, resource_class="DISK_GB", total=4, max_unit=100, min_unit=50)
    assert resp.status == 201


# --- PUT collection (replace all) -----------------------------------------

def test_put_all_replaces_adds_and_removes(client, rp):
    post(client, rp, resource_class="VCPU", total=8, reserved=2)
    post(client, rp, resource_class="DISK_GB", total=100)
    resp = put_all(client, rp, 2, {"VCPU": {"total": 16}, "MEMORY_MB": {"total": 1024, "step_size": 256}})
    assert resp.status == 200
    expected = {"resource_provider_generation": 3, "inventories": {
        "VCPU": {**DEFAULTS, "total": 16},                 # reserved reset: no merging
        "MEMORY_MB": {**DEFAULTS, "total": 1024, "step_size": 256},
    }}
    assert resp.json == expected
    assert client.get(inv_path(rp)).json == expected


def test_put_all_bumps_even_when_identical_or_empty(client, rp):
    assert put_all(client, rp, 0, {}).json == {"resource_provider_generation": 1, "inventories": {}}
    body = {"VCPU": {"total": 2}}
    assert put_all(client, rp, 1, body).json["resource_provider_generation"] == 2
    assert put_all(client, rp, 2, body).json["resource_provider_generation"] == 3
    assert put_all(client, rp, 3, {}).json == {"resource_provider_generation": 4, "inventories": {}}


def test_put_all_generation_conflict(client, rp):
    post(client, rp, resource_class="VCPU", total=8)
    resp = put_all(client, rp, 0, {"VCPU": {"total": 1}}, mv="1.23")
    assert resp.status == 409
    assert resp.error["code"] == "placement.concurrent_update"
    assert resp.error["detail"] == (
        f"resource provider generation conflict for provider {rp}: actual: 1, given: 0")
    assert "code" not in put_all(client, rp, 0, {}, mv="1.22").error
    assert client.get(inv_path(rp, "VCPU")).json["total"] == 8


def test_put_all_generation_is_checked_before_classes_and_capacity(client, rp):
    resp = put_all(client, rp, 5, {"CUSTOM_NOPE": {"total": 1}, "VCPU": {"total": 1, "reserved": 9}})
    assert resp.status == 409


def test_put_all_record_generation_is_ignored(client, rp):
    resp = put_all(client, rp, 0, {"VCPU": {"total": 1, "resource_provider_generation": 42}})
    assert resp.status == 200
    assert resp.json["inventories"]["VCPU"] == {**DEFAULTS, "total": 1}


def test_put_all_unknown_classes(client, rp):
    resp = put_all(client, rp, 0, {"CUSTOM_NOPE": {"total": 1}})
    assert resp.status == 400
    assert resp.error["detail"] == (f"Unknown resource class in inventory for resource provider "
                                    f"{rp}: No such resource class CUSTOM_NOPE.")
    # keys that cannot be class names skip the record schema and fail here too
    for key, value in (("vcpu", {"total": 1}), ("VCPU-2", "junk"), ("", None)):
        resp = put_all(client, rp, 0, {key: value})
        assert resp.status == 400
        assert f"No such resource class {key}." in resp.error["detail"]
    assert generation(client, rp) == 0


def test_put_all_capacity_rule(client, rp):
    resp = put_all(client, rp, 0, {"VCPU": {"total": 4, "reserved": 4}}, mv="1.25")
    assert resp.status == 400
    assert resp.error["detail"] == (
        f"Unable to update inventory for resource provider {rp}: Invalid inventory for 'VCPU' on "
        f"resource provider '{rp}'. The reserved value is greater than or equal to total.")
    assert put_all(client, rp, 0, {"VCPU": {"total": 4, "reserved": 4}}, mv="1.26").status == 200
    resp = put_all(client, rp, 1, {"VCPU": {"total": 4, "reserved": 5}}, mv="1.26")
    assert resp.status == 400
    assert resp.error["detail"].endswith("The reserved value is greater than total.")


@pytest.mark.parametrize("body", [
    {"inventories": {}},
    {"resource_provider_generation": 0},
    {"resource_provider_generation": 0, "inventories": {}, "extra": 1},
    {"resource_provider_generation": "0", "inventories": {}},
    {"resource_provider_generation": None, "inventories": {}},
    {"resource_provider_generation": 0, "inventories": []},
    {"resource_provider_generation": 0, "inventories": {"VCPU": {"reserved": 1}}},
    {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 0}}},
    {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 1, "bogus": 1}}},
    {"resource_provider_generation": 0, "inventories": {"VCPU": 5}},
    [],
])
def test_put_all_schema_errors(client, rp, body):
    resp = client.put(inv_path(rp), json=body)
    assert resp.status == 400
    assert resp.error["detail"].startswith("JSON does not validate: ")


def test_put_all_lookup_precedes_body_and_content_type_checked(client, rp):
    missing = str(uuidlib.uuid4())
    assert client.put(inv_path(missing), json={"junk": 1}).status == 404
    resp = client.put(inv_path(rp), body=b"{}", content_type=None,
                      headers={"Content-Type": "text/plain"})
    assert resp.status == 415
    resp = client.put(inv_path(rp), json={"resource_provider_generation": 0, "inventories": {}},
                      token="user")
    assert resp.status == 403
    assert "placement:resource_providers:inventories:update" in resp.error["detail"]


def test_put_all_removing_class_in_use(client, rp, engine):
    put_all(client, rp, 0, {"VCPU": {"total": 8}, "DISK_GB": {"total": 100},
                            "MEMORY_MB": {"total": 512}})
    allocate(engine, rp, "VCPU", 2)
    allocate(engine, rp, "DISK_GB", 10)
    resp = put_all(client, rp, 1, {"MEMORY_MB": {"total": 512}}, mv="1.23")
    assert resp.status == 409
    assert resp.error["code"] == "placement.inventory.inuse"
    assert resp.error["detail"] == (f"update conflict: Inventory for 'VCPU, DISK_GB' on "
                                    f"resource provider '{rp}' in use.")
    match = NOVA_IN_USE.search(resp.error["detail"])
    assert match and match.group(2) == f"'{rp}'"
    assert generation(client, rp) == 1
    assert set(client.get(inv_path(rp)).json["inventories"]) == {"VCPU", "DISK_GB", "MEMORY_MB"}


def test_in_use_classes_are_listed_in_upstream_order(client, rp, engine):
    # By class id, as upstream: standard classes in os-resource-classes order,
    # then custom classes in order of creation (not by name).
    for custom in ("CUSTOM_ZED", "CUSTOM_ALPHA"):
        assert client.put(f"/resource_classes/{custom}", mv="1.7").status == 201
    classes = ["DISK_GB", "CUSTOM_ALPHA", "MEMORY_MB", "CUSTOM_ZED", "VCPU"]
    assert put_all(client, rp, 0, {rc: {"total": 10} for rc in classes}).status == 200
    for rc in classes:
        allocate(engine, rp, rc, 1)
    expected = f"Inventory for 'VCPU, MEMORY_MB, DISK_GB, CUSTOM_ZED, CUSTOM_ALPHA' on resource provider '{rp}' in use."
    resp = client.delete(inv_path(rp), mv="1.39")
    assert (resp.status, resp.error["detail"]) == (409, expected)
    resp = put_all(client, rp, 1, {})
    assert (resp.status, resp.error["detail"]) == (409, f"update conflict: {expected}")


def test_put_all_may_shrink_below_usage(client, rp, engine):
    put_all(client, rp, 0, {"VCPU": {"total": 8}})
    allocate(engine, rp, "VCPU", 6)
    resp = put_all(client, rp, 1, {"VCPU": {"total": 2}})
    assert resp.status == 200
    assert resp.json["inventories"]["VCPU"]["total"] == 2


# --- DELETE collection ------------------------------------------------------

def test_delete_all_needs_1_5_and_answers_405_without_allow(client, rp):
    post(client, rp, resource_class="VCPU", total=8)
    resp = client.delete(inv_path(rp), mv="1.4")
    assert resp.status == 405
    assert "allow" not in resp.headers
    assert resp.error["title"] == "Method Not Allowed"
    resp = client.delete(inv_path(rp), mv="1.5")
    assert resp.status == 204
    assert resp.content == b""
    assert "content-type" not in resp.headers
    assert client.get(inv_path(rp)).json == {"resource_provider_generation": 2, "inventories": {}}


def test_delete_all_bumps_even_when_nothing_existed(client, rp):
    assert client.delete(inv_path(rp), mv="1.5").status == 204
    assert client.delete(inv_path(rp), mv="1.39").status == 204
    assert generation(client, rp) == 2


def test_delete_all_ignores_body_content_type_and_checks_policy(client, rp):
    assert client.delete(inv_path(rp), mv="1.5", token="user").status == 403
    missing = str(uuidlib.uuid4())
    resp = client.delete(inv_path(missing), mv="1.5")
    assert resp.status == 404
    assert resp.error["detail"] == f"No resource provider with uuid {missing} found"


def test_delete_all_in_use(client, rp, engine):
    put_all(client, rp, 0, {"VCPU": {"total": 8}, "DISK_GB": {"total": 100}})
    allocate(engine, rp, "VCPU", 1)
    resp = client.delete(inv_path(rp), mv="1.23")
    assert resp.status == 409
    assert resp.error["code"] == "placement.inventory.inuse"
    assert resp.error["detail"] == f"Inventory for 'VCPU' on resource provider '{rp}' in use."
    assert NOVA_IN_USE.search(resp.error["detail"])
    assert generation(client, rp) == 1


# --- GET one ---------------------------------------------------------------

def test_get_one(client, rp):
    post(client, rp, resource_class="VCPU", total=8, allocation_ratio=2)
    resp = client.get(inv_path(rp, "VCPU"))
    assert resp.status == 200
    assert resp.json == {**DEFAULTS, "total": 8, "allocation_ratio": 2.0,
                         "resource_provider_generation": 1}


@pytest.mark.parametrize("rc", ["DISK_GB", "CUSTOM_NOPE", "vcpu", "a%20b"])
def test_get_one_missing(client, rp, rc):
    post(client, rp, resource_class="VCPU", total=8)
    resp = client.get(inv_path(rp, rc))
    assert resp.status == 404
    shown = rc.replace("%20", " ")
    assert resp.error["detail"] == f"No inventory of class {shown} for {rp}"


def test_get_one_unknown_provider_and_accept(client, rp):
    missing = str(uuidlib.uuid4())
    resp = client.get(inv_path(missing, "VCPU"))
    assert resp.status == 404
    assert resp.error["detail"].startswith(f"No resource provider with uuid {missing} found")
    assert client.get(inv_path(rp, "VCPU"), headers={"Accept": "text/plain"}).status == 406
    assert client.get(inv_path(rp, "VCPU"), token="user").status == 403


# --- PUT one ---------------------------------------------------------------

def test_put_one_replaces_the_record(client, rp):
    post(client, rp, resource_class="VCPU", total=8, reserved=2, step_size=2)
    resp = client.put(inv_path(rp, "VCPU"), json={"total": 16, "resource_provider_generation": 1,
                                                  "allocation_ratio": 4})
    assert resp.status == 200
    assert resp.json == {**DEFAULTS, "total": 16, "allocation_ratio": 4.0,
                         "resource_provider_generation": 2}
    assert client.get(inv_path(rp, "VCPU")).json == resp.json


def test_put_one_generation_rules(client, rp):
    post(client, rp, resource_class="VCPU", total=8)
    resp = client.put(inv_path(rp, "VCPU"), json={"total": 4})
    assert resp.status == 400
    assert resp.error["detail"].startswith("JSON does not validate: ")
    resp = client.put(inv_path(rp, "VCPU"), json={"total": 4, "resource_provider_generation": 0},
                      mv="1.23")
    assert resp.status == 409
    assert resp.error["code"] == "placement.concurrent_update"
    assert "resource provider generation conflict" in resp.error["detail"]
    same = {"total": 8, "resource_provider_generation": 1}
    assert client.put(inv_path(rp, "VCPU"), json=same).json["resource_provider_generation"] == 2


def test_put_one_class_without_inventory(client, rp):
    post(client, rp, resource_class="VCPU", total=8)
    resp = client.put(inv_path(rp, "DISK_GB"), json={"total": 4, "resource_provider_generation": 1})
    assert resp.status == 400
    assert resp.error["detail"] == (f"No inventory record with resource class for resource provider "
                                    f"{rp}: No inventory of class DISK_GB found.")
    assert generation(client, rp) == 1


def test_put_one_unknown_class_is_404_after_generation(client, rp):
    resp = client.put(inv_path(rp, "CUSTOM_NOPE"), json={"total": 4, "resource_provider_generation": 0})
    assert resp.status == 404
    assert resp.error["detail"] == "No such resource class CUSTOM_NOPE."
    stale = client.put(inv_path(rp, "CUSTOM_NOPE"),
                       json={"total": 4, "resource_provider_generation": 3})
    assert stale.status == 409


def test_put_one_capacity_rule(client, rp):
    post(client, rp, resource_class="VCPU", total=8)
    body = {"total": 4, "reserved": 4, "resource_provider_generation": 1}
    resp = client.put(inv_path(rp, "VCPU"), json=body, mv="1.25")
    assert resp.status == 400
    assert resp.error["detail"].endswith(
        f"Invalid inventory for 'VCPU' on resource provider '{rp}'. "
        "The reserved value is greater than or equal to total.")
    assert client.put(inv_path(rp, "VCPU"), json=body, mv="1.26").status == 200


def test_put_one_may_shrink_below_usage(client, rp, engine):
    post(client, rp, resource_class="VCPU", total=8)
    allocate(engine, rp, "VCPU", 7)
    resp = client.put(inv_path(rp, "VCPU"), json={"total": 1, "resource_provider_generation": 1})
    assert resp.status == 200
    assert resp.json["total"] == 1


@pytest.mark.parametrize("body", [
    {"total": 4, "resource_provider_generation": 1, "resource_class": "VCPU"},
    {"total": 4, "resource_provider_generation": 1, "min_unit": 0},
    {"total": "4", "resource_provider_generation": 1},
    {"resource_provider_generation": 1},
    {"total": 4, "resource_provider_generation": 1.5},
])
def test_put_one_schema_errors(client, rp, body):
    post(client, rp, resource_class="VCPU", total=8)
    resp = client.put(inv_path(rp, "VCPU"), json=body)
    assert resp.status == 400
    assert resp.error["detail"].startswith("JSON does not validate: ")


def test_put_one_lookup_content_type_policy(client, rp):
    missing = str(uuidlib.uuid4())
    assert client.put(inv_path(missing, "VCPU"), json={"x": 1}).status == 404
    resp = client.put(inv_path(rp, "VCPU"), body=b"{}", headers={"Content-Type": "text/plain"})
    assert resp.status == 415
    assert client.put(inv_path(rp, "VCPU"), json={}, token="user").status == 403


# --- DELETE one ------------------------------------------------------------

def test_delete_one(client, rp):
    post(client, rp, resource_class="VCPU", total=8)
    post(client, rp, resource_class="DISK_GB", total=8)
    resp = client.delete(inv_path(rp, "VCPU"))
    assert resp.status == 204
    assert resp.content == b""
    assert client.get(inv_path(rp)).json == {
        "resource_provider_generation": 3, "inventories": {"DISK_GB": {**DEFAULTS, "total": 8}}}


def test_delete_one_missing(client, rp):
    resp = client.delete(inv_path(rp, "VCPU"))
    assert resp.status == 404
    assert resp.error["detail"] == ("No inventory of class VCPU found for delete: "
                                    "No inventory of class VCPU found for delete")
    resp = client.delete(inv_path(rp, "CUSTOM_NOPE"))
    assert resp.status == 404
    assert resp.error["detail"] == ("No inventory of class CUSTOM_NOPE found for delete: "
                                    "No such resource class CUSTOM_NOPE.")
    assert generation(client, rp) == 0
    missing = str(uuidlib.uuid4())
    resp = client.delete(inv_path(missing, "VCPU"))
    assert resp.status == 404
    assert resp.error["detail"] == f"No resource provider with uuid {missing} found"


def test_delete_one_in_use_uses_concurrent_update_code(client, rp, engine):
    post(client, rp, resource_class="VCPU", total=8)
    allocate(engine, rp, "VCPU", 1)
    resp = client.delete(inv_path(rp, "VCPU"), mv="1.23")
    assert resp.status == 409
    assert resp.error["code"] == "placement.concurrent_update"   # quirk docs/design/placement-quirks.md#q5
    assert resp.error["detail"] == (f"Unable to delete inventory of class VCPU: Inventory for "
                                    f"'VCPU' on resource provider '{rp}' in use.")
    assert generation(client, rp) == 1


def test_delete_one_policy(client, rp):
    post(client, rp, resource_class="VCPU", total=8)
    resp = client.delete(inv_path(rp, "VCPU"), token="user")
    assert resp.status == 403
    assert "placement:resource_providers:inventories:delete" in resp.error["detail"]


# --- cross-cutting ---------------------------------------------------------

def test_allow_headers(client, rp):
    resp = client.request("PATCH", inv_path(rp))
    assert resp.status == 405
    assert resp.headers["allow"] == "GET, POST, PUT, DELETE"
    resp = client.request("POST", inv_path(rp, "VCPU"), json={})
    assert resp.status == 405
    assert resp.headers["allow"] == "GET, PUT, DELETE"
    assert client.get(inv_path(rp) + "/").status == 404


def test_caching_headers_from_1_15(client, rp):
    created = post(client, rp, mv="1.15", resource_class="VCPU", total=8)
    assert created.headers["cache-control"] == "no-cache"
    assert created.headers["last-modified"].endswith(" GMT")
    for path in (inv_path(rp), inv_path(rp, "VCPU")):
        new = client.get(path, mv="1.15")
        assert new.headers["cache-control"] == "no-cache"
        assert new.headers["last-modified"].endswith(" GMT")
        old = client.get(path, mv="1.14")
        assert "cache-control" not in old.headers and "last-modified" not in old.headers
    assert "last-modified" in client.get(inv_path(create_other(client)), mv="1.15").headers
    resp = put_all(client, rp, 1, {"VCPU": {"total": 1}}, mv="1.15")
    assert "last-modified" in resp.headers
    resp = client.put(inv_path(rp, "VCPU"), json={"total": 2, "resource_provider_generation": 2},
                      mv="1.15")
    assert "last-modified" in resp.headers
    deleted = client.delete(inv_path(rp, "VCPU"), mv="1.15")
    assert deleted.status == 204
    assert "last-modified" not in deleted.headers and "cache-control" not in deleted.headers


def create_other(client) -> str:
    resp = client.post("/resource_providers", json={"name": f"other-{uuidlib.uuid4().hex}"},
                       mv="1.20")
    return resp.json["uuid"]


def test_deleting_provider_removes_its_inventory(client, rp):
    post(client, rp, resource_class="VCPU", total=8)
    assert client.delete(f"/resource_providers/{rp}").status == 204
    assert client.get(inv_path(rp)).status == 404


def test_inventory_writes_leave_other_providers_alone(client, rp):
    other = create_other(client)
    post(client, rp, resource_class="VCPU", total=8)
    put_all(client, rp, 1, {"DISK_GB": {"total": 8}})
    assert generation(client, other) == 0
    assert client.get(inv_path(other)).json["inventories"] == {}


# --- concurrency -------------------------------------------------------------

def _race(make_client, calls):
    """Run ``calls`` (client → Response) at once, each with its own client."""
    import threading

    barrier = threading.Barrier(len(calls))
    results = [None] * len(calls)

    def run(index, call):
        own = make_client()
        barrier.wait()
        results[index] = call(own)

    threads = [threading.Thread(target=run, args=(i, call)) for i, call in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return results


def test_racing_puts_with_one_generation_only_one_wins(client, make_client, rp):
    calls = [lambda c, n=n: put_all(c, rp, 0, {"VCPU": {"total": n + 1}}, mv="1.23")
             for n in range(5)]
    results = _race(make_client, calls)
    assert sorted(r.status for r in results) == [200, 409, 409, 409, 409], results
    assert all(r.error["code"] == "placement.concurrent_update" for r in results if r.status == 409)
    winner = next(r for r in results if r.status == 200)
    assert client.get(inv_path(rp)).json == winner.json


def test_racing_posts_never_fail_with_500(client, make_client, rp):
    classes = ["VCPU", "MEMORY_MB", "DISK_GB", "VCPU", "VCPU"]
    calls = [lambda c, rc=rc: post(c, rp, mv="1.23", resource_class=rc, total=4) for rc in classes]
    results = _race(make_client, calls)
    assert {r.status for r in results} <= {201, 409}, results
    assert all(r.error["code"] == "placement.concurrent_update" for r in results if r.status == 409)
    created = [r for r in results if r.status == 201]
    final = client.get(inv_path(rp)).json
    assert final["resource_provider_generation"] == len(created)
    assert len(final["inventories"]) == len(created)
