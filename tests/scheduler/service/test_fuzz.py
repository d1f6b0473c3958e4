"""Schema-driven fuzzing of the scheduler API: schemathesis sends requests
generated from the API's OpenAPI document (built from the very JSON schemas
the handlers validate with) through the whole WSGI stack. Every answer must
be a non-5xx whose status, content type, headers and body the document
describes (the answer bodies' schemas come from the msgspec types the
handlers encode), and every error the service's error document with a
``billeting.`` code.

Random path values only find 404s, so most cases use the names of a small
seeded fleet (hosts, racks and a row, a zone, a server group), and
``POST /selections`` is also sent bodies that place (201), rank (200, dry
run) and find no host (409 with an explanation).
``BILLETING_FUZZ_SCALE=N`` multiplies the examples for a deeper run by hand.
"""
from __future__ import annotations

import os

import orjson
import pytest
import schemathesis
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from billeting.scheduler.api import openapi
from tests.scheduler.service.conftest import new_uuid, simple_request
from tests.schema_fuzz import Tally, fuzz_every_operation

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_headers_conformance,
          response_schema_conformance]
EXAMPLES = 20 * int(os.environ.get("BILLETING_FUZZ_SCALE", "1"))

pytestmark = pytest.mark.skipif(
    os.environ.get("BILLETING_TEST_DB", "sqlite") == "mysql",
    reason="run on SQLite and PostgreSQL (as Placement's fuzz test); MariaDB adds CI time for code paths "
           "the rest of the suite already runs there")

HOSTS = ("h1", "h2", "h3", "h4")


def seed(api, fleet) -> dict[str, list[str]]:
    for name in HOSTS:
        fleet.add(name)
    assert api.put("/topology/rack/r1", json={"hosts": ["h1", "h2"]}).status == 201
    assert api.put("/topology/rack/r2", json={"hosts": ["h3"]}).status == 201
    assert api.put("/topology/row/w1", json={"members": ["r1", "r2"]}).status == 201
    assert api.put("/availability_zones/az1", json={"hosts": ["h4"]}).status == 201
    group = api.post("/server_groups", json={"name": "g", "policy": "anti-affinity", "scope": "rack"})
    assert group.status == 201, group
    aggregates = [api.get("/availability_zones/az1").json["aggregate"]]
    assert api.put("/hosts/h1", json={"service_host": "svc1", "heartbeat": True, "num_instances": 2,
                                      "supported_instances": [["x86_64", "kvm", "hvm"]]}).status == 201
    names = [*HOSTS, "r1", "r2", "w1", "az1", "nowhere"]
    return {"uuid": [group.json["uuid"], *aggregates, new_uuid()], "level": ["rack", "row", "room", "cell"],
            "name": names, ("/hosts/{name}", "name"): ["h1", "h2", "nowhere"],
            ("/availability_zones/{name}", "name"): ["az1", "az2", "nowhere"],
            ("/topology/{level}/{name}", "level"): ["rack", "row", "room"],
            ("/topology/{level}/{name}", "name"): ["r1", "r2", "w1", "r9"],
            ("/server_groups/{uuid}", "uuid"): [group.json["uuid"], new_uuid()],
            ("/aggregates/{uuid}", "uuid"): [*aggregates, new_uuid()]}


def selection_bodies(group: str) -> list[dict]:
    """Requests that reach the scheduler: placed (with alternates, in a group, in
    the Nova form), ranked (dry run), and one no host can take."""
    return [simple_request(new_uuid(), new_uuid(), alternates=2),
            simple_request(new_uuid(), dry_run=True),
            simple_request(new_uuid(), server_group=group),
            simple_request(new_uuid(), server_group=group, dry_run=True),
            {"instance_uuids": [new_uuid()], "flavor": {"vcpus": 1, "memory_mb": 256, "root_gb": 1},
             "project_id": "p1", "user_id": "u1"},
            simple_request(new_uuid(), vcpu=1000)]


def _error_document(response) -> None:
    if response.status_code >= 400:
        errors = orjson.loads(response.content)["errors"]
        assert errors[0]["status"] == response.status_code and errors[0]["code"].startswith("billeting."), \
            response.content


def test_every_operation_answers_within_the_document(api, fleet):
    values = seed(api, fleet)
    schema = schemathesis.openapi.from_dict(orjson.loads(openapi.document_bytes()))
    schema.app = api.app

    def prepare(case, token):
        headers = {k: v for k, v in (case.headers or {}).items() if k.lower() != "x-auth-token"}
        if token is not None:
            headers["X-Auth-Token"] = token
        case.headers = headers

    # reads first, then writes, then deletes: no operation only ever meets deleted objects
    rank = {"GET": 0, "PUT": 1, "POST": 1, "DELETE": 2}
    tally = Tally()
    failures = fuzz_every_operation(
        schema, path_values=values, examples=EXAMPLES, prepare=prepare, checks=CHECKS, check=_error_document,
        variant=st.sampled_from(["admin"] * 8 + [None, "someone:p1"]),
        order=lambda op: (rank[op.method.upper()], op.label),
        bodies={"POST /selections": selection_bodies(values["uuid"][0])}, tally=tally)
    assert not failures, "\n".join(f"{label}: {text}" for label, text in failures.items())
    # The answers the document describes were met, not only errors.
    for label, status in [("POST /selections", 201), ("POST /selections", 200), ("POST /selections", 409),
                          ("GET /hosts/{name}", 200), ("GET /topology/{level}/{name}", 200),
                          ("GET /availability_zones/{name}", 200), ("GET /server_groups/{uuid}", 200)]:
        assert tally.answered(label, status), (label, status, str(tally.statuses))


def test_the_document_is_served_without_a_token(api_as):
    resp = api_as(None).get("/openapi.json")
    assert resp.status == 200 and resp.json["openapi"].startswith("3.1")
    assert set(resp.json["paths"]) >= {"/selections", "/server_groups", "/topology/{level}/{name}"}
    assert api_as(None).post("/openapi.json", json={}).status == 405


def test_every_answer_body_is_described():
    """No bare ``object``: each body is a schema derived from a msgspec type (or this document's own)."""
    document = openapi.document()
    for path, methods in document["paths"].items():
        for method, operation in methods.items():
            for status, response in operation["responses"].items():
                if status == "204":
                    assert "content" not in response, (method, path)
                    continue
                if (path, status) == ("/metrics", "200"):
                    assert response["content"] == {"text/plain": {"schema": {"type": "string"}}}
                    continue
                schema = response["content"]["application/json"]["schema"]
                assert "$ref" in schema or path == "/openapi.json", (method, path, status)
                if "$ref" in schema:
                    assert schema["$ref"].rsplit("/", 1)[1] in document["components"]["schemas"]
    assert "200" in document["paths"]["/selections"]["post"]["responses"]  # the dry run
