"""Schema-driven fuzzing of the scheduler API: schemathesis sends requests
generated from the API's OpenAPI document (built from the very JSON schemas
the handlers validate with) through the whole WSGI stack. Every answer must
be a non-5xx whose status the document lists, and every error the service's
error document with a ``billeting.`` code.

Random path values only find 404s, so most cases use the names of a small
seeded fleet (hosts, racks and a row, a zone, a server group).
``BILLETING_FUZZ_SCALE=N`` multiplies the examples for a deeper run by hand.
"""
from __future__ import annotations

import os

import orjson
import pytest
import schemathesis
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import content_type_conformance, status_code_conformance

from billeting.scheduler.api import openapi
from tests.schedsvc.conftest import new_uuid
from tests.schema_fuzz import fuzz_every_operation

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance]
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
    return {"uuid": [group.json["uuid"], *aggregates, new_uuid()], "level": ["rack", "row", "room", "cell"],
            "name": [*HOSTS, "r1", "r2", "w1", "az1", "nowhere"]}


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
    failures = fuzz_every_operation(
        schema, path_values=values, examples=EXAMPLES, prepare=prepare, checks=CHECKS, check=_error_document,
        variant=st.sampled_from(["admin"] * 8 + [None, "someone:p1"]),
        order=lambda op: (rank[op.method.upper()], op.label))
    assert not failures, "\n".join(f"{label}: {text}" for label, text in failures.items())


def test_the_document_is_served_without_a_token(api_as):
    resp = api_as(None).get("/openapi.json")
    assert resp.status == 200 and resp.json["openapi"].startswith("3.1")
    assert set(resp.json["paths"]) >= {"/selections", "/server_groups", "/topology/{level}/{name}"}
    assert api_as(None).post("/openapi.json", json={}).status == 405
