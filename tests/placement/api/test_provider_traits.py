"""``/resource_providers/{uuid}/traits`` (docs/design/placement-endpoints.md#provider-traits) and its
generation rules (docs/design/placement-model.md#generations)."""
from __future__ import annotations

import uuid as uuidlib

import pytest

GENERATION_CHANGED = ("Resource provider's generation already changed. "
                      "Please update the generation and try again.")
JSON_INVALID = "JSON does not validate"


def path(provider: dict | str) -> str:
    uuid = provider if isinstance(provider, str) else provider["uuid"]
    return f"/resource_providers/{uuid}/traits"


def assert_cache_headers(resp, expected: bool) -> None:
    if expected:
        assert resp.headers["cache-control"] == "no-cache"
        assert resp.headers["last-modified"].endswith(" GMT")
    else:
        assert "cache-control" not in resp.headers
        assert "last-modified" not in resp.headers


def put_traits(client, provider, traits, generation, mv="1.6"):
    return client.put(path(provider), mv=mv,
                      json={"traits": traits, "resource_provider_generation": generation})


def generation_of(client, provider) -> int:
    return client.get(f"/resource_providers/{provider['uuid']}", mv="1.6").json["generation"]


@pytest.fixture
def provider(create_provider):
    return create_provider()


# --- gates, routing, policy ----------------------------------------------------

@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
def test_not_found_below_1_6(client, provider, method):
    json = {"traits": [], "resource_provider_generation": 0} if method == "PUT" else None
    resp = client.request(method, path(provider), json=json, mv="1.5")
    assert resp.status == 404
    assert resp.error["detail"] == "The resource could not be found."


def test_method_not_allowed(client, provider):
    resp = client.post(path(provider), json={}, mv="1.6")
    assert resp.status == 405
    assert resp.headers["allow"] == "GET, PUT, DELETE"


@pytest.mark.parametrize("method,rule", [("GET", "list"), ("PUT", "update"), ("DELETE", "delete")])
def test_policy_denies_before_lookup(client, method, rule):
    json = {"traits": [], "resource_provider_generation": 0} if method == "PUT" else None
    resp = client.request(method, path(str(uuidlib.uuid4())), json=json, mv="1.6", token="user")
    assert resp.status == 403
    assert resp.error["detail"] == (
        f"Policy does not allow placement:resource_providers:traits:{rule} to be performed.")


def test_get_honours_accept(client, provider):
    assert client.get(path(provider), mv="1.6", headers={"Accept": "text/html"}).status == 406


# --- GET -----------------------------------------------------------------------

def test_get_empty(client, provider):
    resp = client.get(path(provider), mv="1.6")
    assert resp.status == 200
    assert resp.json == {"traits": [], "resource_provider_generation": 0}
    assert_cache_headers(resp, False)
    assert_cache_headers(client.get(path(provider), mv="1.15"), True)


@pytest.mark.parametrize("method", ["GET", "DELETE"])
def test_unknown_provider_is_404(client, method):
    for uuid in (str(uuidlib.uuid4()), "not-a-uuid"):
        resp = client.request(method, path(uuid), mv="1.6")
        assert resp.status == 404
        assert resp.error["detail"].startswith(f"No resource provider with uuid {uuid} found")


# --- PUT -----------------------------------------------------------------------

def test_put_replaces_the_set_and_bumps_only_on_change(client, provider):
    client.put("/traits/CUSTOM_MAGIC", mv="1.6")
    resp = put_traits(client, provider, ["CUSTOM_MAGIC", "HW_CPU_X86_AVX2"], 0)
    assert resp.status == 200
    assert sorted(resp.json["traits"]) == ["CUSTOM_MAGIC", "HW_CPU_X86_AVX2"]
    assert resp.json["resource_provider_generation"] == 1
    assert generation_of(client, provider) == 1

    # The same set (in another order, with a duplicate): no change, no bump.
    resp = put_traits(client, provider, ["HW_CPU_X86_AVX2", "CUSTOM_MAGIC", "CUSTOM_MAGIC"], 1)
    assert resp.status == 200
    assert sorted(resp.json["traits"]) == ["CUSTOM_MAGIC", "HW_CPU_X86_AVX2"]
    assert resp.json["resource_provider_generation"] == 1

    resp = put_traits(client, provider, ["STORAGE_DISK_SSD"], 1)
    assert resp.json == {"traits": ["STORAGE_DISK_SSD"], "resource_provider_generation": 2}
    got = client.get(path(provider), mv="1.6").json
    assert got == {"traits": ["STORAGE_DISK_SSD"], "resource_provider_generation": 2}

    resp = put_traits(client, provider, [], 2)
    assert resp.json == {"traits": [], "resource_provider_generation": 3}
    # Clearing an already empty set changes nothing.
    assert put_traits(client, provider, [], 3).json["resource_provider_generation"] == 3


def test_put_cache_headers_from_1_15(client, provider):
    assert_cache_headers(put_traits(client, provider, ["HW_CPU_X86_AVX2"], 0, mv="1.14"), False)
    assert_cache_headers(put_traits(client, provider, [], 1, mv="1.15"), True)


def test_put_stale_generation_is_409(client, provider):
    assert put_traits(client, provider, ["HW_CPU_X86_AVX2"], 0).status == 200
    resp = put_traits(client, provider, ["HW_CPU_X86_SSE"], 0, mv="1.23")
    assert resp.status == 409
    assert resp.error["detail"] == GENERATION_CHANGED
    assert resp.error["code"] == "placement.concurrent_update"
    resp = put_traits(client, provider, ["HW_CPU_X86_SSE"], 7, mv="1.22")
    assert resp.status == 409
    assert "code" not in resp.error
    # Even a no-op PUT must carry the current generation.
    assert put_traits(client, provider, ["HW_CPU_X86_AVX2"], 0).status == 409
    assert client.get(path(provider), mv="1.6").json["traits"] == ["HW_CPU_X86_AVX2"]


def test_put_unknown_traits_is_400(client, provider):
    resp = put_traits(client, provider, ["HW_CPU_X86_AVX2", "CUSTOM_NOPE"], 0)
    assert resp.status == 400
    assert resp.error["detail"] == "No such trait CUSTOM_NOPE"
    resp = put_traits(client, provider, ["CUSTOM_NOPE", "CUSTOM_NADA"], 0)
    assert resp.status == 400
    assert resp.error["detail"] == "No such trait CUSTOM_NOPE, CUSTOM_NADA"
    # Names are not pattern-checked: a lower-case name is just unknown.
    resp = put_traits(client, provider, ["hw_cpu_x86_avx2"], 0)
    assert resp.status == 400
    assert resp.error["detail"] == "No such trait hw_cpu_x86_avx2"
    # A NUL is refused in any body, before anything is looked up.
    resp = put_traits(client, provider, ["hw_cpu_x86_avx2", "A\u0000B"], 0)
    assert resp.status == 400
    assert resp.error["detail"] == ("JSON does not validate: NUL characters (\\u0000) are not allowed in "
                                    "strings: instance['traits'][1]")
    assert generation_of(client, provider) == 0


def test_put_check_order(client, provider):
    # Body before provider lookup: bad body on an unknown provider is 400.
    resp = client.put(path(str(uuidlib.uuid4())), json={"traits": []}, mv="1.6")
    assert resp.status == 400
    assert resp.error["detail"].startswith(JSON_INVALID)
    # Good body, unknown provider: 404.
    missing = str(uuidlib.uuid4())
    resp = put_traits(client, missing, ["CUSTOM_NOPE"], 5)
    assert resp.status == 404
    assert resp.error["detail"].startswith(f"No resource provider with uuid {missing} found")
    # Generation before trait names.
    resp = put_traits(client, provider, ["CUSTOM_NOPE"], 5)
    assert resp.status == 409


@pytest.mark.parametrize("body", [
    {"traits": ["HW_CPU_X86_AVX2"]},
    {"resource_provider_generation": 0},
    {"traits": ["HW_CPU_X86_AVX2"], "resource_provider_generation": 0, "extra": True},
    {"traits": "HW_CPU_X86_AVX2", "resource_provider_generation": 0},
    {"traits": [""], "resource_provider_generation": 0},
    {"traits": [1], "resource_provider_generation": 0},
    {"traits": [None], "resource_provider_generation": 0},
    {"traits": ["X" * 256], "resource_provider_generation": 0},
    {"traits": [], "resource_provider_generation": "0"},
    {"traits": [], "resource_provider_generation": None},
    {"traits": [], "resource_provider_generation": 1.5},
    {"traits": [], "resource_provider_generation": True},
    ["HW_CPU_X86_AVX2"],
    {},
])
def test_put_bad_body_is_400(client, provider, body):
    resp = client.put(path(provider), json=body, mv="1.6")
    assert resp.status == 400
    assert resp.error["detail"].startswith(JSON_INVALID)


@pytest.mark.parametrize("generation,status", [
    ("18446744073709551615", 409),  # a valid integer, just not the current one
    ("-1", 409),
    ("1e400", 400),  # not an integer
    ("100000000000000000000000000000", 400),  # the JSON parser can only make a float of it
])
def test_put_out_of_range_generation_is_4xx(client, provider, generation, status):
    body = '{"traits": [], "resource_provider_generation": %s}' % generation
    resp = client.put(path(provider), body=body, content_type="application/json", mv="1.23")
    assert resp.status == status
    if status == 409:
        assert resp.error["code"] == "placement.concurrent_update"


def test_put_media_type_and_malformed_json(client, provider):
    resp = client.put(path(provider), body='{"traits": []', content_type="application/json", mv="1.6")
    assert resp.status == 400
    assert resp.error["detail"].startswith("Malformed JSON")
    resp = client.put(path(provider), body="{}", content_type="text/plain", mv="1.6")
    assert resp.status == 415
    assert resp.error["detail"] == "The media type text/plain is not supported, use application/json"


# --- DELETE --------------------------------------------------------------------

def test_delete_bumps_only_when_there_were_traits(client, provider):
    put_traits(client, provider, ["HW_CPU_X86_AVX2", "STORAGE_DISK_SSD"], 0)
    resp = client.delete(path(provider), mv="1.15")
    assert resp.status == 204
    assert resp.content == b""
    assert_cache_headers(resp, False)
    assert client.get(path(provider), mv="1.6").json == {"traits": [], "resource_provider_generation": 2}
    assert client.delete(path(provider), mv="1.6").status == 204
    assert generation_of(client, provider) == 2


def test_traits_are_per_provider(client, create_provider):
    first, second = create_provider(), create_provider()
    put_traits(client, first, ["HW_CPU_X86_AVX2"], 0)
    put_traits(client, second, ["STORAGE_DISK_SSD"], 0)
    client.delete(path(first), mv="1.6")
    assert client.get(path(second), mv="1.6").json["traits"] == ["STORAGE_DISK_SSD"]


def test_required_filter_sees_provider_traits(client, create_provider):
    first, second = create_provider(), create_provider()
    put_traits(client, first, ["HW_CPU_X86_AVX2"], 0)
    resp = client.get("/resource_providers?required=HW_CPU_X86_AVX2", mv="1.18")
    assert [p["uuid"] for p in resp.json["resource_providers"]] == [first["uuid"]]
    assert second["uuid"] not in [p["uuid"] for p in resp.json["resource_providers"]]
