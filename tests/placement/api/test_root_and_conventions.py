"""Cross-cutting HTTP behaviour (docs/design/placement-http.md): version document, negotiation,
errors, headers."""
from __future__ import annotations

import re

import pytest

REQUEST_ID = re.compile(r"^req-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def test_root_document_without_auth(client):
    resp = client.get("/", token=None)
    assert resp.status == 200
    version = resp.json["versions"][0]
    assert version == {"id": "v1.0", "max_version": "1.39", "min_version": "1.0",
                       "status": "CURRENT", "links": [{"rel": "self", "href": ""}]}
    assert REQUEST_ID.match(resp.headers["x-openstack-request-id"])
    assert resp.headers["openstack-api-version"] == "placement 1.0"
    assert "last-modified" not in resp.headers


def test_root_cache_headers_from_1_15(client):
    resp = client.get("/", mv="1.15")
    assert resp.headers["cache-control"] == "no-cache"
    assert resp.headers["last-modified"].endswith("GMT")
    assert client.get("/", mv="1.14").headers.get("cache-control") is None


@pytest.mark.parametrize("header,expected", [
    ("placement latest", "placement 1.39"),
    ("placement 1.05", "placement 1.5"),
    ("compute 2.1, placement 1.20", "placement 1.20"),
    ("PLACEMENT 1.3", "placement 1.3"),
    ("compute 2.50", "placement 1.0"),
    ("placement", "placement 1.0"),
])
def test_negotiation(client, header, expected):
    resp = client.get("/", headers={"OpenStack-API-Version": header})
    assert resp.status == 200
    assert resp.headers["openstack-api-version"] == expected
    assert resp.headers["vary"] == "openstack-api-version"


@pytest.mark.parametrize("token", ["1", "1.2.3", "pony.horse"])
def test_malformed_version_is_400(client, token):
    resp = client.get("/resource_providers", headers={"OpenStack-API-Version": f"placement {token}"})
    assert resp.status == 400
    assert f"invalid version string: {token}" in resp.error["detail"]
    assert "openstack-api-version" not in resp.headers


@pytest.mark.parametrize("token", ["0.9", "1.40", "2.0"])
def test_unsupported_version_is_406(client, token):
    resp = client.get("/resource_providers", headers={"OpenStack-API-Version": f"placement {token}"})
    assert resp.status == 406
    err = resp.error
    assert err["max_version"] == "1.39" and err["min_version"] == "1.0"
    assert "code" not in err
    assert f"Unacceptable version header: {token}" in err["detail"]


def test_no_token_is_401_but_root_is_open(client):
    assert client.get("/resource_providers", token=None).status == 401
    resp = client.get("/resource_providers", token=None, mv="1.39")
    assert resp.status == 401
    assert REQUEST_ID.match(resp.headers["x-openstack-request-id"])


def test_plain_user_is_forbidden(client):
    resp = client.get("/resource_providers", token="user", mv="1.23")
    assert resp.status == 403
    assert resp.error["detail"] == "Policy does not allow placement:resource_providers:list to be performed."
    assert resp.error["code"] == "placement.undefined_code"


def test_unknown_path_and_trailing_slash_are_404(client):
    for path in ("/nothing", "/resource_providers/"):
        resp = client.get(path)
        assert resp.status == 404
        assert resp.error["title"] == "Not Found"


def test_path_handed_over_decoded_is_still_routed(app, client, create_provider):
    """Some in-process WSGI servers (httpx's transport) put the decoded path in
    PATH_INFO instead of PEP 3333's latin-1 bytes: a 404, not a 500."""
    import falcon.testing

    from tests.conftest import call_wsgi

    uuid = create_provider("snow")["uuid"]
    for path, status in (("/resources_providers/\u2603", 404), ("/resource_providers/\u2603", 404),
                         (f"/resource_providers/{uuid}", 200)):
        environ = falcon.testing.create_environ(path="/", headers={"X-Auth-Token": "admin"})
        environ["PATH_INFO"] = path
        resp = call_wsgi(app, environ)
        assert resp.status == status, (path, resp.content)
        if status == 404:
            assert resp.error["title"] == "Not Found"


def test_method_not_allowed_lists_allow(client):
    resp = client.request("PATCH", "/resource_providers")
    assert resp.status == 405
    assert resp.headers["allow"] == "GET, POST"
    assert client.request("OPTIONS", "/").status == 405
    assert client.request("HEAD", "/resource_providers").status == 405


def test_error_code_only_from_1_23(client):
    old = client.get("/resource_providers/" + "0" * 8, mv="1.22")
    assert "code" not in old.error
    new = client.get("/resource_providers/" + "0" * 8, mv="1.23")
    assert new.error["code"] == "placement.undefined_code"
    assert new.error["request_id"] == new.headers["x-openstack-request-id"]


def test_body_checks(client):
    resp = client.post("/resource_providers", body=b'{"name": "x"}', content_type="text/plain")
    assert resp.status == 415
    assert "The media type text/plain is not supported" in resp.error["detail"]
    resp = client.post("/resource_providers", body=b"{not json", content_type="application/json")
    assert resp.status == 400 and resp.error["detail"].startswith("Malformed JSON")
    resp = client.post("/resource_providers", body=b"\xff\xfe", content_type="application/json")
    assert resp.status == 400
    resp = client.post("/resource_providers", body=b'{"name": "x"}', content_type=None)
    assert resp.status == 400
    assert resp.error["detail"] == "content-type header required when content-length > 0"


def test_accept_must_admit_json(client):
    resp = client.get("/resource_providers", headers={"Accept": "text/html"})
    assert resp.status == 406
    ok = client.get("/resource_providers", headers={"Accept": "text/html,application/xml;q=0.9,*/*;q=0.8"})
    assert ok.status == 200


def test_bad_query_string_encoding(client):
    resp = client.get("/resource_providers?name=%ff")
    assert resp.status == 400


def test_bodyless_responses_carry_no_content_type(client):
    created = client.post("/resource_providers", json={"name": "bodyless"}, mv="1.0")
    assert created.status == 201 and created.content == b""
    uuid = created.headers["location"].rsplit("/", 1)[1]
    for resp in (
        created,
        client.put("/traits/CUSTOM_BODYLESS", mv="1.6"),
        client.put("/resource_classes/CUSTOM_BODYLESS", mv="1.7"),
        client.delete(f"/resource_providers/{uuid}"),
    ):
        assert resp.status in (201, 204), resp
        assert "content-type" not in resp.headers
    assert client.get("/resource_providers").headers["content-type"] == "application/json"
