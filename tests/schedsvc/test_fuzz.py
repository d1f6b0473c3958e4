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
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import content_type_conformance, status_code_conformance

from billeting.scheduler.api import openapi
from tests.schedsvc.conftest import new_uuid

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
    failures: dict[str, str] = {}
    order = {"GET": 0, "PUT": 1, "POST": 1, "DELETE": 2}
    operations = sorted((r.ok() for r in schema.get_all_operations()),
                        key=lambda op: (order[op.method.upper()], op.label))
    for operation in operations:
        names = [p.name for p in operation.path_parameters]
        seeded = st.fixed_dictionaries({n: st.sampled_from(values[n]) for n in names}).flatmap(
            lambda params: operation.as_strategy(path_parameters=params or None))
        strategy = st.one_of(operation.as_strategy(), seeded, seeded) if names else operation.as_strategy()

        @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
                  phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
        @given(case=strategy, token=st.sampled_from(["admin"] * 8 + [None, "someone:p1"]))
        def run(case, token):
            headers = {k: v for k, v in (case.headers or {}).items() if k.lower() != "x-auth-token"}
            if token is not None:
                headers["X-Auth-Token"] = token
            case.headers = headers
            response = case.call()
            try:
                case.validate_response(response, checks=CHECKS)
                _error_document(response)
            except AssertionError as exc:
                failures.setdefault(operation.label, f"{case.method} {case.formatted_path} "
                                                     f"{case.body!r:.300}: {exc}"[:2000])

        run()
    assert not failures, "\n".join(f"{label}: {text}" for label, text in failures.items())


def test_the_document_is_served_without_a_token(api_as):
    resp = api_as(None).get("/openapi.json")
    assert resp.status == 200 and resp.json["openapi"].startswith("3.1")
    assert set(resp.json["paths"]) >= {"/selections", "/server_groups", "/topology/{level}/{name}"}
    assert api_as(None).post("/openapi.json", json={}).status == 405
