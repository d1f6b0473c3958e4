"""Resource providers: create, show, list filters, update, delete
(docs/design/placement-model.md#resource-providers, docs/design/placement-endpoints.md#resource-providers)."""
from __future__ import annotations

import uuid as uuidlib

import falcon.testing
import pytest
from sqlalchemy import select

from billeting.placement.store import tables as t
from tests.placement.api.direct_rows import add_aggregates, add_traits, allocate
from tests.conftest import call_wsgi

RP = "/resource_providers"


def new_uuid() -> str:
    return str(uuidlib.uuid4())


def rp_path(uuid: str) -> str:
    return f"{RP}/{uuid}"


def listed(client, query: str = "", mv: str = "1.39") -> set[str]:
    """Names of the providers a list request returns (asserting a 200)."""
    resp = client.get(f"{RP}?{query}" if query else RP, mv=mv)
    assert resp.status == 200, resp
    return {p["name"] for p in resp.json["resource_providers"]}


def list_error(client, query: str, mv: str = "1.39") -> str:
    resp = client.get(f"{RP}?{query}", mv=mv)
    assert resp.status == 400, resp
    return resp.error["detail"]


def put_inventory(client, rp_uuid: str, **classes: dict) -> None:
    gen = client.get(rp_path(rp_uuid)).json["generation"]
    resp = client.put(f"{rp_path(rp_uuid)}/inventories",
                      json={"resource_provider_generation": gen, "inventories": classes})
    assert resp.status == 200, resp


# --- create ----------------------------------------------------------------

def test_create_before_1_20_is_201_without_body(client):
    for mv in ("1.0", "1.19"):
        resp = client.post(RP, json={"name": f"cn-{mv}"}, mv=mv)
        assert resp.status == 201
        assert resp.content == b""
        # (docs/design/placement-http.md#content-negotiation wants no Content-Type here;
        # falcon's test client lints every non-204 response for one, so it is not asserted.)
        assert "last-modified" not in resp.headers and "cache-control" not in resp.headers
        location = resp.headers["location"]
        assert location.startswith("http")
        uuid = location.rsplit("/", 1)[1]
        assert location.endswith(f"/resource_providers/{uuid}")
        assert str(uuidlib.UUID(uuid)) == uuid
        assert client.get(rp_path(uuid)).json["name"] == f"cn-{mv}"


def test_create_from_1_20_returns_the_provider(client):
    resp = client.post(RP, json={"name": "cn1"}, mv="1.20")
    assert resp.status == 200
    body = resp.json
    uuid = body["uuid"]
    assert uuidlib.UUID(uuid).version == 4
    assert body == {
        "uuid": uuid, "name": "cn1", "generation": 0,
        "parent_provider_uuid": None, "root_provider_uuid": uuid,
        "links": [{"rel": rel, "href": f"/resource_providers/{uuid}{suffix}"} for rel, suffix in (
            ("self", ""), ("inventories", "/inventories"), ("usages", "/usages"),
            ("aggregates", "/aggregates"), ("traits", "/traits"), ("allocations", "/allocations"))],
    }
    assert resp.headers["location"].endswith(f"/resource_providers/{uuid}")
    assert resp.headers["cache-control"] == "no-cache"
    assert resp.headers["last-modified"].endswith(" GMT")


@pytest.mark.parametrize("spelling", [
    "ABCDEF12-3456-4789-ABCD-EF1234567890",
    "abcdef1234564789abcdef1234567890",
    "ABCDEF1234564789ABCDEF1234567890",
    "{abcdef12-3456-4789-abcd-ef1234567890}",
    "urn:uuid:abcdef12-3456-4789-abcd-ef1234567890",
])
def test_create_normalises_the_uuid(client, spelling):
    canonical = "abcdef12-3456-4789-abcd-ef1234567890"
    resp = client.post(RP, json={"name": "n1", "uuid": spelling}, mv="1.20")
    assert resp.status == 200
    assert resp.json["uuid"] == canonical
    again = client.post(RP, json={"name": "n2", "uuid": canonical}, mv="1.23")
    assert again.status == 409
    assert again.error["code"] == "placement.duplicate_name"
    assert again.error["detail"] == f"Conflicting resource provider uuid: {canonical} already exists."
    # nova tells a uuid race from a name clash by this substring's absence
    assert "Conflicting resource provider name:" not in again.error["detail"]


def test_create_duplicate_name(client, create_provider):
    first = create_provider("cn1")
    resp = client.post(RP, json={"name": "cn1"}, mv="1.23")
    assert resp.status == 409
    assert resp.error["code"] == "placement.duplicate_name"
    assert resp.error["detail"] == "Conflicting resource provider name: cn1 already exists."
    both = client.post(RP, json={"name": "cn1", "uuid": first["uuid"]}, mv="1.23")
    assert both.status == 409
    assert both.error["detail"] == (
        "Conflicting resource provider name: cn1 already exists., "
        f"Conflicting resource provider uuid: {first['uuid']} already exists.")
    assert "code" not in client.post(RP, json={"name": "cn1"}, mv="1.22").error


def test_create_name_rules(client):
    resp = client.post(RP, json={"name": ""})
    assert resp.status == 400
    assert resp.error["detail"].startswith('Unable to create resource provider "", ')
    assert resp.error["detail"].endswith("Object action create failed because: name is required")
    resp = client.post(RP, json={"name": "x" * 201})
    assert resp.status == 400
    assert "is too long" in resp.error["detail"]
    assert client.post(RP, json={"name": "x" * 200}).status == 201
    resp = client.post(RP, json={"name": "ŝtorage-池-🚀"}, mv="1.20")
    assert resp.status == 200
    assert client.get(rp_path(resp.json["uuid"])).json["name"] == "ŝtorage-池-🚀"


@pytest.mark.parametrize("body", [
    {},
    {"name": None},
    {"name": 5},
    {"name": ["a"]},
    {"name": "a", "uuid": "not-a-uuid"},
    {"name": "a", "uuid": ""},
    {"name": "a", "uuid": None},
    {"name": "a", "uuid": 12},
    {"name": "a", "uuid": "abcdef12-3456-4789-abcd-ef123456789"},   # one digit short
    {"name": "a", "generation": 0},
    {"name": "a", "root_provider_uuid": new_uuid()},
    {"name": "a", "parent_provider_uuid": "nope"},
    {"name": "a", "parent_provider_uuid": 1},
])
def test_create_schema_errors(client, body):
    resp = client.post(RP, json=body, mv="1.20")
    assert resp.status == 400
    assert resp.error["detail"].startswith("JSON does not validate: ")


def test_create_bad_uuid_names_the_format(client):
    resp = client.post(RP, json={"name": "a", "uuid": "pony"})
    assert "Failed validating 'format'" in resp.error["detail"]


@pytest.mark.parametrize("raw", [b"[]", b'"cn1"', b"null", b"{", b""])
def test_create_body_must_be_an_object(client, raw):
    resp = client.post(RP, body=raw, content_type="application/json")
    assert resp.status == 400


def test_create_parent_needs_1_14(client, create_provider):
    parent = create_provider("p")["uuid"]
    resp = client.post(RP, json={"name": "c", "parent_provider_uuid": parent}, mv="1.13")
    assert resp.status == 400
    assert "Additional properties are not allowed" in resp.error["detail"]
    resp = client.post(RP, json={"name": "c", "parent_provider_uuid": None}, mv="1.13")
    assert resp.status == 400


def test_create_child_and_grandchild(client, create_provider):
    root = create_provider("root")["uuid"]
    resp = client.post(RP, json={"name": "child", "parent_provider_uuid": root}, mv="1.14")
    assert resp.status == 201
    child = resp.headers["location"].rsplit("/", 1)[1]
    shown = client.get(rp_path(child), mv="1.14").json
    assert shown["parent_provider_uuid"] == root and shown["root_provider_uuid"] == root
    grand = create_provider("grand", parent=child)
    assert grand["parent_provider_uuid"] == child
    assert grand["root_provider_uuid"] == root
    explicit_root = client.post(RP, json={"name": "r2", "parent_provider_uuid": None}, mv="1.20").json
    assert explicit_root["parent_provider_uuid"] is None
    assert explicit_root["root_provider_uuid"] == explicit_root["uuid"]


def test_create_parent_in_another_spelling(client, create_provider):
    root = create_provider("root")["uuid"]
    resp = client.post(RP, json={"name": "c", "parent_provider_uuid": root.upper()}, mv="1.20")
    assert resp.status == 200
    assert resp.json["parent_provider_uuid"] == root


def test_create_parent_errors(client):
    missing = new_uuid()
    resp = client.post(RP, json={"name": "orphan", "uuid": new_uuid(), "parent_provider_uuid": missing},
                       mv="1.14")
    assert resp.status == 400
    assert resp.error["detail"].endswith(
        "Object action create failed because: parent provider UUID does not exist.")
    assert resp.error["detail"].startswith('Unable to create resource provider "orphan", ')
    me = new_uuid()
    resp = client.post(RP, json={"name": "selfish", "uuid": me, "parent_provider_uuid": me}, mv="1.14")
    assert resp.status == 400
    assert resp.error["detail"] == (
        f'Unable to create resource provider "selfish", {me}: Object action create failed because: '
        "parent provider UUID cannot be same as UUID. Please set parent provider UUID to None if "
        "there is no parent.")
    resp = client.post(RP, json={"name": "selfish", "uuid": me, "parent_provider_uuid": me.upper()},
                       mv="1.14")
    assert resp.status == 400
    assert "parent provider UUID cannot be same as UUID" in resp.error["detail"]
    assert listed(client) == set()


def test_create_content_type_and_policy(client):
    resp = client.post(RP, body=b'{"name": "a"}', content_type="text/plain")
    assert resp.status == 415
    assert resp.error["detail"] == "The media type text/plain is not supported, use application/json"
    resp = client.post(RP, json={"name": "a"}, token="user")
    assert resp.status == 403
    assert resp.error["detail"] == (
        "Policy does not allow placement:resource_providers:create to be performed.")
    # 415 is decided before policy
    assert client.post(RP, body=b"{}", content_type="text/plain", token="user").status == 415


# --- show and representation ------------------------------------------------

@pytest.mark.parametrize("mv,rels", [
    ("1.0", ["self", "inventories", "usages"]),
    ("1.1", ["self", "inventories", "usages", "aggregates"]),
    ("1.5", ["self", "inventories", "usages", "aggregates"]),
    ("1.6", ["self", "inventories", "usages", "aggregates", "traits"]),
    ("1.10", ["self", "inventories", "usages", "aggregates", "traits"]),
    ("1.11", ["self", "inventories", "usages", "aggregates", "traits", "allocations"]),
    ("1.39", ["self", "inventories", "usages", "aggregates", "traits", "allocations"]),
])
def test_links_per_microversion(client, create_provider, mv, rels):
    uuid = create_provider()["uuid"]
    shown = client.get(rp_path(uuid), mv=mv).json
    assert [link["rel"] for link in shown["links"]] == rels
    base = f"/resource_providers/{uuid}"
    assert shown["links"][0]["href"] == base
    assert all(link["href"] == (base if link["rel"] == "self" else f"{base}/{link['rel']}")
               for link in shown["links"])
    listed_one = client.get(RP, mv=mv).json["resource_providers"][0]
    assert listed_one == shown


@pytest.mark.parametrize("mv,keys", [
    ("1.13", {"uuid", "name", "generation", "links"}),
    ("1.14", {"uuid", "name", "generation", "links", "parent_provider_uuid", "root_provider_uuid"}),
])
def test_keys_before_and_after_1_14(client, create_provider, mv, keys):
    uuid = create_provider()["uuid"]
    assert set(client.get(rp_path(uuid), mv=mv).json) == keys
    assert set(client.get(RP, mv=mv).json["resource_providers"][0]) == keys


def test_links_include_the_mount_prefix(app, create_provider):
    uuid = create_provider("cn1")["uuid"]
    result = call_wsgi(app, falcon.testing.create_environ(
        f"/resource_providers/{uuid}", root_path="/placement",
        headers={"X-Auth-Token": "admin", "OpenStack-API-Version": "placement 1.14"}))
    assert result.status == 200
    assert result.json["links"][0] == {"rel": "self", "href": f"/placement/resource_providers/{uuid}"}
    created = call_wsgi(app, falcon.testing.create_environ(
        "/resource_providers", method="POST", root_path="/placement", body=b'{"name": "cn2"}',
        headers={"X-Auth-Token": "admin", "Content-Type": "application/json"}))
    assert created.status == 201
    assert "/placement/resource_providers/" in created.headers["location"]
    assert "content-type" not in created.headers


def test_show(client, create_provider):
    created = create_provider("cn1")
    resp = client.get(rp_path(created["uuid"]), mv="1.20")
    assert resp.status == 200
    assert resp.json == created
    assert resp.headers["content-type"] == "application/json"


def test_show_unknown_or_malformed(client):
    missing = new_uuid()
    resp = client.get(rp_path(missing))
    assert resp.status == 404
    assert resp.error["detail"] == f"No resource provider with uuid {missing} found"
    for bad in ("not-a-uuid", "1234", missing.upper(), "x" * 300):
        assert client.get(rp_path(bad)).status == 404


def test_show_caching_accept_and_policy(client, create_provider):
    uuid = create_provider()["uuid"]
    new = client.get(rp_path(uuid), mv="1.15")
    assert new.headers["cache-control"] == "no-cache"
    assert new.headers["last-modified"].endswith(" GMT")
    old = client.get(rp_path(uuid), mv="1.14")
    assert "cache-control" not in old.headers and "last-modified" not in old.headers
    assert client.get(rp_path(uuid), headers={"Accept": "text/html"}).status == 406
    resp = client.get(rp_path(new_uuid()), token="user")
    assert resp.status == 403      # policy before lookup
    assert "placement:resource_providers:show" in resp.error["detail"]


def test_methods(client, create_provider):
    uuid = create_provider()["uuid"]
    resp = client.request("PATCH", rp_path(uuid))
    assert resp.status == 405
    assert resp.headers["allow"] == "GET, DELETE, PUT"
    assert client.request("POST", rp_path(uuid), json={}).status == 405
    assert client.request("DELETE", RP).status == 405
    assert client.get(rp_path(uuid) + "/").status == 404


# --- list: basics, name, uuid ----------------------------------------------

def test_list_empty_and_caching(client):
    resp = client.get(RP, mv="1.15")
    assert resp.status == 200
    assert resp.json == {"resource_providers": []}
    assert resp.headers["cache-control"] == "no-cache"
    assert resp.headers["last-modified"].endswith(" GMT")
    old = client.get(RP, mv="1.14")
    assert "last-modified" not in old.headers


def test_list_name_and_uuid(client, create_provider):
    a = create_provider("alpha")
    create_provider("beta")
    assert listed(client) == {"alpha", "beta"}
    assert listed(client, "name=alpha", mv="1.0") == {"alpha"}
    assert listed(client, "name=gamma") == set()
    assert listed(client, "name=Alpha") == set()
    assert listed(client, f"uuid={a['uuid']}", mv="1.0") == {"alpha"}
    assert listed(client, f"uuid={new_uuid()}") == set()
    assert listed(client, f"uuid={a['uuid']}&name=beta") == set()
    # a repeated plain parameter uses its last value
    assert listed(client, "name=beta&name=alpha") == {"alpha"}


@pytest.mark.parametrize("param", ["uuid", "in_tree"])
def test_list_uuid_params_must_be_uuid_like(client, param):
    # Upstream's text: the validator's whole message, its lines joined.
    assert list_error(client, f"{param}=not-a-uuid") == (
        "Invalid query string parameters: 'not-a-uuid' is not a 'uuid'  "
        f"Failed validating 'format' in schema['properties']['{param}']:     "
        "{'type': 'string', 'format': 'uuid'}  "
        f"On instance['{param}']:     'not-a-uuid'")
    assert list_error(client, f"{param}=")


@pytest.mark.parametrize("mv,param", [
    ("1.0", "member_of"), ("1.2", "member_of"),
    ("1.3", "resources"),
    ("1.13", "in_tree"),
    ("1.17", "required"),
    ("1.39", "colour"),
    ("1.39", "limit"),
    ("1.39", "member_of1"),
    ("1.39", "resources1"),
])
def test_list_unknown_params_per_version(client, mv, param):
    detail = list_error(client, f"{param}=x", mv=mv)
    assert detail.startswith(f"Invalid query string parameters: Additional properties are not allowed "
                             f"('{param}' was unexpected)  Failed validating 'additionalProperties' "
                             "in schema:     {'type': 'object',      'properties': {'name': ")
    assert detail.endswith(f"'additionalProperties': False}}  On instance:     {{'{param}': 'x'}}")


def test_list_policy_and_accept(client):
    assert client.get(RP, token="user").status == 403
    assert client.get(RP, headers={"Accept": "application/xml"}).status == 406


# --- list: member_of --------------------------------------------------------

@pytest.fixture
def aggregated(create_provider, engine):
    """Providers a∈{A}, b∈{B}, ab∈{A,B}, none∈{}; returns the aggregate uuids."""
    agg_a, agg_b = new_uuid(), new_uuid()
    for name, aggs in (("a", [agg_a]), ("b", [agg_b]), ("ab", [agg_a, agg_b]), ("none", [])):
        uuid = create_provider(name)["uuid"]
        add_aggregates(engine, uuid, *aggs)
    return agg_a, agg_b


def test_member_of_single_and_in(client, aggregated):
    agg_a, agg_b = aggregated
    assert listed(client, f"member_of={agg_a}", mv="1.3") == {"a", "ab"}
    assert listed(client, f"member_of=in:{agg_a},{agg_b}", mv="1.3") == {"a", "b", "ab"}
    assert listed(client, f"member_of=in:{agg_b}", mv="1.3") == {"b", "ab"}
    assert listed(client, f"member_of={new_uuid()}") == set()
    assert listed(client, f"member_of=in:{new_uuid()},{agg_b}") == {"b", "ab"}


def test_member_of_repeated(client, aggregated):
    agg_a, agg_b = aggregated
    query = f"member_of={agg_a}&member_of={agg_b}"
    assert list_error(client, query, mv="1.23") == "Multiple member_of parameters are not supported"
    assert listed(client, query, mv="1.24") == {"ab"}
    assert listed(client, f"member_of=in:{agg_a},{agg_b}&member_of={agg_b}", mv="1.24") == {"b", "ab"}


def test_member_of_forbidden(client, aggregated):
    agg_a, agg_b = aggregated
    message = "Forbidden member_of parameters are not supported in the specified microversion"
    assert list_error(client, f"member_of=!{agg_a}", mv="1.31") == message
    assert list_error(client, f"member_of=!in:{agg_a},{agg_b}", mv="1.31") == message
    assert listed(client, f"member_of=!{agg_a}", mv="1.32") == {"b", "none"}
    assert listed(client, f"member_of=!in:{agg_a},{agg_b}", mv="1.32") == {"none"}
    assert listed(client, f"member_of={agg_b}&member_of=!{agg_a}", mv="1.32") == {"b"}
    # contradictory clauses are not an error, they just match nothing
    assert listed(client, f"member_of={agg_a}&member_of=!{agg_a}", mv="1.32") == set()


def test_member_of_syntax_errors(client, aggregated):
    agg_a, agg_b = aggregated
    assert list_error(client, f"member_of={agg_a},{agg_b}", mv="1.3") == (
        "Multiple values for 'member_of' must be prefixed with the 'in:' or '!in:' keyword using "
        f"the valid microversion. Got: {agg_a},{agg_b}")
    # The detail names the first value that is not a UUID, as upstream's does.
    for value, bad in (("not-a-uuid", "not-a-uuid"), ("in:", ""), ("", ""), (f"in:{agg_a},!{agg_b}", f"!{agg_b}"),
                       (f"in:{agg_a},nope", "nope"), ("in:,", ""), (f" {agg_a}", f" {agg_a}")):
        assert list_error(client, f"member_of={value}") == (
            "Invalid query string parameters: Expected 'member_of' parameter to contain valid "
            f"UUID(s). Got: {bad}")


# --- list: in_tree -----------------------------------------------------------

def test_in_tree(client, create_provider):
    root = create_provider("root")["uuid"]
    child = create_provider("child", parent=root)["uuid"]
    create_provider("grand", parent=child)
    create_provider("other")
    for member in ("root", "child", "grand"):
        uuid = listed_uuid(client, member)
        assert listed(client, f"in_tree={uuid}", mv="1.14") == {"root", "child", "grand"}
    assert listed(client, f"in_tree={new_uuid()}") == set()
    assert listed(client, f"in_tree={root}&name=child") == {"child"}


def listed_uuid(client, name: str) -> str:
    return client.get(f"{RP}?name={name}").json["resource_providers"][0]["uuid"]


# --- list: required ----------------------------------------------------------

@pytest.fixture
def traited(create_provider, engine):
    """Providers with standard traits: vmx{VMX}, avx{AVX}, both{VMX,AVX}, plain{}."""
    for name, traits in (("vmx", ["HW_CPU_X86_VMX"]), ("avx", ["HW_CPU_X86_AVX"]),
                         ("both", ["HW_CPU_X86_VMX", "HW_CPU_X86_AVX"]), ("plain", [])):
        add_traits(engine, create_provider(name)["uuid"], *traits)


VMX, AVX, SSD = "HW_CPU_X86_VMX", "HW_CPU_X86_AVX", "STORAGE_DISK_SSD"


def test_required_basic(client, traited):
    assert listed(client, f"required={VMX}", mv="1.18") == {"vmx", "both"}
    assert listed(client, f"required={VMX},{AVX}", mv="1.18") == {"both"}
    assert listed(client, f"required={SSD}", mv="1.18") == set()


def test_required_forbidden_from_1_22(client, traited):
    assert list_error(client, f"required=!{VMX}", mv="1.21") == (
        "Invalid query string parameters: Expected 'required' parameter value of the form: "
        f"HW_CPU_X86_VMX,CUSTOM_MAGIC. Got: !{VMX}")
    assert listed(client, f"required=!{VMX}", mv="1.22") == {"avx", "plain"}
    assert listed(client, f"required={AVX},!{VMX}", mv="1.22") == {"avx"}
    # quirk docs/design/placement-quirks.md#q11: required and forbidden at once is just an empty result
    assert listed(client, f"required={VMX},!{VMX}", mv="1.22") == set()
    # quirk docs/design/placement-quirks.md#q4: every leading '!' is stripped
    assert listed(client, f"required=!!{VMX}", mv="1.22") == {"avx", "plain"}


def test_required_empty_traits(client, traited):
    for mv, form in (("1.18", "HW_CPU_X86_VMX,CUSTOM_MAGIC"), ("1.22", "HW_CPU_X86_VMX,!CUSTOM_MAGIC")):
        for value in ("", f"{VMX},", f",{VMX}", f"{VMX},,{AVX}"):
            assert list_error(client, f"required={value}", mv=mv) == (
                f"Invalid query string parameters: Expected 'required' parameter value of the form: "
                f"{form}. Got an empty trait in: {value}")


def test_required_any_of_from_1_39(client, traited):
    assert list_error(client, f"required=in:{VMX},{AVX}", mv="1.38") == (
        "Invalid query string parameters: The format 'in:HW_CPU_X86_VMX,CUSTOM_MAGIC' only supported "
        f"since microversion 1.39. Got: in:{VMX},{AVX}")
    assert listed(client, f"required=in:{VMX},{AVX}", mv="1.39") == {"vmx", "avx", "both"}
    assert listed(client, f"required=in:{VMX},{SSD}", mv="1.39") == {"vmx", "both"}
    assert list_error(client, f"required=in:{VMX},!{AVX}") == (
        "Invalid query string parameters: The format 'in:HW_CPU_X86_VMX,CUSTOM_MAGIC' does not "
        f"support forbidden traits. Got: in:{VMX},!{AVX}")
    assert "Got an empty trait in: in:" in list_error(client, "required=in:")


def test_required_repeated(client, traited):
    query = f"required={VMX}&required={AVX}"
    assert listed(client, query, mv="1.38") == {"avx", "both"}       # last one only
    assert listed(client, query, mv="1.39") == {"both"}              # AND-ed
    assert listed(client, f"required=in:{VMX},{AVX}&required=!{AVX}", mv="1.39") == {"vmx"}


def test_required_unknown_trait(client, traited):
    assert list_error(client, "required=CUSTOM_NOPE,CUSTOM_ALSO_NOPE", mv="1.18") == (
        'Invalid trait(s) in "required" parameter: No such trait(s): CUSTOM_ALSO_NOPE, CUSTOM_NOPE.')
    assert list_error(client, "required=!CUSTOM_NOPE", mv="1.22").endswith(
        "No such trait(s): CUSTOM_NOPE.")
    assert list_error(client, f"required=in:{VMX},CUSTOM_NOPE", mv="1.39").endswith(
        "No such trait(s): CUSTOM_NOPE.")


# --- list: resources ----------------------------------------------------------

def test_resources_capacity_semantics(client, create_provider, engine):
    big = create_provider("big")["uuid"]
    small = create_provider("small")["uuid"]
    stepped = create_provider("stepped")["uuid"]
    create_provider("empty")
    put_inventory(client, big, VCPU={"total": 8, "reserved": 2, "allocation_ratio": 2.0},
                  MEMORY_MB={"total": 4096})
    put_inventory(client, small, VCPU={"total": 2})
    put_inventory(client, stepped, VCPU={"total": 64, "min_unit": 4, "max_unit": 16, "step_size": 4})
    # big: (8 - 2) * 2.0 = 12 VCPU
    assert listed(client, "resources=VCPU:10", mv="1.4") == {"big"}       # 10 % 4 != 0
    assert listed(client, "resources=VCPU:12") == {"big", "stepped"}
    assert listed(client, "resources=VCPU:13") == set()
    assert listed(client, "resources=VCPU:2") == {"big", "small"}        # stepped min_unit 4
    assert listed(client, "resources=VCPU:4") == {"big", "stepped"}
    assert listed(client, "resources=VCPU:6") == {"big"}                 # 6 % 4 != 0
    assert listed(client, "resources=VCPU:16") == {"stepped"}
    assert listed(client, "resources=VCPU:20") == set()                  # stepped max_unit 16
    # every class must fit on the same provider
    assert listed(client, "resources=VCPU:2,MEMORY_MB:4096") == {"big"}
    assert listed(client, "resources=VCPU:2,MEMORY_MB:4097") == set()
    assert listed(client, "resources=DISK_GB:1") == set()
    # existing usage counts against capacity
    allocate(engine, big, "VCPU", 10)
    assert listed(client, "resources=VCPU:2") == {"big", "small"}
    assert listed(client, "resources=VCPU:3") == set()
    # a class listed twice uses its last amount
    assert listed(client, "resources=VCPU:100,VCPU:2") == {"big", "small"}


def test_resources_fractional_ratio_is_not_truncated(client, create_provider):
    uuid = create_provider("frac")["uuid"]
    put_inventory(client, uuid, VCPU={"total": 3, "allocation_ratio": 1.5})   # 4.5
    assert listed(client, "resources=VCPU:4") == {"frac"}
    assert listed(client, "resources=VCPU:5") == set()


def test_resources_combines_with_other_filters(client, create_provider, engine):
    agg = new_uuid()
    first = create_provider("first")["uuid"]
    second = create_provider("second")["uuid"]
    for uuid in (first, second):
        put_inventory(client, uuid, DISK_GB={"total": 100})
    add_aggregates(engine, first, agg)
    add_traits(engine, second, SSD)
    assert listed(client, f"resources=DISK_GB:10&member_of={agg}") == {"first"}
    assert listed(client, f"resources=DISK_GB:10&required={SSD}") == {"second"}
    assert listed(client, f"resources=DISK_GB:10&required={SSD}&member_of={agg}") == set()


@pytest.mark.parametrize("value,detail", [
    ("", "Badly formed resources parameter. Expected resources query string parameter in form: "
         "?resources=VCPU:2,MEMORY_MB:1024. Got: empty string."),
    ("VCPU", "Badly formed resources parameter. Expected resources query string parameter in form: "
             "?resources=VCPU:2,MEMORY_MB:1024. Got: VCPU."),
    ("VCPU:1,", "Badly formed resources parameter. Expected resources query string parameter in "
                "form: ?resources=VCPU:2,MEMORY_MB:1024. Got: ."),
    ("VCPU:1:2", "Badly formed resources parameter. Expected resources query string parameter in "
                 "form: ?resources=VCPU:2,MEMORY_MB:1024. Got: VCPU:1:2."),
    ("VCPU:x", "Requested resource VCPU expected positive integer amount. Got: x."),
    ("VCPU:1.5", "Requested resource VCPU expected positive integer amount. Got: 1.5."),
    ("VCPU:", "Requested resource VCPU expected positive integer amount. Got: ."),
    ("VCPU:0", "Requested resource VCPU requires amount >= 1. Got: 0."),
    ("VCPU:-3", "Requested resource VCPU requires amount >= 1. Got: -3."),
    ("CUSTOM_NOPE:1", "Invalid resource class in resources parameter: No such resource class CUSTOM_NOPE."),
    ("vcpu:1", "Invalid resource class in resources parameter: No such resource class vcpu."),
])
def test_resources_errors(client, value, detail):
    assert list_error(client, f"resources={value}", mv="1.4") == detail


def test_resources_huge_amount_matches_nothing(client, create_provider):
    uuid = create_provider("cn")["uuid"]
    put_inventory(client, uuid, VCPU={"total": 8})
    for amount in (2 ** 31, 2 ** 63, 10 ** 30):
        assert listed(client, f"resources=VCPU:{amount}") == set()
        assert listed(client, f"resources=VCPU:1,DISK_GB:{amount}") == set()
    assert listed(client, "resources=VCPU:8") == {"cn"}


def test_list_last_modified_is_newest_provider(client, create_provider):
    create_provider("one")
    resp = client.get(RP, mv="1.15")
    assert resp.headers["last-modified"].endswith(" GMT")


# --- update ------------------------------------------------------------------

def test_rename(client, create_provider):
    created = create_provider("old")
    uuid = created["uuid"]
    client.post(f"{rp_path(uuid)}/inventories", json={"resource_class": "VCPU", "total": 1})
    resp = client.put(rp_path(uuid), json={"name": "new"}, mv="1.20")
    assert resp.status == 200
    assert resp.json == {**created, "name": "new", "generation": 1}   # generation unchanged by rename
    assert client.get(rp_path(uuid)).json["name"] == "new"
    assert listed(client, "name=old") == set()
    same = client.put(rp_path(uuid), json={"name": "new"}, mv="1.0")
    assert same.status == 200
    assert set(same.json) == {"uuid", "name", "generation", "links"}


def test_rename_to_taken_name(client, create_provider):
    create_provider("taken")
    uuid = create_provider("mine")["uuid"]
    resp = client.put(rp_path(uuid), json={"name": "taken"}, mv="1.23")
    assert resp.status == 409
    assert resp.error["code"] == "placement.duplicate_name"
    assert resp.error["detail"] == "Conflicting resource provider taken already exists."


@pytest.mark.parametrize("body", [
    {},
    {"name": None},
    {"name": 3},
    {"name": "x" * 201},
    {"name": "a", "uuid": new_uuid()},
    {"name": "a", "generation": 0},
    {"name": "a", "root_provider_uuid": new_uuid()},
    {"name": "a", "parent_provider_uuid": "nope"},
    {"name": "a", "parent_provider_uuid": 7},
])
def test_update_schema_errors(client, create_provider, body):
    uuid = create_provider()["uuid"]
    resp = client.put(rp_path(uuid), json=body, mv="1.37")
    assert resp.status == 400
    assert resp.error["detail"].startswith("JSON does not validate: ")


def test_update_order_content_type_policy(client, create_provider):
    uuid = create_provider()["uuid"]
    missing = new_uuid()
    resp = client.put(rp_path(missing), json={"junk": True})
    assert resp.status == 404           # lookup before the body
    assert resp.error["detail"] == f"No resource provider with uuid {missing} found"
    assert client.put(rp_path(uuid), body=b"{bad", content_type="application/json").status == 400
    assert client.put(rp_path(uuid), body=b'{"name": "a"}', content_type="text/plain").status == 415
    resp = client.put(rp_path(uuid), json={"name": "a"}, token="user")
    assert resp.status == 403
    assert "placement:resource_providers:update" in resp.error["detail"]


def test_update_parent_needs_1_14(client, create_provider):
    parent = create_provider("p")["uuid"]
    uuid = create_provider("c")["uuid"]
    resp = client.put(rp_path(uuid), json={"name": "c", "parent_provider_uuid": parent}, mv="1.13")
    assert resp.status == 400
    assert "Additional properties are not allowed" in resp.error["detail"]


def tree(client, create_provider):
    """root ─ mid ─ leaf, and a separate root 'other'; returns their uuids."""
    root = create_provider("root")["uuid"]
    mid = create_provider("mid", parent=root)["uuid"]
    leaf = create_provider("leaf", parent=mid)["uuid"]
    other = create_provider("other")["uuid"]
    return root, mid, leaf, other


def shown(client, uuid: str) -> dict:
    return client.get(rp_path(uuid), mv="1.39").json


def test_set_parent_once_moves_the_subtree(client, create_provider):
    top = create_provider("top")["uuid"]
    sub = create_provider("sub")["uuid"]
    below = create_provider("below", parent=sub)["uuid"]
    resp = client.put(rp_path(sub), json={"name": "sub", "parent_provider_uuid": top}, mv="1.14")
    assert resp.status == 200
    assert resp.json["parent_provider_uuid"] == top
    assert resp.json["root_provider_uuid"] == top
    assert resp.json["generation"] == 0
    assert shown(client, below)["root_provider_uuid"] == top
    assert shown(client, below)["generation"] == 0
    assert listed(client, f"in_tree={top}") == {"top", "sub", "below"}
    # re-sending the same parent (in any spelling) is a no-op
    for spelling in (top, top.upper()):
        again = client.put(rp_path(sub), json={"name": "sub", "parent_provider_uuid": spelling},
                           mv="1.14")
        assert again.status == 200
    # omitting the parent leaves it alone
    renamed = client.put(rp_path(sub), json={"name": "sub2"}, mv="1.14").json
    assert renamed["parent_provider_uuid"] == top


@pytest.mark.parametrize("mv", ["1.14", "1.36"])
def test_reparent_and_unparent_refused_before_1_37(client, create_provider, mv):
    root, mid, leaf, other = tree(client, create_provider)
    failure = f"Unable to save resource provider {mid}: Object action update failed because: "
    resp = client.put(rp_path(mid), json={"name": "mid", "parent_provider_uuid": other}, mv=mv)
    assert resp.status == 400
    assert resp.error["detail"] == failure + "re-parenting a provider is not currently allowed."
    resp = client.put(rp_path(mid), json={"name": "mid", "parent_provider_uuid": None}, mv=mv)
    assert resp.status == 400
    assert resp.error["detail"] == failure + "un-parenting a provider is not currently allowed."
    assert shown(client, mid)["parent_provider_uuid"] == root


def test_parent_errors(client, create_provider):
    root, mid, leaf, other = tree(client, create_provider)
    for mv in ("1.14", "1.37"):
        failure = f"Unable to save resource provider {root}: Object action update failed because: "
        resp = client.put(rp_path(root), json={"name": "root", "parent_provider_uuid": new_uuid()}, mv=mv)
        assert resp.status == 400
        assert resp.error["detail"] == failure + "parent provider UUID does not exist."
        for target in (root, leaf, mid):
            resp = client.put(rp_path(root), json={"name": "root", "parent_provider_uuid": target},
                              mv=mv)
            assert resp.status == 400
            assert resp.error["detail"] == failure + "creating loop in the provider tree is not allowed."
    resp = client.put(rp_path(mid), json={"name": "mid", "parent_provider_uuid": leaf}, mv="1.37")
    assert resp.status == 400
    assert resp.error["detail"].endswith("creating loop in the provider tree is not allowed.")
    assert shown(client, root)["parent_provider_uuid"] is None
    assert shown(client, leaf)["root_provider_uuid"] == root


def test_reparent_from_1_37_moves_whole_subtree(client, create_provider):
    root, mid, leaf, other = tree(client, create_provider)
    resp = client.put(rp_path(mid), json={"name": "mid", "parent_provider_uuid": other}, mv="1.37")
    assert resp.status == 200
    assert resp.json["parent_provider_uuid"] == other
    assert resp.json["root_provider_uuid"] == other
    assert resp.json["generation"] == 0
    assert shown(client, leaf)["root_provider_uuid"] == other
    assert shown(client, leaf)["parent_provider_uuid"] == mid
    assert listed(client, f"in_tree={other}") == {"other", "mid", "leaf"}
    assert listed(client, f"in_tree={root}") == {"root"}
    # and under a provider of its own former tree, one level up
    resp = client.put(rp_path(leaf), json={"name": "leaf", "parent_provider_uuid": other}, mv="1.37")
    assert resp.status == 200
    assert shown(client, leaf)["parent_provider_uuid"] == other


def test_unparent_from_1_37(client, create_provider):
    root, mid, leaf, other = tree(client, create_provider)
    resp = client.put(rp_path(mid), json={"name": "mid", "parent_provider_uuid": None}, mv="1.37")
    assert resp.status == 200
    assert resp.json["parent_provider_uuid"] is None
    assert resp.json["root_provider_uuid"] == mid
    assert shown(client, leaf)["root_provider_uuid"] == mid
    assert listed(client, f"in_tree={root}") == {"root"}
    assert listed(client, f"in_tree={leaf}") == {"mid", "leaf"}
    # root may now be deleted, its child having left
    assert client.delete(rp_path(root)).status == 204


def test_update_caching_headers(client, create_provider):
    uuid = create_provider()["uuid"]
    resp = client.put(rp_path(uuid), json={"name": "renamed"}, mv="1.15")
    assert resp.status == 200
    assert resp.headers["cache-control"] == "no-cache"
    assert "last-modified" in resp.headers
    old = client.put(rp_path(uuid), json={"name": "again"}, mv="1.14")
    assert "cache-control" not in old.headers


# --- delete ------------------------------------------------------------------

def test_delete(client, create_provider):
    uuid = create_provider()["uuid"]
    resp = client.delete(rp_path(uuid))
    assert resp.status == 204
    assert resp.content == b""
    assert "content-type" not in resp.headers
    assert client.get(rp_path(uuid)).status == 404
    again = client.delete(rp_path(uuid))
    assert again.status == 404
    assert again.error["detail"] == f"No resource provider with uuid {uuid} found for delete"
    assert client.delete(rp_path("not-a-uuid")).status == 404


def test_delete_parent_refused(client, create_provider, engine):
    root = create_provider("root")["uuid"]
    put_inventory(client, root, VCPU={"total": 4})
    allocate(engine, root, "VCPU", 1)
    child = create_provider("child", parent=root)["uuid"]
    resp = client.delete(rp_path(root), mv="1.23")
    assert resp.status == 409       # children are checked before allocations
    assert resp.error["code"] == "placement.resource_provider.cannot_delete_parent"
    assert resp.error["detail"] == (
        f"Unable to delete parent resource provider {root}: It has child resource providers.")
    assert client.delete(rp_path(child)).status == 204
    resp = client.delete(rp_path(root), mv="1.23")
    assert resp.status == 409
    assert resp.error["code"] == "placement.resource_provider.inuse"
    assert resp.error["detail"] == (
        f"Unable to delete resource provider {root}: Resource provider has allocations.")
    assert shown(client, root)["generation"] == 1      # a refused delete changes nothing


def test_delete_removes_inventories_traits_and_aggregates(client, create_provider, engine):
    uuid = create_provider("doomed")["uuid"]
    keep = create_provider("kept")["uuid"]
    agg = new_uuid()
    put_inventory(client, uuid, VCPU={"total": 4}, DISK_GB={"total": 10})
    add_traits(engine, uuid, VMX)
    add_aggregates(engine, uuid, agg)
    add_aggregates(engine, keep, agg)
    with engine.connect() as conn:
        rp_id = conn.execute(select(t.resource_providers.c.id)
                             .where(t.resource_providers.c.uuid == uuid)).scalar_one()
    assert client.delete(rp_path(uuid)).status == 204
    with engine.connect() as conn:
        for table in (t.inventories, t.resource_provider_traits, t.resource_provider_aggregates):
            assert conn.execute(select(table).where(table.c.resource_provider_id == rp_id)).all() == []
    assert listed(client, f"member_of={agg}") == {"kept"}
    # the name is free again
    assert client.post(RP, json={"name": "doomed"}).status == 201


def test_delete_policy(client, create_provider):
    uuid = create_provider()["uuid"]
    resp = client.delete(rp_path(uuid), token="user")
    assert resp.status == 403
    assert "placement:resource_providers:delete" in resp.error["detail"]
    assert client.get(rp_path(uuid)).status == 200


# --- concurrency -------------------------------------------------------------

def test_racing_creates_of_one_name(client, make_client):
    import threading

    barrier = threading.Barrier(5)
    results = []
    lock = threading.Lock()

    def run():
        own = make_client()
        barrier.wait()
        resp = own.post(RP, json={"name": "contested"}, mv="1.23")
        with lock:
            results.append(resp)

    threads = [threading.Thread(target=run) for _ in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(r.status for r in results) == [200, 409, 409, 409, 409], results
    for resp in results:
        if resp.status == 409:
            assert resp.error["code"] == "placement.duplicate_name"
            assert "Conflicting resource provider name: contested already exists." in resp.error["detail"]
    assert listed(client, "name=contested") == {"contested"}


def test_lost_insert_race_is_reported_as_duplicate(client, create_provider, monkeypatch):
    """If the pre-insert check misses a concurrent create, the unique
    constraint still yields the duplicate 409, not a 500."""
    from billeting.placement import providers

    existing = create_provider("racer")
    real = providers._clashes
    calls = []

    def blind_once(conn, name, uuid):
        calls.append(name)
        return [] if len(calls) == 1 else real(conn, name, uuid)

    monkeypatch.setattr(providers, "_clashes", blind_once)
    resp = client.post(RP, json={"name": "racer"}, mv="1.23")
    assert resp.status == 409
    assert resp.error["code"] == "placement.duplicate_name"
    assert resp.error["detail"] == "Conflicting resource provider name: racer already exists."
    calls.clear()
    resp = client.post(RP, json={"name": "other", "uuid": existing["uuid"]}, mv="1.23")
    assert resp.status == 409
    assert "Conflicting resource provider uuid:" in resp.error["detail"]
    assert len(calls) == 2


@pytest.mark.parametrize("mv", ["1.14", "1.37"])
def test_crossing_moves_cannot_make_a_loop(client, make_client, create_provider, mv):
    import threading

    a = create_provider("a")["uuid"]
    b = create_provider("b")["uuid"]
    barrier = threading.Barrier(2)
    results = {}

    def move(child, parent):
        own = make_client()
        barrier.wait()
        results[child] = own.put(rp_path(child), json={"name": "a" if child == a else "b",
                                                        "parent_provider_uuid": parent}, mv=mv)

    threads = [threading.Thread(target=move, args=pair) for pair in ((a, b), (b, a))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(r.status for r in results.values()) == [200, 400], results
    loser = next(r for r in results.values() if r.status == 400)
    assert loser.error["detail"].endswith("creating loop in the provider tree is not allowed.")
    roots = {shown(client, u)["root_provider_uuid"] for u in (a, b)}
    assert len(roots) == 1 and roots <= {a, b}
