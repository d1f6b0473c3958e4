"""Errors exactly as upstream sends them (issue 11): the 405 detail names the
method, the microversion errors carry upstream's texts, and clients whose
``Accept`` does not take JSON get upstream's HTML or plain-text pages.

The expected pages below were taken from upstream Placement 16.0.0 answering
the same requests.
"""
from __future__ import annotations

import pytest

MISSING = "0e1c1c3e-2d4f-4f3e-9d8c-3d2c1b0a9f8e"
BROWSER = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
HTML = "text/html; charset=UTF-8"
PLAIN = "text/plain; charset=UTF-8"


def html_page(status: str, body: str) -> str:
    return (f"<html>\n <head>\n  <title>{status}</title>\n </head>\n <body>\n"
            f"  <h1>{status}</h1>\n  {body}\n </body>\n</html>")


# --- 405 ---------------------------------------------------------------------

@pytest.mark.parametrize("method,path,allow", [
    ("DELETE", "/resource_providers", "GET, POST"),
    ("PATCH", "/traits", "GET"),
    ("OPTIONS", "/usages", "GET"),
    ("GET", "/reshaper", "POST"),
    ("POST", f"/resource_providers/{MISSING}/usages", "GET"),
])
def test_405_names_the_method_and_lists_allowed_ones(client, method, path, allow):
    resp = client.request(method, path, mv="1.39")
    assert resp.status == 405
    assert resp.headers["allow"] == allow
    assert resp.error["detail"] == f"The method {method} is not allowed for this resource."
    assert resp.error["code"] == "placement.undefined_code"


def test_405_of_a_method_too_new_for_the_microversion_has_no_allow(client):
    resp = client.delete(f"/resource_providers/{MISSING}/inventories", mv="1.4")
    assert resp.status == 405
    assert "allow" not in resp.headers
    assert resp.error["detail"] == "The method DELETE is not allowed for this resource."
    page = client.delete(f"/resource_providers/{MISSING}/inventories", mv="1.4",
                         headers={"Accept": "text/html"})
    assert page.text == html_page("405 Method Not Allowed",
                                  "The method DELETE is not allowed for this resource. <br /><br />\n")


def test_405_page_for_a_browser(client):
    resp = client.request("PATCH", "/traits", headers={"Accept": BROWSER})
    assert resp.status == 405
    assert resp.headers["content-type"] == HTML
    assert resp.headers["allow"] == "GET"
    assert resp.text == html_page(
        "405 Method Not Allowed",
        "The method PATCH is not allowed for this resource. <br /><br />\n"
        "The method specified is not allowed for this resource.")


def test_head_error_has_no_body(client):
    resp = client.request("HEAD", "/resource_providers")
    assert resp.status == 405
    assert resp.content == b""


# --- microversion errors -----------------------------------------------------

@pytest.mark.parametrize("token,reason", [
    ("1", "Version.__new__() missing 1 required positional argument: 'minor'"),
    ("1.2.3", "invalid literal for int() with base 10: '2.3'"),
    ("pony.horse", "invalid literal for int() with base 10: 'pony'"),
    ("1.5 beta", "invalid literal for int() with base 10: '5 beta'"),
    ("1.", "invalid literal for int() with base 10: ''"),
    ("LATEST", "invalid literal for int() with base 10: 'LATEST'"),
])
def test_malformed_microversion_texts(client, token, reason):
    resp = client.get("/resource_providers", mv=token)
    assert resp.status == 400
    assert resp.error["detail"] == f"Invalid microversion: invalid version string: {token}; {reason}"
    assert "openstack-api-version" not in resp.headers


@pytest.mark.parametrize("header,version", [
    ("placement 1.5, placement", "1.5"),           # an entry without a version is no entry
    ("placement 1.5,compute 2.1", "1.5"),
    ("placement 1.x, placement 1.6", "1.6"),       # only the last placement entry is parsed
    ("placement  1.05 ", "1.5"),
    (",", "1.0"),
])
def test_microversion_header_entries(client, header, version):
    resp = client.get("/resource_providers", headers={"OpenStack-API-Version": header})
    assert resp.status == 200
    assert resp.headers["openstack-api-version"] == f"placement {version}"


def test_malformed_microversion_page(client):
    resp = client.get("/", mv="1.x", headers={"Accept": "text/plain"})
    assert resp.status == 400
    assert resp.headers["content-type"] == PLAIN
    assert resp.text == (
        "400 Bad Request\n\nThe server could not comply with the request since it is either "
        "malformed or otherwise incorrect.\n\n Invalid microversion: invalid version string: 1.x; "
        "invalid literal for int() with base 10: 'x'  ")


def test_unacceptable_microversion_page(client):
    resp = client.get("/", mv="2.0", headers={"Accept": "text/html"})
    assert resp.status == 406
    assert resp.headers["content-type"] == HTML
    assert resp.text == html_page(
        "406 Not Acceptable",
        "The resource could not be generated that was acceptable to your browser\n"
        "(content of type text/html. <br /><br />\nInvalid microversion: Unacceptable version header: 2.0")


# --- 404 and other pages -----------------------------------------------------

def test_unknown_route_page_for_a_browser(client):
    resp = client.get("/nothing", headers={"Accept": BROWSER})
    assert resp.status == 404
    assert resp.headers["content-type"] == HTML
    assert resp.text == html_page("404 Not Found", "The resource could not be found.<br /><br />\n\n\n")


def test_unknown_route_plain_page(client):
    resp = client.get("/nothing", headers={"Accept": "text/plain"})
    assert resp.text == "404 Not Found\n\nThe resource could not be found.\n\n   "
    assert resp.headers["content-type"] == PLAIN


def test_unknown_object_pages(client):
    path = f"/resource_providers/{MISSING}"
    detail = f"No resource provider with uuid {MISSING} found for delete"
    assert client.delete(path).error["detail"] == detail
    plain = client.delete(path, headers={"Accept": "text/plain"})
    assert plain.status == 404
    assert plain.text == f"404 Not Found\n\nThe resource could not be found.\n\n {detail}  "
    html = client.delete(path, headers={"Accept": BROWSER})
    assert html.text == html_page("404 Not Found", f"The resource could not be found.<br /><br />\n{detail}\n\n")


def test_page_escapes_markup(client, create_provider):
    name = "<b>x</b> & y"
    create_provider(name)
    resp = client.post("/resource_providers", json={"name": name}, headers={"Accept": "text/html"})
    assert resp.status == 409
    assert "&lt;b&gt;x&lt;/b&gt; &amp; y" in resp.text
    assert "<b>" not in resp.text


def test_multi_line_message_in_a_page_keeps_its_lines(client):
    resp = client.get("/resource_providers?colour=red", headers={"Accept": BROWSER})
    assert resp.status == 400
    assert "(&#x27;colour&#x27; was unexpected)\n\nFailed validating" in resp.text


def test_406_accept_check_page(client):
    resp = client.get("/resource_providers", headers={"Accept": "text/plain"})
    assert resp.status == 406
    assert resp.text == (
        "406 Not Acceptable\n\nThe resource could not be generated that was acceptable to your "
        "browser (content of type text/plain. \n\n Only application/json is provided")


@pytest.mark.parametrize("accept", [
    "application/json", "*/*", "", "text/html;q=0.5, application/json", "application/*",
])
def test_clients_that_take_json_get_json(client, accept):
    resp = client.get("/nothing", headers={"Accept": accept})
    assert resp.headers["content-type"] == "application/json"
    assert resp.error["detail"] == "The resource could not be found."


def test_unparsable_accept_counts_as_absent_for_the_check_and_html_for_errors(client):
    # As upstream: the Accept check lets it through, the error page is HTML.
    resp = client.get(f"/resource_providers/{MISSING}", headers={"Accept": "garbage;;q=x"})
    assert resp.status == 404
    assert resp.headers["content-type"] == HTML


# --- 401 (noauth2) ---------------------------------------------------------------

def test_missing_token_pages(client):
    html = client.get("/resource_providers", token=None, headers={"Accept": "text/html"})
    assert html.status == 401
    assert html.headers["content-type"] == HTML
    assert "<title>401 Unauthorized</title>" in html.text
    body = client.get("/resource_providers", token=None)
    assert body.status == 401
    assert body.json["title"] == "Unauthorized"
    assert body.json["code"] == "401 Unauthorized"
    assert body.json["message"].startswith("This server could not verify that you are authorized")
