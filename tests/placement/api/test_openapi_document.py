"""The shipped OpenAPI document: current, complete, built from the code's own
schemas, and resolvable for every microversion."""
from __future__ import annotations

import orjson
import pytest
from jsonschema import Draft202012Validator

from billeting.placement import openapi
from billeting.placement.api.operator_endpoints import OPERATOR_PATHS
from billeting.placement.api.policy import OPERATION_RULES
from billeting.placement.api.routes import load_routes
from billeting.placement.api.schemas import allocations as allocation_schemas
from billeting.placement.api.schemas import resource_providers as rp_schemas
from billeting.placement.openapi import versions
from billeting.placement.openapi.document import build, render
from billeting.placement.openapi.versions import ALL_VERSIONS, RANGE, for_version

DOCUMENT = orjson.loads(openapi.document_bytes())


def test_the_shipped_file_is_what_the_code_builds():
    assert openapi.document_bytes() == render(build()), \
        "openapi.json is stale: run `python -m billeting.placement.openapi`"


def test_every_route_and_method_is_documented_and_nothing_else():
    served = {(path, method.lower()) for path, resource in load_routes()[0] for method in resource.METHODS}
    served |= {(path, "get") for path in OPERATOR_PATHS}
    documented = {(path, method) for path, item in DOCUMENT["paths"].items()
                  for method in item if method != "parameters"}
    assert documented == served


def test_policy_names_are_the_registered_rules():
    registered = {name for name, *_ in OPERATION_RULES}
    named = {op["x-openstack-policy"] for item in DOCUMENT["paths"].values()
             for method, op in item.items() if method != "parameters" and "x-openstack-policy" in op}
    assert named <= registered
    assert len(named) == len(registered)  # and every rule is used by some operation


def _schemas(node):
    """Every JSON Schema in the document (request, response, parameter, header)."""
    if isinstance(node, dict):
        if "schema" in node and isinstance(node["schema"], dict):
            yield node["schema"]
        for value in node.values():
            yield from _schemas(value)
    elif isinstance(node, list):
        for value in node:
            yield from _schemas(value)


def test_every_schema_is_valid_json_schema_2020_12():
    found = list(_schemas(DOCUMENT)) + list(DOCUMENT["components"]["schemas"].values())
    assert len(found) > 100
    for schema in found:
        Draft202012Validator.check_schema(schema)


@pytest.mark.parametrize("mv", ALL_VERSIONS, ids=lambda v: f"{v[0]}.{v[1]}")
def test_each_microversion_sees_exactly_one_shape(mv):
    view = for_version(DOCUMENT, mv)
    text = orjson.dumps(view).decode()
    # No alternative with a range survives: each was picked or dropped.
    for node in _walk(view):
        alternatives = node.get("anyOf", [])
        assert not any(isinstance(a, dict) and RANGE in a for a in alternatives), node
    assert view["info"]["x-openstack-microversion"] == f"{mv[0]}.{mv[1]}"
    assert text  # serializable


def _walk(node):
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


@pytest.mark.parametrize("mv", [(1, 0), (1, 11), (1, 12), (1, 28), (1, 34), (1, 38), (1, 39)])
def test_request_bodies_are_the_handlers_own_schemas(mv):
    """The document does not restate the request schemas: at every version it
    holds exactly what the handlers validate with."""
    view = for_version(DOCUMENT, mv)
    body = view["paths"]["/allocations/{consumer_uuid}"]["put"]["requestBody"]["content"]["application/json"]
    assert body["schema"] == allocation_schemas.put(mv)
    create = view["paths"]["/resource_providers"]["post"]["requestBody"]["content"]["application/json"]
    assert create["schema"] == rp_schemas.create(mv)


def test_version_dependent_answers():
    old, new = for_version(DOCUMENT, (1, 19)), for_version(DOCUMENT, (1, 20))
    assert set(old["paths"]["/resource_providers"]["post"]["responses"]) >= {"201"}
    assert "200" not in old["paths"]["/resource_providers"]["post"]["responses"]
    assert "200" in new["paths"]["/resource_providers"]["post"]["responses"]
    assert "201" not in new["paths"]["/resource_providers"]["post"]["responses"]
    # The rename body of PUT /resource_classes/{name} exists only from 1.2 to 1.6.
    assert "requestBody" in for_version(DOCUMENT, (1, 6))["paths"]["/resource_classes/{name}"]["put"]
    assert "requestBody" not in for_version(DOCUMENT, (1, 7))["paths"]["/resource_classes/{name}"]["put"]
    # Query parameters appear at their first microversion.
    names = lambda view: {p["name"] for p in view["paths"]["/allocation_candidates"]["get"]["parameters"]
                          if "name" in p}
    assert "same_subtree" not in names(for_version(DOCUMENT, (1, 35)))
    assert "same_subtree" in names(for_version(DOCUMENT, (1, 36)))


def test_ranges_of_one_choice_never_overlap():
    for node in _walk(DOCUMENT):
        ranges = sorted(versions.parse(a[RANGE]["min"]) + versions.parse(a[RANGE]["max"])
                        for a in node.get("anyOf", []) if isinstance(a, dict) and RANGE in a)
        for (_, _, high_major, high_minor), (low_major, low_minor, _, _) in zip(ranges, ranges[1:]):
            assert (high_major, high_minor) < (low_major, low_minor), node
