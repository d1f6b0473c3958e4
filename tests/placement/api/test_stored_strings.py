"""Strings that reach the database behave the same on every backend
(issue 11): a NUL is a 400 everywhere (PostgreSQL cannot store one), and
values that differ only by trailing spaces are distinct values everywhere
(MariaDB's utf8mb4_bin would compare them equal; migration 0003 moves the
MySQL tables to a NO PAD binary collation).

The suite runs once per backend (BILLETING_TEST_DB), so each assertion here
holds on SQLite, PostgreSQL and MariaDB alike.
"""
from __future__ import annotations

import pytest

RP1 = "11111111-1111-4111-8111-111111111111"
RP2 = "22222222-2222-4222-8222-222222222222"
C1 = "33333333-3333-4333-8333-333333333333"
C2 = "44444444-4444-4444-8444-444444444444"
C3 = "66666666-6666-4666-8666-666666666666"
AGG = "55555555-5555-4555-8555-555555555555"
NUL_DETAIL = "JSON does not validate: NUL characters (\\u0000) are not allowed in strings: "


def names(resp) -> list[str]:
    assert resp.status == 200, resp
    return sorted(p["name"] for p in resp.json["resource_providers"])


@pytest.fixture
def host(client):
    assert client.post("/resource_providers", json={"name": "host", "uuid": RP1}, mv="1.39").status == 200
    resp = client.put(f"/resource_providers/{RP1}/inventories", mv="1.39", json={
        "resource_provider_generation": 0, "inventories": {"VCPU": {"total": 10}}})
    assert resp.status == 200, resp
    return RP1


def allocate(client, consumer: str, project: str, user: str, vcpu: int, consumer_type: str = "TEST"):
    return client.put(f"/allocations/{consumer}", mv="1.39", json={
        "allocations": {RP1: {"resources": {"VCPU": vcpu}}}, "consumer_generation": None,
        "project_id": project, "user_id": user, "consumer_type": consumer_type})


# --- trailing spaces: distinct values ---------------------------------------------

def test_provider_names_differing_by_trailing_spaces_are_distinct(client):
    assert client.post("/resource_providers", json={"name": "cn1", "uuid": RP1}, mv="1.39").status == 200
    assert client.post("/resource_providers", json={"name": "cn1 ", "uuid": RP2}, mv="1.39").status == 200
    assert names(client.get("/resource_providers?name=cn1")) == ["cn1"]
    assert names(client.get("/resource_providers?name=cn1%20")) == ["cn1 "]
    resp = client.put(f"/resource_providers/{RP2}", json={"name": "cn1"}, mv="1.39")
    assert resp.status == 409
    assert resp.error["code"] == "placement.duplicate_name"
    assert client.put(f"/resource_providers/{RP2}", json={"name": "cn1  "}, mv="1.39").status == 200
    assert names(client.get("/resource_providers")) == ["cn1", "cn1  "]


def test_project_and_user_ids_differing_by_trailing_spaces_are_not_merged(client, host):
    assert allocate(client, C1, "p", "u", 1).status == 204
    assert allocate(client, C2, "p ", "u ", 2).status == 204
    assert allocate(client, C3, "p", "u ", 4).status == 204
    usages = lambda query: client.get(f"/usages?{query}", mv="1.9").json["usages"]  # noqa: E731
    assert usages("project_id=p") == {"VCPU": 5}
    assert usages("project_id=p%20") == {"VCPU": 2}
    assert usages("project_id=p&user_id=u") == {"VCPU": 1}
    assert usages("project_id=p&user_id=u%20") == {"VCPU": 4}
    shown = client.get(f"/allocations/{C2}", mv="1.39").json
    assert (shown["project_id"], shown["user_id"]) == ("p ", "u ")


@pytest.mark.parametrize("method,path,status", [
    ("GET", "/resource_classes/VCPU%20", 404),
    ("DELETE", "/resource_classes/VCPU%20", 404),
    ("GET", "/traits/HW_CPU_X86_VMX%20", 404),
    ("DELETE", "/traits/HW_CPU_X86_VMX%20", 404),
    ("GET", f"/resource_providers/{RP1}%20", 404),
    ("GET", f"/resource_providers/{RP1}/inventories/VCPU%20", 404),
    ("DELETE", f"/resource_providers/{RP1}/inventories/VCPU%20", 404),
    ("DELETE", f"/allocations/{C1}%20", 404),
])
def test_names_with_a_trailing_space_in_paths_find_nothing(client, host, method, path, status):
    assert allocate(client, C1, "p", "u", 1).status == 204
    assert client.request(method, path, mv="1.39").status == status
    assert client.get(f"/allocations/{C1}%20", mv="1.39").json == {"allocations": {}}


def test_names_with_a_trailing_space_in_queries_and_bodies_find_nothing(client, host):
    assert client.get("/traits?name=in:HW_CPU_X86_VMX%20", mv="1.6").json == {"traits": []}
    assert client.get("/traits?name=startswith:HW_CPU_X86_VMX%20", mv="1.6").json == {"traits": []}
    resp = client.put(f"/resource_providers/{RP1}/traits", mv="1.39", json={
        "resource_provider_generation": 1, "traits": ["HW_CPU_X86_VMX "]})
    assert (resp.status, resp.error["detail"]) == (400, "No such trait HW_CPU_X86_VMX ")
    resp = client.put(f"/resource_providers/{RP1}/inventories", mv="1.39", json={
        "resource_provider_generation": 1, "inventories": {"VCPU ": {"total": 1}}})
    assert resp.status == 400
    assert resp.error["detail"].endswith("No such resource class VCPU .")
    resp = client.get("/allocation_candidates?resources=VCPU%20:1", mv="1.39")
    assert resp.status == 400


# --- NUL: a 400 everywhere ---------------------------------------------------------

@pytest.mark.parametrize("method,path,body,where", [
    ("POST", "/resource_providers", {"name": "a\u0000b"}, "instance['name']"),
    ("PUT", f"/resource_providers/{RP1}", {"name": "a\u0000"}, "instance['name']"),
    ("PUT", f"/resource_providers/{RP1}/traits", {"resource_provider_generation": 1, "traits": ["X\u0000"]},
     "instance['traits'][0]"),
    ("PUT", f"/resource_providers/{RP1}/inventories",
     {"resource_provider_generation": 1, "inventories": {"VCPU\u0000": {"total": 1}}},
     "instance['inventories'] (key 'VCPU\\x00')"),
    ("PUT", f"/allocations/{C1}", {"allocations": {RP1: {"resources": {"VCPU": 1}}}, "consumer_generation": None,
                                   "project_id": "p\u0000", "user_id": "u", "consumer_type": "TEST"},
     "instance['project_id']"),
    ("PUT", f"/allocations/{C1}", {"allocations": {RP1: {"resources": {"VCPU": 1}}}, "consumer_generation": None,
                                   "project_id": "p", "user_id": "\u0000", "consumer_type": "TEST"},
     "instance['user_id']"),
    ("POST", "/allocations", {C1: {"allocations": {RP1: {"resources": {"VCPU": 1}}}, "consumer_generation": None,
                                   "project_id": "p", "user_id": "u\u0000", "consumer_type": "TEST"}},
     f"instance['{C1}']['user_id']"),
])
def test_nul_in_a_body_is_a_400(client, host, method, path, body, where):
    resp = client.request(method, path, json=body, mv="1.39")
    assert resp.status == 400, resp
    assert resp.error["detail"] == NUL_DETAIL + where
    assert names(client.get("/resource_providers", mv="1.39")) == ["host"]
    assert client.get(f"/allocations/{C1}", mv="1.39").json["allocations"] == {}


def test_nul_in_a_reshape_is_a_400(client, host):
    resp = client.post("/reshaper", mv="1.39", token="nova:svc", headers={"X-Roles": "service"}, json={
        "inventories": {RP1: {"resource_provider_generation": 1, "inventories": {"VCPU\u0000": {"total": 1}}}},
        "allocations": {}})
    assert resp.status == 400
    assert resp.error["detail"].startswith(NUL_DETAIL)


def test_an_escaped_backslash_before_u0000_is_not_a_nul(client):
    resp = client.post("/resource_providers", body=b'{"name": "a\\\\u0000"}', content_type="application/json",
                       mv="1.39")
    assert resp.status == 200
    assert resp.json["name"] == "a\\u0000"


@pytest.mark.parametrize("path", [
    "/resource_providers/%00", "/resource_providers/%00/traits", "/resource_classes/%00", "/traits/%00",
    "/allocations/%00", f"/resource_providers/{RP1}/inventories/%00",
])
def test_nul_in_a_path_finds_nothing(client, host, path):
    resp = client.get(path, mv="1.39")
    assert resp.status in (200, 404), resp
    if resp.status == 200:
        assert resp.json == {"allocations": {}}


def test_nul_in_a_query_is_a_400(client, host):
    for query in ("/usages?project_id=p%00", "/resource_providers?name=a%00", "/traits?name=in:A%00"):
        resp = client.get(query, mv="1.39")
        assert resp.status == 400
        assert resp.error["detail"] == "Invalid query string parameters: NUL characters are not allowed."
