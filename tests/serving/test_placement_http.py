"""``billeting serve`` at the HTTP level: what the server itself answers is in
the Placement error format, chunked bodies work, truncated ones write
nothing, and a long candidates query line is served. Real server, test
database of whichever backend ``BILLETING_TEST_DB`` names."""
from __future__ import annotations

import os_traits
import pytest

from tests.concurrency.serve import Http, running_server
from tests.serving.rawhttp import exchange, port_of
from tests.serving.refusals import cases, send

pytestmark = pytest.mark.slow

HEADERS = b"Host: t\r\nX-Auth-Token: admin\r\nOpenStack-API-Version: placement 1.39\r\n"


@pytest.fixture(scope="module")
def server(db_url, engine):
    with running_server(db_url, workers=2, args=("--max-body-size", "20000")) as running:
        yield running


@pytest.fixture
def provider(server, engine) -> str:
    http = Http(server.url)
    status, body = http.request("POST", "/resource_providers", {"name": "front"})
    assert status == 200, body
    http.close()
    return body["uuid"]


def _placement_error(answer, status: int) -> dict:
    assert answer.status == status, answer
    err = answer.error  # checks the {"errors": [one]} shape and application/json
    assert err["request_id"].startswith("req-")
    assert answer.headers["x-openstack-request-id"] == err["request_id"]
    assert "code" not in err  # no microversion was negotiated for a request never parsed
    return err


@pytest.mark.parametrize("raw,status", [
    (b"GET /resource_providers HTTP/1.1 junk\r\n" + HEADERS + b"\r\n", 400),
    (b"P@ST /resource_providers HTTP/1.1\r\n" + HEADERS + b"\r\n", 400),
    (b"POST /resource_providers HTTP/1.1\r\n" + HEADERS + b"Content-Length: ten\r\n\r\n", 400),
    (b"POST /resource_providers HTTP/1.1\r\n" + HEADERS + b"Content-Length: 20001\r\n\r\n", 413),
    (b"GET /resource_providers HTTP/1.1\r\n" + HEADERS + b"X-Pad: " + b"p" * 140_000 + b"\r\n\r\n", 431),
    (b"GET /" + b"r" * 140_000 + b" HTTP/1.1\r\n" + HEADERS + b"\r\n", 414),
])
def test_errors_of_the_http_server_are_placement_errors(server, raw, status):
    err = _placement_error(exchange(port_of(server), raw), status)
    if b"Content-Length: ten" in raw:
        assert "content-length header must be an integer" in err["detail"]  # upstream's words


@pytest.mark.parametrize("case", cases(20000), ids=lambda c: c.name)
def test_every_refusal_of_the_http_server_is_a_placement_error(server, case):
    _placement_error(send(port_of(server), case), case.status)


def test_a_truncated_body_is_refused_and_writes_nothing(server, provider):
    body = b'{"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 8}}}'
    raw = (f"PUT /resource_providers/{provider}/inventories HTTP/1.1\r\n".encode() + HEADERS
           + b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % (len(body) + 10) + body)
    err = _placement_error(exchange(port_of(server), raw, half_close=True, method="PUT"), 400)
    assert "ended after" in err["detail"]
    status, inventories = Http(server.url).request("GET", f"/resource_providers/{provider}/inventories")
    assert status == 200 and inventories == {"resource_provider_generation": 0, "inventories": {}}


def test_a_chunked_body_is_read(server, provider):
    body = b'{"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 8}}}'
    chunked = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (body[:10], body[10:])) + b"0\r\n\r\n"
    raw = (f"PUT /resource_providers/{provider}/inventories HTTP/1.1\r\n".encode() + HEADERS
           + b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked)
    answer = exchange(port_of(server), raw, method="PUT")
    assert answer.status == 200, answer
    assert answer.json["inventories"]["VCPU"]["total"] == 8


def test_a_64kb_candidates_query_with_hundreds_of_traits_is_answered(server, provider):
    http = Http(server.url)
    status, _ = http.request("PUT", f"/resource_providers/{provider}/inventories",
                             {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 8}}})
    assert status == 200
    status, _ = http.request("PUT", f"/resource_providers/{provider}/traits",
                             {"resource_provider_generation": 1, "traits": ["HW_CPU_X86_AVX"]})
    assert status == 200
    any_trait = "in:" + ",".join(sorted(os_traits.get_traits()))  # ~380 standard traits
    query = "resources=VCPU:1" + f"&required={any_trait}" * 8
    assert len(query) > 64 * 1024
    status, body = http.request("GET", f"/allocation_candidates?{query}")
    assert status == 200, body
    assert [list(ar["allocations"]) for ar in body["allocation_requests"]] == [[provider]]
