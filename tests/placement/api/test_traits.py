"""``/traits`` and ``/traits/{name}`` (docs/design/placement-model.md#traits,
docs/design/placement-endpoints.md#traits)."""
from __future__ import annotations

import threading

import os_traits
import pytest

INVALID_TRAIT = ('The trait is invalid. A valid trait must be no longer than 255 characters, '
                 'start with the prefix "CUSTOM_" and use following characters: '
                 '"A"-"Z", "0"-"9" and "_"')
BAD_NAME_PARAM = ("Badly formatted name parameter. Expected name query string parameter in form: "
                  "?name=[in|startswith]:[name1,name2|prefix]. Got: ")


def assert_cache_headers(resp, expected: bool) -> None:
    if expected:
        assert resp.headers["cache-control"] == "no-cache"
        assert resp.headers["last-modified"].endswith(" GMT")
    else:
        assert "cache-control" not in resp.headers
        assert "last-modified" not in resp.headers


def list_traits(client, query: str = "", mv: str = "1.6") -> list[str]:
    resp = client.get(f"/traits{query}", mv=mv)
    assert resp.status == 200, resp
    return resp.json["traits"]


def attach(client, create_provider, *names: str) -> dict:
    provider = create_provider()
    resp = client.put(f"/resource_providers/{provider['uuid']}/traits", mv="1.6",
                      json={"traits": list(names), "resource_provider_generation": 0})
    assert resp.status == 200, resp
    return provider


# --- version gates, routing, policy ----------------------------------------

@pytest.mark.parametrize("method,path", [
    ("GET", "/traits"),
    ("GET", "/traits/HW_CPU_X86_AVX2"),
    ("PUT", "/traits/CUSTOM_X"),
    ("DELETE", "/traits/CUSTOM_X"),
])
def test_not_found_below_1_6(client, method, path):
    resp = client.request(method, path, mv="1.5")
    assert resp.status == 404
    assert resp.error["title"] == "Not Found"


@pytest.mark.parametrize("path,allow", [("/traits", "GET"), ("/traits/CUSTOM_X", "GET, PUT, DELETE")])
def test_method_not_allowed(client, path, allow):
    resp = client.request("POST", path, mv="1.6", json={})
    assert resp.status == 405
    assert resp.headers["allow"] == allow


@pytest.mark.parametrize("method,path,rule", [
    ("GET", "/traits", "list"),
    ("GET", "/traits/CUSTOM_NOPE", "show"),
    ("PUT", "/traits/CUSTOM_NOPE", "update"),
    ("DELETE", "/traits/CUSTOM_NOPE", "delete"),
])
def test_policy_denies_before_lookup(client, method, path, rule):
    resp = client.request(method, path, mv="1.23", token="user")
    assert resp.status == 403
    assert resp.error["detail"] == f"Policy does not allow placement:traits:{rule} to be performed."


def test_list_honours_accept(client):
    resp = client.get("/traits", mv="1.6", headers={"Accept": "text/plain"})
    assert resp.status == 406
    assert resp.headers["content-type"] == "text/plain; charset=UTF-8"
    assert resp.text.endswith("\n\n Only application/json is provided")


# --- GET /traits ---------------------------------------------------------------

def test_list_has_every_standard_trait(client):
    found = list_traits(client)
    assert set(found) == set(os_traits.get_traits())
    assert len(found) == len(set(found))


def test_list_cache_headers_from_1_15(client):
    assert_cache_headers(client.get("/traits", mv="1.14"), False)
    assert_cache_headers(client.get("/traits", mv="1.15"), True)
    # An empty result still carries them ("now").
    resp = client.get("/traits?name=in:CUSTOM_NONE", mv="1.15")
    assert resp.json == {"traits": []}
    assert_cache_headers(resp, True)


def test_list_name_in(client):
    client.put("/traits/CUSTOM_A", mv="1.6")
    found = list_traits(client, "?name=in:CUSTOM_A,HW_CPU_X86_AVX2,CUSTOM_UNKNOWN")
    assert sorted(found) == ["CUSTOM_A", "HW_CPU_X86_AVX2"]
    assert list_traits(client, "?name=in:") == []


def test_list_name_startswith_is_literal_and_case_sensitive(client):
    for name in ("CUSTOM_A_1", "CUSTOM_AB1", "CUSTOM_B"):
        assert client.put(f"/traits/{name}", mv="1.6").status == 201
    assert sorted(list_traits(client, "?name=startswith:CUSTOM_")) == ["CUSTOM_AB1", "CUSTOM_A_1", "CUSTOM_B"]
    # "_" is not a wildcard: CUSTOM_AB1 does not start with CUSTOM_A_.
    assert list_traits(client, "?name=startswith:CUSTOM_A_") == ["CUSTOM_A_1"]
    assert list_traits(client, "?name=startswith:custom_") == []
    assert list_traits(client, "?name=startswith:%25") == []
    hw = list_traits(client, "?name=startswith:HW_CPU_X86_")
    assert "HW_CPU_X86_AVX2" in hw and all(n.startswith("HW_CPU_X86_") for n in hw)


@pytest.mark.parametrize("value", ["CUSTOM_A", "", "in", "startswith"])
def test_list_name_without_operator_is_400(client, value):
    resp = client.get(f"/traits?name={value}", mv="1.6")
    assert resp.status == 400
    assert resp.error["detail"] == f'{BAD_NAME_PARAM}"{value}"'


def test_list_unknown_name_operator_filters_nothing(client):
    # Quirk docs/design/placement-quirks.md#q6: kept for compatibility.
    assert len(list_traits(client, "?name=endswith:AVX2")) == len(list_traits(client))


def test_list_associated(client, create_provider):
    client.put("/traits/CUSTOM_USED", mv="1.6")
    client.put("/traits/CUSTOM_UNUSED", mv="1.6")
    attach(client, create_provider, "CUSTOM_USED", "HW_CPU_X86_AVX2")
    assert sorted(list_traits(client, "?associated=true")) == ["CUSTOM_USED", "HW_CPU_X86_AVX2"]
    assert sorted(list_traits(client, "?associated=TRUE")) == ["CUSTOM_USED", "HW_CPU_X86_AVX2"]
    unassociated = list_traits(client, "?associated=False")
    assert "CUSTOM_UNUSED" in unassociated and "CUSTOM_USED" not in unassociated
    assert "HW_CPU_X86_AVX2" not in unassociated
    assert list_traits(client, "?associated=true&name=startswith:CUSTOM_") == ["CUSTOM_USED"]
    assert list_traits(client, "?associated=false&name=in:CUSTOM_USED,CUSTOM_UNUSED") == ["CUSTOM_UNUSED"]


@pytest.mark.parametrize("value", ["yes", "1", ""])
def test_list_associated_bad_value_is_400(client, value):
    resp = client.get(f"/traits?associated={value}", mv="1.6")
    assert resp.status == 400
    assert resp.error["detail"] == 'The query parameter "associated" only accepts "true" or "false"'


def test_list_unknown_parameter_is_400(client):
    resp = client.get("/traits?names=in:CUSTOM_A", mv="1.6")
    assert resp.status == 400
    assert resp.error["detail"].startswith("Invalid query string parameters: Additional properties are not allowed")


def test_list_repeated_parameter_uses_last_value(client):
    client.put("/traits/CUSTOM_LAST", mv="1.6")
    assert list_traits(client, "?name=bogus&name=in:CUSTOM_LAST") == ["CUSTOM_LAST"]


# --- GET /traits/{name} --------------------------------------------------------

def test_show_is_204(client):
    resp = client.get("/traits/HW_CPU_X86_AVX2", mv="1.6")
    assert resp.status == 204
    assert resp.content == b""
    assert "content-type" not in resp.headers
    assert_cache_headers(resp, False)
    # Body-less, but the caching headers are sent from 1.15 (docs/design/placement-http.md#caching-headers).
    assert_cache_headers(client.get("/traits/HW_CPU_X86_AVX2", mv="1.15"), True)


@pytest.mark.parametrize("name", ["CUSTOM_NOPE", "hw_cpu_x86_avx2", "X" * 300, "CUSTOM%00X"])
def test_show_unknown_is_404(client, name):
    resp = client.get(f"/traits/{name}", mv="1.6")
    assert resp.status == 404
    if name == "CUSTOM_NOPE":
        assert resp.error["detail"] == "No such trait(s): CUSTOM_NOPE."


# --- PUT /traits/{name} --------------------------------------------------------

def test_put_creates_then_verifies(client):
    resp = client.put("/traits/CUSTOM_NEW", mv="1.6")
    assert resp.status == 201
    assert resp.content == b""
    assert resp.headers["location"].endswith("/traits/CUSTOM_NEW")
    assert_cache_headers(resp, False)
    resp = client.put("/traits/CUSTOM_NEW", mv="1.15")
    assert resp.status == 204
    assert resp.headers["location"].endswith("/traits/CUSTOM_NEW")
    assert_cache_headers(resp, True)
    assert client.get("/traits/CUSTOM_NEW", mv="1.6").status == 204
    assert list_traits(client, "?name=startswith:CUSTOM_") == ["CUSTOM_NEW"]


def test_put_created_has_cache_headers_from_1_15(client):
    resp = client.put("/traits/CUSTOM_FRESH", mv="1.15")
    assert resp.status == 201
    assert_cache_headers(resp, True)


def test_put_needs_no_body_or_content_type(client):
    resp = client.put("/traits/CUSTOM_BODY", body="whatever", content_type="text/plain", mv="1.6")
    assert resp.status == 201


@pytest.mark.parametrize("name", [
    "HW_CPU_X86_AVX2",  # standard names cannot be PUT, even existing ones
    "custom_lower",
    "CUSTOM_lower",
    "CUSTOM_",
    "CUSTOM-DASH",
    "CUSTOM_A%0A",
    "CUSTOM_" + "A" * 249,
])
def test_put_invalid_name_is_400(client, name):
    resp = client.put(f"/traits/{name}", mv="1.23")
    assert resp.status == 400
    assert resp.error["detail"] == INVALID_TRAIT
    assert resp.error["code"] == "placement.undefined_code"


def test_put_longest_name(client):
    name = "CUSTOM_" + "A" * 248
    assert client.put(f"/traits/{name}", mv="1.6").status == 201
    assert client.get(f"/traits/{name}", mv="1.6").status == 204


def test_concurrent_puts_create_once(client):
    statuses: list[int] = []

    def put():
        statuses.append(client.put("/traits/CUSTOM_RACE", mv="1.6").status)

    threads = [threading.Thread(target=put) for _ in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(statuses) == [201, 204, 204, 204, 204]


# --- DELETE /traits/{name} -----------------------------------------------------

def test_delete(client):
    client.put("/traits/CUSTOM_GONE", mv="1.6")
    resp = client.delete("/traits/CUSTOM_GONE", mv="1.15")
    assert resp.status == 204
    assert resp.content == b""
    assert_cache_headers(resp, False)
    assert client.get("/traits/CUSTOM_GONE", mv="1.6").status == 404


def test_delete_unknown_is_404_before_standard_check(client):
    for name in ("CUSTOM_NOPE", "HW_NOT_A_REAL_TRAIT"):
        resp = client.delete(f"/traits/{name}", mv="1.6")
        assert resp.status == 404
        assert resp.error["detail"] == f"No such trait(s): {name}."


def test_delete_standard_is_400(client):
    resp = client.delete("/traits/HW_CPU_X86_AVX2", mv="1.23")
    assert resp.status == 400
    assert resp.error["detail"] == "Cannot delete standard trait HW_CPU_X86_AVX2."
    assert client.get("/traits/HW_CPU_X86_AVX2", mv="1.6").status == 204


def test_delete_in_use_is_409(client, create_provider):
    client.put("/traits/CUSTOM_BUSY", mv="1.6")
    provider = attach(client, create_provider, "CUSTOM_BUSY")
    resp = client.delete("/traits/CUSTOM_BUSY", mv="1.22")
    assert resp.status == 409
    assert resp.error["detail"] == "The trait CUSTOM_BUSY is in use by a resource provider."
    assert "code" not in resp.error
    assert client.delete("/traits/CUSTOM_BUSY", mv="1.23").error["code"] == "placement.undefined_code"
    # Once detached it can go.
    assert client.delete(f"/resource_providers/{provider['uuid']}/traits", mv="1.6").status == 204
    assert client.delete("/traits/CUSTOM_BUSY", mv="1.6").status == 204
