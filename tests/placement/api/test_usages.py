"""Usages (docs/design/placement-model.md#usages, docs/design/placement-endpoints.md#usages):
per provider and per project/user, grouped by consumer type from 1.38."""
from __future__ import annotations

import uuid as uuidlib

import pytest

from billeting.placement.store import tables as t

READER_A = {"token": "user:projectA", "headers": {"X-Roles": "reader"}}


def _uuid() -> str:
    return str(uuidlib.uuid4())


class Seeder:
    """Writes inventories and allocations through the API."""

    def __init__(self, client) -> None:
        self.client = client

    def inventory(self, rp_uuid: str, **totals: int) -> None:
        generation = self.client.get(f"/resource_providers/{rp_uuid}").json["generation"]
        resp = self.client.put(f"/resource_providers/{rp_uuid}/inventories", json={
            "resource_provider_generation": generation,
            "inventories": {rc: {"total": total} for rc, total in totals.items()}})
        assert resp.status == 200, resp

    def allocate(self, allocations: dict[str, dict[str, int]], *, project: str = "projectA",
                 user: str = "user1", consumer_type: str | None = None) -> str:
        """A new consumer holding ``allocations`` ({rp uuid: {RC: n}}); returns its uuid.
        Without ``consumer_type`` it is written at 1.37, so it stays untyped."""
        consumer = _uuid()
        body = {"allocations": {rp: {"resources": res} for rp, res in allocations.items()},
                "project_id": project, "user_id": user, "consumer_generation": None}
        if consumer_type is not None:
            body["consumer_type"] = consumer_type
        resp = self.client.put(f"/allocations/{consumer}", json=body,
                               mv="1.38" if consumer_type is not None else "1.37")
        assert resp.status == 204, resp
        return consumer


@pytest.fixture
def seed(client) -> Seeder:
    return Seeder(client)


@pytest.fixture
def two_providers(create_provider, seed):
    """Two providers with inventory, used by one project of two users with
    consumers of several types (and one untyped)."""
    rp1 = create_provider("cn1")["uuid"]
    rp2 = create_provider("cn2")["uuid"]
    seed.inventory(rp1, VCPU=16, MEMORY_MB=4096, DISK_GB=100)
    seed.inventory(rp2, VCPU=16, MEMORY_MB=4096)
    # INSTANCE: two consumers; one spans both providers and still counts once.
    seed.allocate({rp1: {"VCPU": 2, "MEMORY_MB": 512}, rp2: {"VCPU": 1}},
                  consumer_type="INSTANCE")
    seed.allocate({rp2: {"VCPU": 4, "MEMORY_MB": 1024}}, user="user2", consumer_type="INSTANCE")
    seed.allocate({rp1: {"VCPU": 1}}, consumer_type="MIGRATION")
    seed.allocate({rp1: {"MEMORY_MB": 128}}, user="user2")  # untyped
    seed.allocate({rp1: {"VCPU": 8}}, project="projectB", consumer_type="INSTANCE")
    return rp1, rp2


# --- GET /resource_providers/{uuid}/usages ---------------------------------

def test_provider_usages_list_every_inventory_class(client, two_providers):
    rp1, rp2 = two_providers
    resp = client.get(f"/resource_providers/{rp1}/usages")
    assert resp.status == 200
    assert resp.headers["content-type"] == "application/json"
    generation = client.get(f"/resource_providers/{rp1}").json["generation"]
    assert generation == 5  # inventory PUT, then four allocation writes naming rp1
    assert resp.json == {"resource_provider_generation": generation,
                         "usages": {"VCPU": 2 + 1 + 8, "MEMORY_MB": 512 + 128, "DISK_GB": 0}}
    assert client.get(f"/resource_providers/{rp2}/usages").json["usages"] == {
        "VCPU": 5, "MEMORY_MB": 1024}


def test_provider_usages_without_inventory_is_empty(client, create_provider):
    rp = create_provider()["uuid"]
    resp = client.get(f"/resource_providers/{rp}/usages", mv="1.0")
    assert resp.status == 200
    assert resp.json == {"resource_provider_generation": 0, "usages": {}}


def test_provider_usages_report_the_current_generation(client, create_provider, engine):
    rp = create_provider()["uuid"]
    with engine.begin() as conn:
        conn.execute(t.resource_providers.update().where(t.resource_providers.c.uuid == rp)
                     .values(generation=7))
    assert client.get(f"/resource_providers/{rp}/usages").json["resource_provider_generation"] == 7


@pytest.mark.parametrize("uuid", ["7b0c36cd-5d4b-4a44-9c1f-0a3f4cbd22e1", "not-a-uuid"])
def test_provider_usages_unknown_provider_is_404(client, uuid):
    resp = client.get(f"/resource_providers/{uuid}/usages", mv="1.23")
    assert resp.status == 404
    assert f"No resource provider with uuid {uuid} found" in resp.error["detail"]
    assert resp.error["code"] == "placement.undefined_code"


def test_provider_usages_policy_comes_before_lookup(client):
    resp = client.get(f"/resource_providers/{_uuid()}/usages", **READER_A)
    assert resp.status == 403
    assert resp.error["detail"] == ("Policy does not allow placement:resource_providers:usages "
                                    "to be performed.")
    assert client.get(f"/resource_providers/{_uuid()}/usages", token="user").status == 403


def test_provider_usages_service_role_allowed(client, create_provider):
    rp = create_provider()["uuid"]
    resp = client.get(f"/resource_providers/{rp}/usages", token="nova:service",
                      headers={"X-Roles": "service"})
    assert resp.status == 200


def test_provider_usages_caching_headers_from_1_15(client, create_provider):
    rp = create_provider()["uuid"]
    old = client.get(f"/resource_providers/{rp}/usages", mv="1.14")
    assert "cache-control" not in old.headers and "last-modified" not in old.headers
    new = client.get(f"/resource_providers/{rp}/usages", mv="1.15")
    assert new.headers["cache-control"] == "no-cache"
    assert new.headers["last-modified"].endswith(" GMT")


def test_provider_usages_accept_and_methods(client, create_provider):
    rp = create_provider()["uuid"]
    resp = client.get(f"/resource_providers/{rp}/usages", headers={"Accept": "text/html"})
    assert resp.status == 406
    assert "Only application/json is provided" in resp.text
    assert client.get(f"/resource_providers/{rp}/usages",
                      headers={"Accept": "text/html, */*"}).status == 200
    for method in ("PUT", "POST", "DELETE", "HEAD"):
        resp = client.request(method, f"/resource_providers/{rp}/usages")
        assert resp.status == 405
        assert resp.headers["allow"] == "GET"


def test_provider_usages_trailing_slash_is_404(client, create_provider):
    rp = create_provider()["uuid"]
    assert client.get(f"/resource_providers/{rp}/usages/").status == 404


# --- GET /usages: version, policy, validation ------------------------------

def test_usages_needs_1_9(client):
    resp = client.get("/usages?project_id=projectA", mv="1.8")
    assert resp.status == 404
    assert client.get("/usages?project_id=projectA").status == 404  # default 1.0
    assert client.get("/usages?project_id=projectA", mv="1.9").status == 200


def test_usages_version_gate_precedes_policy(client):
    assert client.get("/usages", mv="1.8", token="user").status == 404


def test_usages_admin_missing_project_is_400(client):
    resp = client.get("/usages", mv="1.23")
    assert resp.status == 400
    assert resp.error["detail"].startswith(
        "Invalid query string parameters: 'project_id' is a required property")
    assert resp.error["code"] == "placement.undefined_code"


def test_usages_reader_missing_project_is_403(client):
    resp = client.get("/usages", mv="1.9", **READER_A)
    assert resp.status == 403
    assert resp.error["detail"] == "Policy does not allow placement:usages to be performed."


def test_usages_reader_reads_own_project_only(client, two_providers):
    own = client.get("/usages?project_id=projectA", mv="1.9", **READER_A)
    assert own.status == 200
    assert own.json == {"usages": {"VCPU": 2 + 1 + 4 + 1, "MEMORY_MB": 512 + 1024 + 128}}
    other = client.get("/usages?project_id=projectB", mv="1.9", **READER_A)
    assert other.status == 403
    # Policy sees the query's project before validation: a bad extra
    # parameter on another project's usages is still a 403.
    assert client.get("/usages?project_id=projectB&bogus=1", mv="1.9", **READER_A).status == 403
    assert client.get("/usages?project_id=projectA&bogus=1", mv="1.9", **READER_A).status == 400


def test_usages_reader_role_needs_matching_scope(client):
    # member without reader is not a reader here (keystone implies it, noauth2 does not)
    assert client.get("/usages?project_id=projectA", mv="1.9", token="user:projectA",
                      headers={"X-Roles": "member"}).status == 403
    assert client.get("/usages?project_id=projectA", mv="1.9", token="user:projectA").status == 403
    assert client.get("/usages?project_id=projectA", mv="1.9", token="nova:svc",
                      headers={"X-Roles": "service"}).status == 200


@pytest.mark.parametrize("query,fragment", [
    ("project_id=", "'minLength' in schema['properties']['project_id']"),
    ("project_id=" + "p" * 256, "'maxLength' in schema['properties']['project_id']"),
    ("project_id=p&user_id=", "'minLength' in schema['properties']['user_id']"),
    ("project_id=p&user_id=" + "u" * 256, "'maxLength' in schema['properties']['user_id']"),
    ("project_id=p&limit=1", "Additional properties are not allowed ('limit' was unexpected)"),
    ("project_id=p&consumer_type=INSTANCE",
     "Additional properties are not allowed ('consumer_type' was unexpected)"),
])
def test_usages_bad_query_before_1_38(client, query, fragment):
    resp = client.get(f"/usages?{query}", mv="1.37")
    assert resp.status == 400
    assert resp.error["detail"].startswith("Invalid query string parameters: ")
    assert fragment in resp.error["detail"]


@pytest.mark.parametrize("value", ["", "instance", "Instance", "INST-ANCE", "x" * 256,
                                   "UNKNOWNx ", "unknownx", "c" * 300])
def test_usages_bad_consumer_type(client, value):
    resp = client.get(f"/usages?project_id=p&consumer_type={value}", mv="1.38")
    assert resp.status == 400, value
    assert resp.error["detail"].startswith("Invalid query string parameters: ")


def test_usages_undecodable_query_is_400(client):
    resp = client.get("/usages?project_id=%ff%fe", mv="1.9")
    assert resp.status == 400
    assert "Invalid query string parameters" in resp.error["detail"]


def test_usages_accept_and_cache_headers(client):
    resp = client.get("/usages?project_id=p", mv="1.9", headers={"Accept": "text/plain"})
    assert resp.status == 406
    old = client.get("/usages?project_id=p", mv="1.14")
    assert old.status == 200 and "last-modified" not in old.headers
    new = client.get("/usages?project_id=p", mv="1.15")
    assert new.headers["cache-control"] == "no-cache"
    assert new.headers["last-modified"].endswith(" GMT")


def test_usages_methods(client):
    for method in ("POST", "PUT", "DELETE"):
        resp = client.request(method, "/usages?project_id=p", mv="1.9")
        assert resp.status == 405
        assert resp.headers["allow"] == "GET"


# --- GET /usages: sums ------------------------------------------------------

def test_usages_sum_project_and_user(client, two_providers):
    resp = client.get("/usages?project_id=projectA", mv="1.37")
    assert resp.status == 200
    assert resp.json == {"usages": {"VCPU": 8, "MEMORY_MB": 1664}}
    user1 = client.get("/usages?project_id=projectA&user_id=user1", mv="1.9")
    assert user1.json == {"usages": {"VCPU": 4, "MEMORY_MB": 512}}
    user2 = client.get("/usages?project_id=projectA&user_id=user2", mv="1.9")
    assert user2.json == {"usages": {"VCPU": 4, "MEMORY_MB": 1152}}
    assert client.get("/usages?project_id=projectB", mv="1.9").json == {"usages": {"VCPU": 8}}


def test_usages_unknown_project_or_user_is_empty(client, two_providers):
    assert client.get("/usages?project_id=nobody", mv="1.9").json == {"usages": {}}
    assert client.get("/usages?project_id=projectB&user_id=user2",
                      mv="1.9").json == {"usages": {}}
    assert client.get("/usages?project_id=nobody", mv="1.38").json == {"usages": {}}


def test_usages_repeated_parameter_uses_last_value(client, two_providers):
    resp = client.get("/usages?project_id=projectA&project_id=projectB", mv="1.9")
    assert resp.json == {"usages": {"VCPU": 8}}


# --- GET /usages at 1.38: grouped by consumer type --------------------------

def test_usages_grouped_by_type(client, two_providers):
    resp = client.get("/usages?project_id=projectA", mv="1.38")
    assert resp.status == 200
    assert resp.json == {"usages": {
        "INSTANCE": {"consumer_count": 2, "VCPU": 7, "MEMORY_MB": 1536},
        "MIGRATION": {"consumer_count": 1, "VCPU": 1},
        "unknown": {"consumer_count": 1, "MEMORY_MB": 128},
    }}


def test_usages_grouped_with_user(client, two_providers):
    resp = client.get("/usages?project_id=projectA&user_id=user2", mv="1.39")
    assert resp.json == {"usages": {
        "INSTANCE": {"consumer_count": 1, "VCPU": 4, "MEMORY_MB": 1024},
        "unknown": {"consumer_count": 1, "MEMORY_MB": 128},
    }}


@pytest.mark.parametrize("consumer_type,expected", [
    ("INSTANCE", {"INSTANCE": {"consumer_count": 2, "VCPU": 7, "MEMORY_MB": 1536}}),
    ("MIGRATION", {"MIGRATION": {"consumer_count": 1, "VCPU": 1}}),
    ("all", {"all": {"consumer_count": 4, "VCPU": 8, "MEMORY_MB": 1664}}),
    ("unknown", {"unknown": {"consumer_count": 1, "MEMORY_MB": 128}}),
    ("NO_SUCH_TYPE", {}),
    ("ALL", {}),  # matching is case-sensitive: an ordinary (absent) type name
    ("UNKNOWN", {}),
    # docs/design/placement-quirks.md#q8: passes the unanchored ^all branch, matches nothing
    ("allocated", {}),
])
def test_usages_consumer_type_filter(client, two_providers, consumer_type, expected):
    resp = client.get(f"/usages?project_id=projectA&consumer_type={consumer_type}", mv="1.38")
    assert resp.status == 200
    assert resp.json == {"usages": expected}


def test_usages_type_filter_with_user(client, two_providers):
    resp = client.get("/usages?project_id=projectA&user_id=user1&consumer_type=all", mv="1.38")
    assert resp.json == {"usages": {"all": {"consumer_count": 2, "VCPU": 4, "MEMORY_MB": 512}}}
    resp = client.get("/usages?project_id=projectA&user_id=user2&consumer_type=unknown",
                      mv="1.38")
    assert resp.json == {"usages": {"unknown": {"consumer_count": 1, "MEMORY_MB": 128}}}
    resp = client.get("/usages?project_id=projectA&user_id=user2&consumer_type=MIGRATION",
                      mv="1.38")
    assert resp.json == {"usages": {}}


def test_usages_type_names_are_case_sensitive(client, create_provider, seed):
    rp = create_provider()["uuid"]
    seed.inventory(rp, VCPU=10)
    seed.allocate({rp: {"VCPU": 3}}, consumer_type="ALL")
    seed.allocate({rp: {"VCPU": 2}}, consumer_type="UNKNOWN")
    seed.allocate({rp: {"VCPU": 1}})
    grouped = client.get("/usages?project_id=projectA", mv="1.38").json["usages"]
    assert grouped == {"ALL": {"consumer_count": 1, "VCPU": 3},
                       "UNKNOWN": {"consumer_count": 1, "VCPU": 2},
                       "unknown": {"consumer_count": 1, "VCPU": 1}}
    assert client.get("/usages?project_id=projectA&consumer_type=ALL",
                      mv="1.38").json["usages"] == {"ALL": {"consumer_count": 1, "VCPU": 3}}
    assert client.get("/usages?project_id=projectA&consumer_type=all",
                      mv="1.38").json["usages"] == {"all": {"consumer_count": 3, "VCPU": 6}}


def test_usages_reader_at_1_38(client, two_providers):
    resp = client.get("/usages?project_id=projectA&consumer_type=MIGRATION", mv="1.38",
                      **READER_A)
    assert resp.status == 200
    assert resp.json == {"usages": {"MIGRATION": {"consumer_count": 1, "VCPU": 1}}}


def test_usages_follow_allocation_writes(client, create_provider, seed):
    rp = create_provider()["uuid"]
    seed.inventory(rp, VCPU=8, MEMORY_MB=1024)
    consumer = seed.allocate({rp: {"VCPU": 3, "MEMORY_MB": 256}}, consumer_type="INSTANCE")
    assert client.get(f"/resource_providers/{rp}/usages").json["usages"] == {
        "VCPU": 3, "MEMORY_MB": 256}
    # Re-typing and re-owning an existing consumer regroups its usage.
    resp = client.put(f"/allocations/{consumer}", mv="1.38", json={
        "allocations": {rp: {"resources": {"VCPU": 1}}}, "project_id": "projectA",
        "user_id": "user9", "consumer_generation": 1, "consumer_type": "MIGRATION"})
    assert resp.status == 204, resp
    assert client.get("/usages?project_id=projectA", mv="1.38").json == {
        "usages": {"MIGRATION": {"consumer_count": 1, "VCPU": 1}}}
    assert client.get("/usages?project_id=projectA&user_id=user1", mv="1.38").json == {"usages": {}}
    assert client.delete(f"/allocations/{consumer}").status == 204
    assert client.get(f"/resource_providers/{rp}/usages").json["usages"] == {
        "VCPU": 0, "MEMORY_MB": 0}
    assert client.get("/usages?project_id=projectA", mv="1.38").json == {"usages": {}}
    assert client.get("/usages?project_id=projectA", mv="1.9").json == {"usages": {}}
