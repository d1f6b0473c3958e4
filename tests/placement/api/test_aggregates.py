"""``/resource_providers/{uuid}/aggregates`` (docs/design/placement-model.md#aggregates,
docs/design/placement-endpoints.md#provider-aggregates) and its generation rules
(docs/design/placement-model.md#generations)."""
from __future__ import annotations

import threading
import uuid as uuidlib

import pytest
from sqlalchemy import func, select

from billeting.placement.store import tables as t

GENERATION_CHANGED = ("Resource provider's generation already changed. "
                      "Please update the generation and try again.")
JSON_INVALID = "JSON does not validate"


def new_uuid() -> str:
    return str(uuidlib.uuid4())


def path(provider: dict | str) -> str:
    uuid = provider if isinstance(provider, str) else provider["uuid"]
    return f"/resource_providers/{uuid}/aggregates"


def assert_cache_headers(resp, expected: bool) -> None:
    if expected:
        assert resp.headers["cache-control"] == "no-cache"
        assert resp.headers["last-modified"].endswith(" GMT")
    else:
        assert "cache-control" not in resp.headers
        assert "last-modified" not in resp.headers


def generation_of(client, provider) -> int:
    return client.get(f"/resource_providers/{provider['uuid']}").json["generation"]


def aggregate_rows(engine) -> int:
    with engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(t.placement_aggregates)).scalar_one()


@pytest.fixture
def provider(create_provider):
    return create_provider()


# --- gates, routing, policy ----------------------------------------------------

def test_not_found_at_1_0(client, provider):
    resp = client.get(path(provider), mv="1.0")
    assert resp.status == 404
    resp = client.put(path(provider), json=[], mv="1.0")
    assert resp.status == 404
    assert resp.error["detail"] == "The resource could not be found."


def test_put_media_type_is_checked_before_the_version_gate(client, provider):
    resp = client.put(path(provider), body="[]", content_type="text/plain", mv="1.0")
    assert resp.status == 415
    assert resp.error["detail"] == "The media type text/plain is not supported, use application/json"
    resp = client.put(path(provider), mv="1.1")
    assert resp.status == 415
    assert resp.error["detail"] == "The media type None is not supported, use application/json"


def test_method_not_allowed(client, provider):
    resp = client.delete(path(provider), mv="1.19")
    assert resp.status == 405
    assert resp.headers["allow"] == "GET, PUT"


@pytest.mark.parametrize("method,rule", [("GET", "list"), ("PUT", "update")])
def test_policy_denies_before_lookup(client, method, rule):
    json = [] if method == "PUT" else None
    resp = client.request(method, path(new_uuid()), json=json, mv="1.1", token="user")
    assert resp.status == 403
    assert resp.error["detail"] == (
        f"Policy does not allow placement:resource_providers:aggregates:{rule} to be performed.")


def test_get_honours_accept(client, provider):
    assert client.get(path(provider), mv="1.1", headers={"Accept": "text/plain"}).status == 406


@pytest.mark.parametrize("mv,json", [("1.1", []), ("1.19", {"aggregates": [], "resource_provider_generation": 0})])
def test_unknown_provider_is_404(client, mv, json):
    missing = new_uuid()
    resp = client.get(path(missing), mv=mv)
    assert resp.status == 404
    assert resp.error["detail"].startswith(f"No resource provider with uuid {missing} found")
    assert client.put(path(missing), json=json, mv=mv).status == 404
    # The provider is looked up before the body is parsed.
    assert client.put(path(missing), json={"bogus": 1}, mv=mv).status == 404
    assert client.get(path("not-a-uuid"), mv=mv).status == 404


# --- GET -----------------------------------------------------------------------

def test_get_shape_changes_at_1_19(client, provider):
    resp = client.get(path(provider), mv="1.1")
    assert resp.status == 200
    assert resp.json == {"aggregates": []}
    assert client.get(path(provider), mv="1.18").json == {"aggregates": []}
    resp = client.get(path(provider), mv="1.19")
    assert resp.json == {"aggregates": [], "resource_provider_generation": 0}


def test_get_and_put_cache_headers_from_1_15(client, provider):
    assert_cache_headers(client.get(path(provider), mv="1.14"), False)
    assert_cache_headers(client.get(path(provider), mv="1.15"), True)
    assert_cache_headers(client.put(path(provider), json=[], mv="1.14"), False)
    assert_cache_headers(client.put(path(provider), json=[], mv="1.15"), True)
    resp = client.put(path(provider), json={"aggregates": [], "resource_provider_generation": 0}, mv="1.19")
    assert_cache_headers(resp, True)


# --- PUT before 1.19: bare list, no generation -------------------------------------

def test_put_list_form(client, provider):
    aggs = [new_uuid(), new_uuid(), new_uuid()]
    resp = client.put(path(provider), json=aggs, mv="1.1")
    assert resp.status == 200
    assert resp.json == {"aggregates": aggs}  # request order echoed
    assert sorted(client.get(path(provider), mv="1.1").json["aggregates"]) == sorted(aggs)
    assert generation_of(client, provider) == 0

    resp = client.put(path(provider), json=aggs[1:], mv="1.18")
    assert resp.json == {"aggregates": aggs[1:]}
    assert sorted(client.get(path(provider), mv="1.18").json["aggregates"]) == sorted(aggs[1:])
    assert client.put(path(provider), json=[], mv="1.18").json == {"aggregates": []}
    assert client.get(path(provider), mv="1.19").json == {"aggregates": [], "resource_provider_generation": 0}


def test_object_form_is_rejected_before_1_19(client, provider):
    resp = client.put(path(provider), json={"aggregates": [], "resource_provider_generation": 0}, mv="1.18")
    assert resp.status == 400
    assert resp.error["detail"].startswith(JSON_INVALID)


# --- PUT from 1.19: object with generation -----------------------------------------

def test_put_object_form_checks_and_bumps_generation(client, provider):
    aggs = [new_uuid(), new_uuid()]
    resp = client.put(path(provider), json={"aggregates": aggs, "resource_provider_generation": 0}, mv="1.19")
    assert resp.status == 200
    assert resp.json == {"aggregates": aggs, "resource_provider_generation": 1}
    # The same set again still moves the generation.
    resp = client.put(path(provider), json={"aggregates": aggs[::-1], "resource_provider_generation": 1},
                      mv="1.19")
    assert resp.json == {"aggregates": aggs[::-1], "resource_provider_generation": 2}
    got = client.get(path(provider), mv="1.19").json
    assert sorted(got["aggregates"]) == sorted(aggs)
    assert got["resource_provider_generation"] == 2
    resp = client.put(path(provider), json={"aggregates": [], "resource_provider_generation": 2}, mv="1.39")
    assert resp.json == {"aggregates": [], "resource_provider_generation": 3}
    assert generation_of(client, provider) == 3


def test_put_stale_generation_is_409(client, provider):
    client.put(path(provider), json={"aggregates": [], "resource_provider_generation": 0}, mv="1.19")
    agg = new_uuid()
    resp = client.put(path(provider), json={"aggregates": [agg], "resource_provider_generation": 0}, mv="1.23")
    assert resp.status == 409
    assert resp.error["detail"] == GENERATION_CHANGED
    assert resp.error["code"] == "placement.concurrent_update"
    resp = client.put(path(provider), json={"aggregates": [agg], "resource_provider_generation": 0}, mv="1.22")
    assert resp.status == 409
    assert "code" not in resp.error
    assert client.get(path(provider), mv="1.19").json == {"aggregates": [], "resource_provider_generation": 1}


def test_list_form_is_rejected_from_1_19(client, provider):
    resp = client.put(path(provider), json=[new_uuid()], mv="1.19")
    assert resp.status == 400
    assert resp.error["detail"].startswith(JSON_INVALID)


def test_old_form_does_not_move_a_generation_that_new_form_moved(client, provider):
    client.put(path(provider), json={"aggregates": [], "resource_provider_generation": 0}, mv="1.19")
    client.put(path(provider), json=[new_uuid()], mv="1.18")
    assert generation_of(client, provider) == 1


# --- bad input -----------------------------------------------------------------

_DUP = "5c3b1c2e-7a4f-4a5e-9d3e-2b1c0a9f8e7d"


@pytest.mark.parametrize("body", [
    [_DUP, _DUP],
    ["not-a-uuid"],
    ["5c3b1c2e-7a4f-4a5e-9d3e-2b1c0a9f8e7"],  # one digit short
    [1],
    [None],
    [[_DUP]],
    {"aggregates": [_DUP]},
    _DUP,
    None,
])
def test_put_bad_list_is_400(client, provider, body):
    if body is None:
        resp = client.put(path(provider), body="null", content_type="application/json", mv="1.1")
    else:
        resp = client.put(path(provider), json=body, mv="1.1")
    assert resp.status == 400
    assert resp.error["detail"].startswith(JSON_INVALID)
    if body == [_DUP, _DUP]:
        assert "has non-unique elements" in resp.error["detail"]


@pytest.mark.parametrize("body", [
    {"aggregates": [_DUP, _DUP], "resource_provider_generation": 0},
    {"aggregates": ["nope"], "resource_provider_generation": 0},
    {"aggregates": [_DUP]},
    {"resource_provider_generation": 0},
    {"aggregates": [], "resource_provider_generation": 0, "extra": 1},
    {"aggregates": [], "resource_provider_generation": "0"},
    {"aggregates": [], "resource_provider_generation": None},
    {"aggregates": [], "resource_provider_generation": 0.5},
    {"aggregates": _DUP, "resource_provider_generation": 0},
    {},
])
def test_put_bad_object_is_400(client, provider, body):
    resp = client.put(path(provider), json=body, mv="1.19")
    assert resp.status == 400
    assert resp.error["detail"].startswith(JSON_INVALID)
    assert generation_of(client, provider) == 0


def test_put_malformed_json_is_400(client, provider):
    for raw in ("", "[", '{"aggregates": [}'):
        resp = client.put(path(provider), body=raw, content_type="application/json", mv="1.19")
        assert resp.status == 400
        assert resp.error["detail"].startswith("Malformed JSON")


# --- storage -------------------------------------------------------------------

def test_aggregates_are_stored_verbatim(client, provider):
    # Quirk docs/design/placement-quirks.md#q9: the dash-less and upper-case forms are different aggregates.
    dashed = new_uuid()
    variants = [dashed, dashed.replace("-", ""), dashed.upper()]
    resp = client.put(path(provider), json=variants, mv="1.1")
    assert resp.status == 200
    assert resp.json["aggregates"] == variants
    assert sorted(client.get(path(provider), mv="1.1").json["aggregates"]) == sorted(variants)


def test_decorated_uuid_forms_are_accepted(client, provider):
    plain = new_uuid()
    resp = client.put(path(provider), json=[f"urn:uuid:{plain.upper()}"], mv="1.1")
    assert resp.status == 200
    # Too long for the column verbatim: kept in canonical form.
    assert resp.json["aggregates"] == [plain]
    braced = "{" + new_uuid().replace("-", "") + "}"
    resp = client.put(path(provider), json=[braced], mv="1.1")
    assert resp.json["aggregates"] == [braced]
    # Two spellings that end up as one stored value do not clash.
    resp = client.put(path(provider), json=[plain, f"urn:uuid:{plain}"], mv="1.1")
    assert resp.status == 200
    assert resp.json["aggregates"] == [plain]


def test_aggregate_rows_are_shared_and_never_deleted(client, engine, create_provider):
    first, second = create_provider(), create_provider()
    agg = new_uuid()
    client.put(path(first), json=[agg], mv="1.1")
    client.put(path(second), json=[agg], mv="1.1")
    assert aggregate_rows(engine) == 1
    client.put(path(first), json=[], mv="1.1")
    client.put(path(second), json=[], mv="1.1")
    assert aggregate_rows(engine) == 1


def test_member_of_sees_associations(client, create_provider):
    first, second = create_provider(), create_provider()
    agg = new_uuid()
    client.put(path(first), json=[agg, new_uuid()], mv="1.1")
    client.put(path(second), json=[new_uuid()], mv="1.1")
    resp = client.get(f"/resource_providers?member_of={agg}", mv="1.3")
    assert [p["uuid"] for p in resp.json["resource_providers"]] == [first["uuid"]]


def test_concurrent_puts_of_the_same_new_aggregate(client, engine, create_provider):
    providers = [create_provider() for _ in range(5)]
    shared = new_uuid()
    statuses: list[int] = []

    def put(p):
        body = {"aggregates": [shared, new_uuid()], "resource_provider_generation": 0}
        statuses.append(client.put(path(p), json=body, mv="1.19").status)

    threads = [threading.Thread(target=put, args=(p,)) for p in providers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert statuses == [200] * 5
    assert aggregate_rows(engine) == 6
    for p in providers:
        assert shared in client.get(path(p), mv="1.19").json["aggregates"]


def test_concurrent_puts_on_one_provider_with_one_generation(client, provider):
    statuses: list[int] = []

    def put():
        body = {"aggregates": [new_uuid()], "resource_provider_generation": 0}
        statuses.append(client.put(path(provider), json=body, mv="1.19").status)

    threads = [threading.Thread(target=put) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(statuses) == [200, 409, 409, 409]
    assert generation_of(client, provider) == 1
