"""``/resource_classes`` and ``/resource_classes/{name}`` (docs/design/placement-model.md#resource-classes,
docs/design/placement-endpoints.md#resource-classes)."""
from __future__ import annotations

import threading

import os_resource_classes
import pytest
from sqlalchemy import select

from billeting.placement.store import tables as t

JSON_INVALID = "JSON does not validate"


def assert_cache_headers(resp, expected: bool) -> None:
    if expected:
        assert resp.headers["cache-control"] == "no-cache"
        assert resp.headers["last-modified"].endswith(" GMT")
    else:
        assert "cache-control" not in resp.headers
        assert "last-modified" not in resp.headers


def add_inventory(engine, provider_uuid: str, rc_name: str) -> None:
    """Write an inventory row directly: only its existence matters here."""
    rp, rc = t.resource_providers, t.resource_classes
    with engine.begin() as conn:
        rp_id = conn.execute(select(rp.c.id).where(rp.c.uuid == provider_uuid)).scalar_one()
        rc_id = conn.execute(select(rc.c.id).where(rc.c.name == rc_name)).scalar_one()
        conn.execute(t.inventories.insert().values(
            resource_provider_id=rp_id, resource_class_id=rc_id, total=8, reserved=0,
            min_unit=1, max_unit=8, step_size=1, allocation_ratio=1.0))


def rc_id(engine, name: str) -> int:
    with engine.connect() as conn:
        return conn.execute(select(t.resource_classes.c.id)
                            .where(t.resource_classes.c.name == name)).scalar_one()


# --- version gates, routing, policy ----------------------------------------

@pytest.mark.parametrize("method,path", [
    ("GET", "/resource_classes"),
    ("POST", "/resource_classes"),
    ("GET", "/resource_classes/VCPU"),
    ("PUT", "/resource_classes/CUSTOM_X"),
    ("DELETE", "/resource_classes/CUSTOM_X"),
])
def test_not_found_below_1_2(client, method, path):
    json = {"name": "CUSTOM_X"} if method in ("POST", "PUT") else None
    resp = client.request(method, path, json=json, mv="1.1")
    assert resp.status == 404
    assert resp.error["title"] == "Not Found"
    # Before 1.2 the version gate wins over the media-type check
    # (docs/design/placement-http.md#processing-order).
    if method == "POST":
        resp = client.post(path, body="x", content_type="text/plain", mv="1.1")
        assert resp.status == 404


@pytest.mark.parametrize("path,allow", [
    ("/resource_classes", "GET, POST"),
    ("/resource_classes/VCPU", "GET, PUT, DELETE"),
])
def test_method_not_allowed(client, path, allow):
    resp = client.request("PATCH", path, mv="1.2")
    assert resp.status == 405
    assert resp.headers["allow"] == allow


@pytest.mark.parametrize("method,path,rule", [
    ("GET", "/resource_classes", "list"),
    ("POST", "/resource_classes", "create"),
    ("GET", "/resource_classes/CUSTOM_NOPE", "show"),
    ("PUT", "/resource_classes/CUSTOM_NOPE", "update"),
    ("DELETE", "/resource_classes/CUSTOM_NOPE", "delete"),
])
def test_policy_denies_before_lookup(client, method, path, rule):
    json = {"name": "CUSTOM_X"} if method == "POST" else None
    resp = client.request(method, path, json=json, mv="1.23", token="user")
    assert resp.status == 403
    assert resp.error["detail"] == f"Policy does not allow placement:resource_classes:{rule} to be performed."
    assert resp.error["code"] == "placement.undefined_code"


def test_service_role_is_allowed(client):
    resp = client.get("/resource_classes", mv="1.2", token="nova", headers={"X-Roles": "service"})
    assert resp.status == 200


def test_get_honours_accept(client):
    assert client.get("/resource_classes", mv="1.2", headers={"Accept": "text/plain"}).status == 406
    resp = client.get("/resource_classes/VCPU", mv="1.2", headers={"Accept": "text/html"})
    assert resp.status == 406
    assert resp.headers["content-type"] == "text/html; charset=UTF-8"
    assert "Only application/json is provided" in resp.text


# --- list and show -----------------------------------------------------------

def test_list_has_every_standard_class_with_links(client):
    resp = client.get("/resource_classes", mv="1.2")
    assert resp.status == 200
    assert resp.headers["content-type"].startswith("application/json")
    classes = resp.json["resource_classes"]
    assert [c["name"] for c in classes] == list(os_resource_classes.STANDARDS)
    assert classes[0] == {"name": "VCPU", "links": [{"rel": "self", "href": "/resource_classes/VCPU"}]}
    assert_cache_headers(resp, False)


def test_list_shows_custom_classes_after_standard_ones(client):
    for name in ("CUSTOM_B", "CUSTOM_A"):
        assert client.post("/resource_classes", json={"name": name}, mv="1.2").status == 201
    names = [c["name"] for c in client.get("/resource_classes", mv="1.2").json["resource_classes"]]
    assert names[-2:] == ["CUSTOM_B", "CUSTOM_A"]
    assert len(names) == len(os_resource_classes.STANDARDS) + 2


def test_list_and_show_cache_headers_from_1_15(client):
    client.put("/resource_classes/CUSTOM_CACHED", mv="1.7")
    for path in ("/resource_classes", "/resource_classes/VCPU", "/resource_classes/CUSTOM_CACHED"):
        assert_cache_headers(client.get(path, mv="1.14"), False)
        assert_cache_headers(client.get(path, mv="1.15"), True)


def test_show(client):
    resp = client.get("/resource_classes/MEMORY_MB", mv="1.2")
    assert resp.status == 200
    assert resp.json == {"name": "MEMORY_MB",
                         "links": [{"rel": "self", "href": "/resource_classes/MEMORY_MB"}]}


@pytest.mark.parametrize("name", ["CUSTOM_NOPE", "vcpu", "X" * 300, "CUSTOM%00X"])
def test_show_unknown_is_404(client, name):
    resp = client.get(f"/resource_classes/{name}", mv="1.2")
    assert resp.status == 404
    if name == "CUSTOM_NOPE":
        assert resp.error["detail"] == "No such resource class CUSTOM_NOPE."


# --- create ------------------------------------------------------------------

def test_create(client, engine):
    resp = client.post("/resource_classes", json={"name": "CUSTOM_FPGA"}, mv="1.2")
    assert resp.status == 201
    assert resp.content == b""
    # (A Content-Type still labels this empty 201: wsgiref.validate in the test
    # client insists on one for every status but 204/304.)
    assert resp.headers["location"].endswith("/resource_classes/CUSTOM_FPGA")
    assert resp.headers["location"].startswith("http")
    shown = client.get("/resource_classes/CUSTOM_FPGA", mv="1.2")
    assert shown.json["name"] == "CUSTOM_FPGA"
    # Custom classes are numbered from 10000 upward.
    assert rc_id(engine, "CUSTOM_FPGA") == t.CUSTOM_RC_START_ID
    client.post("/resource_classes", json={"name": "CUSTOM_GPU"}, mv="1.2")
    assert rc_id(engine, "CUSTOM_GPU") == t.CUSTOM_RC_START_ID + 1


def test_create_never_sends_cache_headers(client):
    resp = client.post("/resource_classes", json={"name": "CUSTOM_NOCACHE"}, mv="1.39")
    assert resp.status == 201
    assert_cache_headers(resp, False)


def test_create_duplicate_is_409(client):
    assert client.post("/resource_classes", json={"name": "CUSTOM_DUP"}, mv="1.2").status == 201
    resp = client.post("/resource_classes", json={"name": "CUSTOM_DUP"}, mv="1.22")
    assert resp.status == 409
    assert resp.error["detail"] == "Conflicting resource class already exists: CUSTOM_DUP"
    assert "code" not in resp.error
    resp = client.post("/resource_classes", json={"name": "CUSTOM_DUP"}, mv="1.23")
    assert resp.error["code"] == "placement.undefined_code"


@pytest.mark.parametrize("body", [
    {"name": "VCPU"},
    {"name": "custom_lower"},
    {"name": "CUSTOM_lower"},
    {"name": "CUSTOM_"},
    {"name": "CUSTOM-DASH"},
    {"name": "CUSTOM_" + "A" * 249},
    {"name": "CUSTOM_A\n"},
    {"name": 5},
    {"name": None},
    {},
    {"name": "CUSTOM_A", "extra": 1},
    ["CUSTOM_A"],
    "CUSTOM_A",
])
def test_create_rejects_bad_bodies(client, body):
    resp = client.post("/resource_classes", json=body, mv="1.2")
    assert resp.status == 400
    assert resp.error["detail"].startswith(JSON_INVALID)


def test_create_accepts_the_longest_name(client):
    name = "CUSTOM_" + "A" * 248
    assert len(name) == 255
    assert client.post("/resource_classes", json={"name": name}, mv="1.2").status == 201
    assert client.get(f"/resource_classes/{name}", mv="1.2").status == 200


def test_create_rejects_malformed_json_and_media_types(client):
    resp = client.post("/resource_classes", body="{not json", content_type="application/json", mv="1.2")
    assert resp.status == 400
    assert resp.error["detail"].startswith("Malformed JSON")
    resp = client.post("/resource_classes", body="", content_type="application/json", mv="1.2")
    assert resp.status == 400
    assert resp.error["detail"].startswith("Malformed JSON")
    resp = client.post("/resource_classes", body='{"name": "CUSTOM_A"}', content_type="text/plain", mv="1.2")
    assert resp.status == 415
    assert resp.error["detail"] == "The media type text/plain is not supported, use application/json"
    resp = client.post("/resource_classes", mv="1.2")
    assert resp.status == 415
    assert resp.error["detail"] == "The media type None is not supported, use application/json"
    resp = client.post("/resource_classes", json={"name": "CUSTOM_CHARSET"}, mv="1.2",
                       content_type="application/json; charset=UTF-8")
    assert resp.status == 201


def test_concurrent_creates_get_distinct_ids(client, engine):
    names = [f"CUSTOM_RACE_{i}" for i in range(6)]
    statuses: dict[str, int] = {}

    def create(name):
        statuses[name] = client.post("/resource_classes", json={"name": name}, mv="1.2").status

    threads = [threading.Thread(target=create, args=(n,)) for n in names]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert statuses == {n: 201 for n in names}
    ids = {rc_id(engine, n) for n in names}
    assert ids == set(range(t.CUSTOM_RC_START_ID, t.CUSTOM_RC_START_ID + 6))


# --- PUT: rename (1.2–1.6) -----------------------------------------------------

def test_rename_before_1_7(client):
    client.post("/resource_classes", json={"name": "CUSTOM_OLD"}, mv="1.2")
    resp = client.put("/resource_classes/CUSTOM_OLD", json={"name": "CUSTOM_NEW"}, mv="1.6")
    assert resp.status == 200
    assert resp.json == {"name": "CUSTOM_NEW",
                         "links": [{"rel": "self", "href": "/resource_classes/CUSTOM_NEW"}]}
    assert "location" not in resp.headers
    assert_cache_headers(resp, False)
    assert client.get("/resource_classes/CUSTOM_OLD", mv="1.2").status == 404
    assert client.get("/resource_classes/CUSTOM_NEW", mv="1.2").status == 200


def test_rename_errors(client):
    client.post("/resource_classes", json={"name": "CUSTOM_A"}, mv="1.2")
    client.post("/resource_classes", json={"name": "CUSTOM_B"}, mv="1.2")
    resp = client.put("/resource_classes/VCPU", json={"name": "CUSTOM_VCPU"}, mv="1.2")
    assert resp.status == 400
    assert resp.error["detail"] == "Cannot update standard resource class VCPU"
    resp = client.put("/resource_classes/CUSTOM_NOPE", json={"name": "CUSTOM_C"}, mv="1.2")
    assert resp.status == 404
    assert resp.error["detail"] == "No such resource class CUSTOM_NOPE."
    resp = client.put("/resource_classes/CUSTOM_A", json={"name": "CUSTOM_B"}, mv="1.2")
    assert resp.status == 409
    assert resp.error["detail"] == "Resource class already exists: CUSTOM_B"
    # The new name must be a custom name, like POST.
    resp = client.put("/resource_classes/CUSTOM_A", json={"name": "MEMORY_MB"}, mv="1.2")
    assert resp.status == 400
    assert resp.error["detail"].startswith(JSON_INVALID)


def test_rename_needs_a_json_body_checked_before_lookup(client):
    resp = client.put("/resource_classes/CUSTOM_NOPE", body="", content_type="application/json", mv="1.6")
    assert resp.status == 400
    assert resp.error["detail"].startswith("Malformed JSON")
    resp = client.put("/resource_classes/CUSTOM_NOPE", json={"nme": "CUSTOM_X"}, mv="1.6")
    assert resp.status == 400
    assert resp.error["detail"].startswith(JSON_INVALID)
    resp = client.put("/resource_classes/CUSTOM_NOPE", mv="1.6")
    assert resp.status == 415


# --- PUT: create or verify (>= 1.7) ------------------------------------------

def test_put_creates_then_verifies_from_1_7(client):
    resp = client.put("/resource_classes/CUSTOM_ENSURED", mv="1.7")
    assert resp.status == 201
    assert resp.content == b""
    assert resp.headers["location"].endswith("/resource_classes/CUSTOM_ENSURED")
    assert_cache_headers(resp, False)
    resp = client.put("/resource_classes/CUSTOM_ENSURED", mv="1.39")
    assert resp.status == 204
    assert resp.headers["location"].endswith("/resource_classes/CUSTOM_ENSURED")
    assert "content-type" not in resp.headers
    assert_cache_headers(resp, False)
    names = [c["name"] for c in client.get("/resource_classes", mv="1.7").json["resource_classes"]]
    assert names.count("CUSTOM_ENSURED") == 1


def test_put_from_1_7_ignores_content_type_and_body(client):
    resp = client.put("/resource_classes/CUSTOM_ANY", body="garbage", content_type="text/plain", mv="1.7")
    assert resp.status == 201


@pytest.mark.parametrize("name,failure", [
    ("VCPU", "pattern"),
    ("CUSTOM_lower", "pattern"),
    ("custom_x", "pattern"),
    ("CUSTOM_", "pattern"),
    ("CUSTOM_A%0A", "pattern"),
    ("CUSTOM_" + "A" * 249, "maxLength"),
])
def test_put_from_1_7_validates_the_name(client, name, failure):
    resp = client.put(f"/resource_classes/{name}", mv="1.7")
    assert resp.status == 400
    assert resp.error["detail"].startswith(JSON_INVALID)
    assert f"Failed validating '{failure}'" in resp.error["detail"]


def test_concurrent_ensure_creates_once(client):
    statuses: list[int] = []

    def ensure():
        statuses.append(client.put("/resource_classes/CUSTOM_SAME", mv="1.7").status)

    threads = [threading.Thread(target=ensure) for _ in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(statuses) == [201, 204, 204, 204, 204]


# --- DELETE ------------------------------------------------------------------

def test_delete(client):
    client.put("/resource_classes/CUSTOM_GONE", mv="1.7")
    resp = client.delete("/resource_classes/CUSTOM_GONE", mv="1.2")
    assert resp.status == 204
    assert resp.content == b""
    assert_cache_headers(resp, False)
    assert client.get("/resource_classes/CUSTOM_GONE", mv="1.2").status == 404
    resp = client.delete("/resource_classes/CUSTOM_GONE", mv="1.2")
    assert resp.status == 404
    assert resp.error["detail"] == "No such resource class CUSTOM_GONE."


def test_delete_with_cache_headers_version_sends_none(client):
    client.put("/resource_classes/CUSTOM_GONE", mv="1.7")
    assert_cache_headers(client.delete("/resource_classes/CUSTOM_GONE", mv="1.15"), False)


def test_delete_standard_is_400(client):
    resp = client.delete("/resource_classes/VCPU", mv="1.23")
    assert resp.status == 400
    assert resp.error["detail"] == "Error in delete resource class: Cannot delete standard resource class VCPU."
    assert resp.error["code"] == "placement.undefined_code"


def test_delete_in_use_is_409(client, engine, create_provider):
    client.put("/resource_classes/CUSTOM_BUSY", mv="1.7")
    provider = create_provider()
    add_inventory(engine, provider["uuid"], "CUSTOM_BUSY")
    resp = client.delete("/resource_classes/CUSTOM_BUSY", mv="1.23")
    assert resp.status == 409
    assert resp.error["detail"] == ("Error in delete resource class: Cannot delete resource class "
                                    "CUSTOM_BUSY. Class is in use in inventory.")
    assert resp.error["code"] == "placement.undefined_code"
    assert client.get("/resource_classes/CUSTOM_BUSY", mv="1.2").status == 200


def test_deleted_name_can_be_created_again(client):
    client.post("/resource_classes", json={"name": "CUSTOM_AGAIN"}, mv="1.2")
    client.delete("/resource_classes/CUSTOM_AGAIN", mv="1.2")
    assert client.post("/resource_classes", json={"name": "CUSTOM_AGAIN"}, mv="1.2").status == 201


def test_delete_in_use_through_the_inventories_api(client, create_provider):
    client.put("/resource_classes/CUSTOM_STOCKED", mv="1.7")
    provider = create_provider()
    inventories = f"/resource_providers/{provider['uuid']}/inventories"
    resp = client.put(inventories, mv="1.7", json={
        "resource_provider_generation": 0, "inventories": {"CUSTOM_STOCKED": {"total": 4}}})
    assert resp.status == 200, resp
    resp = client.delete("/resource_classes/CUSTOM_STOCKED", mv="1.7")
    assert resp.status == 409
    assert "Class is in use in inventory." in resp.error["detail"]
    assert client.delete(inventories, mv="1.7").status == 204
    assert client.delete("/resource_classes/CUSTOM_STOCKED", mv="1.7").status == 204
