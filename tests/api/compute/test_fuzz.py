"""Schema-driven fuzzing of the compute API: schemathesis generates bodies
from the API's own JSON schemas (and free-form bodies and query strings
where the API takes any) and sends them through the whole Falcon app with
a real control plane behind it. Nothing may answer 5xx; every error is in
Nova's format (``{"<kind>": {"code": N, "message": "…"}}``).

Every call the API serves is in its OpenAPI document (``billeting.api.
compute.openapi``) and must answer with a status, content type and body the
document lists. The test narrows some request bodies and query lists (a
flavor and image that exist, so that the build path is reached); the server,
flavor, group, aggregate, ... ids of a seeded plane are the path values.
``BILLETING_FUZZ_SCALE=N`` multiplies the examples."""
from __future__ import annotations

import copy
import os

import orjson
import pytest
import schemathesis
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from billeting.api.compute import app, openapi, schemas
from tests.schema_fuzz import Tally, fuzz_every_operation

EXAMPLES = 15 * int(os.environ.get("BILLETING_FUZZ_SCALE", "1"))

pytestmark = pytest.mark.skipif(
    os.environ.get("BILLETING_TEST_DB", "sqlite") == "mysql",
    reason="run on SQLite and PostgreSQL; MariaDB adds CI time for code paths the suite already runs there")

_ANY = {}  # any JSON value at all
_ACTION = {"anyOf": [
    {"type": "object", "properties": {"resize": {"type": "object", "properties": {
        "flavorRef": {"enum": ["1", "2", "nope"]}, "OS-DCF:diskConfig": {"type": "string"}}}}, "required": ["resize"], "additionalProperties": False},
    {"type": "object", "properties": {"migrate": {"type": ["object", "null"], "properties": {
        "host": {"type": ["string", "null"]}}}}, "required": ["migrate"], "additionalProperties": False},
    {"type": "object", "properties": {"os-migrateLive": {"type": "object", "properties": {
        "host": {"type": ["string", "null"]}, "block_migration": {"type": ["string", "boolean"]}}}},
     "required": ["os-migrateLive"], "additionalProperties": False},
    {"type": "object", "properties": {"evacuate": {"type": "object", "properties": {
        "host": {"type": "string"}}}}, "required": ["evacuate"], "additionalProperties": False},
    {"type": "object", "properties": {"confirmResize": {"type": "null"}}, "required": ["confirmResize"], "additionalProperties": False},
    {"type": "object", "properties": {"revertResize": {"type": "null"}}, "required": ["revertResize"], "additionalProperties": False},
    {"type": "object", "minProperties": 1, "maxProperties": 1},  # any action name, any argument
]}


def _query(*names: str) -> list[dict]:
    return [{"name": n, "in": "query", "required": False, "schema": {"type": "string"}} for n in names]


def _path(*names: str) -> list[dict]:
    return [{"name": n, "in": "path", "required": True, "schema": {"type": "string", "minLength": 1}}
            for n in names]


def _op(body=None, parameters=()) -> dict:
    """What the test puts in place of a described call's request (its answers stay the document's)."""
    op: dict = {}
    if body is not None:
        op["requestBody"] = {"required": True, "content": {"application/json": {"schema": body}}}
    if parameters:
        op["parameters"] = list(parameters)
    return op


_SIMPLE_NAME = {"type": "string", "pattern": "^[a-z][a-z0-9-]{0,20}$"}


def _server_group_create() -> dict:
    """SERVER_GROUP_CREATE, or a body of either microversion's shape (the
    generator alone seldom gives exactly one of policy and policies)."""
    schema = copy.deepcopy(schemas.SERVER_GROUP_CREATE)
    group = schema["properties"]["server_group"]
    group["properties"]["name"] = _SIMPLE_NAME
    shapes = []
    for kept, required in ((("name", "policy"), ["name", "policy"]), (("name", "policies"), ["name", "policies"])):
        shape = copy.deepcopy(schema)
        inner = shape["properties"]["server_group"]
        inner["properties"] = {k: v for k, v in inner["properties"].items() if k in kept}
        inner["required"] = required
        shapes.append(shape)
    return {"anyOf": [schema, *shapes]}


def _extra_spec_one() -> dict:
    """The one spec the path's key names, as the body must (a body generated
    from EXTRA_SPEC_ONE names another key: a 400 every time)."""
    return {"type": "object", "properties": {"hw:cpu_policy": {"enum": ["dedicated", "shared", "bogus", 1, True]}},
            "required": ["hw:cpu_policy"], "additionalProperties": False}


def _server_create() -> dict:
    """SERVER_CREATE with a flavor and image that exist and no networks, so
    that most generated requests get past the lookups into the build path."""
    schema = copy.deepcopy(schemas.SERVER_CREATE)
    server = schema["properties"]["server"]
    server["properties"].update({"flavorRef": {"enum": ["1", "2"]}, "imageRef": {"enum": ["cirros"]},
                                 "networks": {"enum": ["none"]}, "name": _SIMPLE_NAME,
                                 "availability_zone": {"enum": ["nova", "elsewhere"]}})
    server["required"] = ["name", "flavorRef", "imageRef", "networks"]
    return schema


def _aggregate_create() -> dict:
    schema = copy.deepcopy(schemas.AGGREGATE_CREATE)
    schema["properties"]["aggregate"]["properties"]["name"] = _SIMPLE_NAME
    return schema


_HOST = {"type": "object", "properties": {"host": {"enum": ["host1", "nope", ""]}}, "required": ["host"]}
_AGGREGATE_ACTION = {"anyOf": [
    {"type": "object", "properties": {"add_host": _HOST}, "required": ["add_host"]},
    {"type": "object", "properties": {"remove_host": _HOST}, "required": ["remove_host"]},
    {"type": "object", "properties": {"set_metadata": schemas.AGGREGATE_ACTIONS["set_metadata"]},
     "required": ["set_metadata"]},
]}

DOCUMENT = {
    "openapi": "3.1.0",
    "info": {"title": "compute API, the requests the test narrows", "version": "2.90"},
    "paths": {
        "/v2.1/servers": {"post": _op(_server_create())},
        "/v2.1/servers/detail": {"get": _op(parameters=_query(
            "name", "status", "limit", "marker", "changes-since", "changes-before", "host", "flavor", "image",
            "all_tenants", "project_id", "deleted", "availability_zone", "sort_key", "sort_dir"))},
        "/v2.1/servers/{server_id}": {"get": _op(parameters=_path("server_id")),
                                      "delete": _op(parameters=_path("server_id"))},
        "/v2.1/servers/{server_id}/action": {"post": _op(_ACTION, _path("server_id"))},
        "/v2.1/servers/{server_id}/os-instance-actions": {"get": _op(parameters=_path("server_id") + _query(
            "limit", "marker", "changes-since", "changes-before"))},
        "/v2.1/flavors": {"post": _op(schemas.FLAVOR_CREATE)},
        "/v2.1/flavors/detail": {"get": _op(parameters=_query("minRam", "minDisk", "limit", "marker",
                                                              "is_public"))},
        "/v2.1/flavors/{flavor_id}/action": {"post": _op(schemas.FLAVOR_ACTION, _path("flavor_id"))},
        "/v2.1/flavors/{flavor_id}/os-extra_specs": {"post": _op(schemas.EXTRA_SPECS, _path("flavor_id"))},
        "/v2.1/flavors/{flavor_id}/os-extra_specs/{key}": {"put": _op(_extra_spec_one(),
                                                                      _path("flavor_id", "key"))},
        "/v2.1/os-server-groups": {"post": _op(_server_group_create()),
                                   "get": _op(parameters=_query("limit", "offset", "all_projects"))},
        "/v2.1/os-migrations": {"get": _op(parameters=_query(
            "host", "status", "migration_type", "instance_uuid", "user_id", "project_id", "limit", "marker",
            "changes-since"))},
        "/v2.1/os-services": {"get": _op(parameters=_query("host", "binary"))},
        "/v2.1/os-availability-zone": {"get": _op()},
        "/v2.1/limits": {"get": _op(parameters=_query("tenant_id", "reserved"))},
        "/v2.1/os-aggregates": {"get": _op(), "post": _op(_aggregate_create())},
        "/v2.1/os-aggregates/{aggregate_id}": {"get": _op(parameters=_path("aggregate_id")),
                                               "put": _op(schemas.AGGREGATE_UPDATE, _path("aggregate_id")),
                                               "delete": _op(parameters=_path("aggregate_id"))},
        "/v2.1/os-aggregates/{aggregate_id}/action": {"post": _op(_AGGREGATE_ACTION, _path("aggregate_id"))},
        "/v2.1/os-availability-zone/detail": {"get": _op()},
        "/v2.1/os-services/{service_id}": {"put": _op(schemas.SERVICE_UPDATE, _path("service_id")),
                                           "delete": _op(parameters=_path("service_id"))},
        "/v2.1/os-hypervisors/detail": {"get": _op(parameters=_query("limit", "marker",
                                                                     "hypervisor_hostname_pattern", "with_servers"))},
    },
}



def _with_the_document(test_doc: dict) -> dict:
    """The API's document, with the test's narrowed bodies and query lists."""
    merged = copy.deepcopy(openapi.document())
    for path, methods in test_doc["paths"].items():
        for method, op in methods.items():
            described = merged["paths"][path][method]  # (every call the test sends is described)
            for key in ("requestBody", "parameters"):
                if key in op:
                    described[key] = op[key]
    return merged


VERSIONS = st.sampled_from(["2.90"] * 4 + ["2.1", "2.53", "2.64", "2.47", "2.87"])
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


def _deletes_last(operation) -> tuple:
    """The seeded objects deleted last, and a flavor's extra spec before the flavor."""
    deletes = operation.method.lower() == "delete"
    return deletes, -operation.path.count("/") if deletes else 0


class _Recorder:
    """Stands for the app in ``app._routes``: the templates and their handlers."""

    def __init__(self) -> None:
        self.routes: list[tuple[str, object, str]] = []

    def add_route(self, template: str, resource, suffix: str = "") -> None:
        self.routes.append((template, resource, f"_{suffix}" if suffix else ""))


def _nova_error(response) -> None:
    if response.status_code >= 400:
        (kind, error), = orjson.loads(response.content).items()
        assert error["code"] == response.status_code and isinstance(error["message"], str), response.content


def test_no_input_makes_the_compute_api_fail(plane_factory):
    plane = plane_factory()
    plane.flavor()
    plane.flavor(fid="2", name="bigger", ram=4096, vcpus=4, disk=40)
    servers = [plane.boot(name=f"vm{i}") for i in range(2)]
    services = plane.call("GET", "/v2.1/os-services").json["services"]
    actions = plane.call("GET", f"/v2.1/servers/{servers[0]}/os-instance-actions").json["instanceActions"]
    group = plane.call("POST", "/v2.1/os-server-groups", {"server_group": {
        "name": "fuzzed", "policy": "anti-affinity"}}).json["server_group"]["id"]
    assert plane.call("POST", "/v2.1/flavors", {"flavor": {
        "name": "private", "id": "3", "ram": 512, "vcpus": 1, "disk": 1,
        "os-flavor-access:is_public": False}}).status_code == 200
    assert plane.call("POST", "/v2.1/flavors/1/os-extra_specs", {"extra_specs": {
        "hw:cpu_policy": "dedicated"}}).status_code == 200
    values = {"server_id": servers + ["nope"], "flavor_id": ["1", "3", "nope"],
              # (the access calls: the private flavor first, or draws seldom reach it)
              ("/v2.1/flavors/{flavor_id}/os-flavor-access", "flavor_id"): ["3", "1"],
              ("/v2.1/flavors/{flavor_id}/action", "flavor_id"): ["3", "1", "nope"],
              ("/v2.1/flavors/{flavor_id}/os-extra_specs/{key}", "flavor_id"): ["1", "nope"],
              ("/v2.1/flavors/{flavor_id}/os-extra_specs/{key}", "key"): ["hw:cpu_policy", "x"],
              "request_id": [a["request_id"] for a in actions] + ["nope"], "migration_id": ["1", "nope"],
              "group_id": [group, "nope"],
              "key": ["hw:cpu_policy", "resources:VCPU", "trait:HW_CPU_X86_AVX2", "x"],
              "service_id": [s["id"] for s in services][:2] + ["nope"],
              "aggregate_id": [str(plane.call("POST", "/v2.1/os-aggregates", {"aggregate": {
                  "name": "fuzzed", "availability_zone": "az1"}}).json["aggregate"]["id"]), "2", "nope"],
              "hypervisor_id": [h["id"] for h in plane.call("GET", "/v2.1/os-hypervisors").json["hypervisors"]]
              + ["1", "nope"]}
    schema = schemathesis.openapi.from_dict(_with_the_document(DOCUMENT))
    schema.app = plane.client.app

    def prepare(case, version):
        case.headers = {"X-Auth-Token": "admin", "OpenStack-API-Version": f"compute {version}"}

    tally = Tally()
    failures = fuzz_every_operation(schema, path_values=values, examples=EXAMPLES, variant=VERSIONS,
                                    prepare=prepare, checks=CHECKS, check=_nova_error, tally=tally,
                                    order=_deletes_last)
    assert not failures, "\n".join(f"{label}: {text}" for label, text in failures.items())
    # The described answers were met, not only errors.
    for label, status in [("POST /v2.1/servers", 202), ("GET /v2.1/servers/detail", 200),
                          ("GET /v2.1/servers/{server_id}", 200), ("GET /v2.1/flavors/{flavor_id}", 200),
                          ("GET /v2.1/os-hypervisors/{hypervisor_id}", 200), ("GET /v2.1/os-services", 200),
                          ("GET /v2.1/os-availability-zone/detail", 200),
                          ("GET /v2.1/servers/{server_id}/os-instance-actions/{request_id}", 200),
                          ("GET /v2.1/os-server-groups/{group_id}", 200), ("GET /v2.1/limits", 200),
                          ("GET /v2.1/flavors/{flavor_id}/os-flavor-access", 200),
                          ("GET /v2.1/os-aggregates/{aggregate_id}", 200), ("GET /", 200),
                          ("PUT /v2.1/flavors/{flavor_id}/os-extra_specs/{key}", 200),
                          ("POST /v2.1/os-server-groups", 200)]:
        assert tally.answered(label, status), (label, status, str(tally.statuses.get(label)))


def test_the_document_describes_every_call_the_api_serves():
    served = _Recorder()
    app._routes(served, "/v2.1", None)
    described = {(path, method) for path, methods in openapi.document()["paths"].items() for method in methods}
    missing = {(t, m) for t, resource, suffix in served.routes for m in ("get", "post", "put", "delete")
               if hasattr(resource, f"on_{m}{suffix}") and (t, m) not in described}
    assert not missing
