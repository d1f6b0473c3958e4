"""The scheduler API described as an OpenAPI 3.1 document, built from the
same JSON schemas the handlers validate bodies with (so the two cannot
drift), served at ``GET /openapi.json`` and used by the schema-driven fuzz
test. Every answer body is described by a schema derived from the msgspec
type the handler encodes (``bodies``); every error is the service's error
document, always with a ``code``."""
from __future__ import annotations

import functools

import msgspec
import orjson

from billeting.scheduler.api import bodies, schemas
from billeting.scheduler.service.views import AggregateView, DomainView, GroupView, HostView, TopologyView, ZoneView

_REF = "#/components/schemas/{name}"

_PATH_TEXT = {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[^/]+$"}
_THIS_DOCUMENT = {"type": "object", "required": ["openapi", "info", "paths", "components"]}

# (path, method) -> (summary, request body schema or None, {success status: answer body type or None})
_OPERATIONS: dict[tuple[str, str], tuple[str, dict | None, dict[int, object]]] = {
    ("/", "get"): ("The API's version document (no token needed)", None, {200: bodies.VersionList}),
    ("/openapi.json", "get"): ("This document (no token needed)", None, {200: _THIS_DOCUMENT}),
    ("/metrics", "get"): ("Prometheus metrics, text exposition format (no token needed)", None,
                          {200: {"type": "string"}}),
    ("/selections", "post"): ("Place instances: per instance [chosen, alternate, …], the chosen host claimed "
                              "(201). With `dry_run`, the hosts ranked and nothing claimed (200). "
                              "A body with `flavor` is the Nova form (NovaSelections).",
                              {"oneOf": [schemas.SELECTIONS, schemas.NOVA_SELECTIONS]},
                              {201: bodies.SelectionList, 200: bodies.DryRun}),
    ("/server_groups", "get"): ("Server groups (`project_id` narrows)", None, {200: bodies.ServerGroupList}),
    ("/server_groups", "post"): ("Create a server group", schemas.SERVER_GROUP, {201: GroupView}),
    ("/server_groups/{uuid}", "get"): ("One server group", None, {200: GroupView}),
    ("/server_groups/{uuid}", "delete"): ("Delete a server group", None, {204: None}),
    ("/topology", "get"): ("Every level and its domains", None, {200: TopologyView}),
    ("/topology/{level}", "get"): ("The domains of one level", None, {200: TopologyView}),
    ("/topology/{level}/{name}", "get"): ("One domain", None, {200: DomainView}),
    ("/topology/{level}/{name}", "put"): ("Define a domain from hosts (lowest level) or from the domains "
                                          "one level down", schemas.DOMAIN, {200: DomainView, 201: DomainView}),
    ("/topology/{level}/{name}", "delete"): ("Remove a domain", None, {204: None}),
    ("/availability_zones", "get"): ("Availability zones", None, {200: bodies.ZoneList}),
    ("/availability_zones/{name}", "get"): ("One availability zone", None, {200: ZoneView}),
    ("/availability_zones/{name}", "put"): ("Define a zone from hosts", schemas.ZONE,
                                            {200: ZoneView, 201: ZoneView}),
    ("/availability_zones/{name}", "delete"): ("Remove a zone", None, {204: None}),
    ("/aggregates", "get"): ("Aggregates with metadata", None, {200: bodies.AggregateList}),
    ("/aggregates/{uuid}", "get"): ("One aggregate", None, {200: AggregateView}),
    ("/aggregates/{uuid}", "put"): ("Set an aggregate's name and metadata", schemas.AGGREGATE,
                                    {200: AggregateView, 201: AggregateView}),
    ("/aggregates/{uuid}", "delete"): ("Forget an aggregate's metadata", None, {204: None}),
    ("/hosts", "get"): ("Host records", None, {200: bodies.HostList}),
    ("/hosts/{name}", "get"): ("One host record (with `record`, the scheduler's whole view of the host, when "
                               "Placement has it)", None, {200: HostView}),
    ("/hosts/{name}", "put"): ("Report a host (service host, cell, enabled/up, counters, heartbeat)",
                               schemas.HOST_REPORT, {200: HostView, 201: HostView}),
    ("/hosts/{name}", "delete"): ("Forget a host record", None, {204: None}),
}

_PATH_PARAMETERS = {
    "uuid": {"type": "string", "format": "uuid"},
    "level": schemas.LEVEL,
    "name": _PATH_TEXT,
}


_ERRORS = {
    "400": "the body or the query is not valid (`billeting.invalid` and more precise codes)",
    "401": "no token, or a bad one",
    "403": "the policy does not allow the call to this caller",
    "404": "no such object, level or route",
    "409": "a conflict (name taken, in use, concurrent change); `billeting.no_valid_host` carries an "
           "`explanation` of why no host was offered",
    "4XX": "refused at the HTTP level (method, media type, body size): the detail says why",
    "503": "Placement or the API database could not be reached; retrying finishes the job",
}
_OPEN_ERRORS = ("405", "4XX")  # ``GET /`` and this document take no token and no input


def _ref(kind) -> dict:
    return {"$ref": f"#/components/schemas/{kind.__name__}"}


def _json(schema: dict) -> dict:
    return {"content": {"application/json": {"schema": schema}}}


def _operation(path: str, method: str, summary: str, body: dict | None, answers: dict[int, object]) -> dict:
    responses: dict = {}
    for status, kind in sorted(answers.items()):
        if kind is None:
            responses[str(status)] = {"description": "done, no body"}
        else:
            responses[str(status)] = {"description": "done", **_json(kind if isinstance(kind, dict) else _ref(kind))}
    if path == "/metrics":
        responses["200"] = {"description": "done", "content": {"text/plain": {"schema": {"type": "string"}}}}
    open_call = path in ("/", "/openapi.json", "/metrics")
    for status in (_OPEN_ERRORS if open_call else _ERRORS):
        responses[status] = {"description": _ERRORS.get(status, "not allowed"), **_json(_ref(bodies.Error))}
    operation_id = method + "".join(ch if ch.isalnum() else "_" for ch in path).rstrip("_")
    operation: dict = {"summary": summary, "operationId": operation_id, "responses": responses}
    names = [part[1:-1] for part in path.split("/") if part.startswith("{")]
    parameters = [{"name": name, "in": "path", "required": True, "schema": _PATH_PARAMETERS[name]} for name in names]
    if (path, method) == ("/server_groups", "get"):
        parameters.append({"name": "project_id", "in": "query", "required": False,
                           "schema": {"type": "string", "maxLength": 255}})
    if parameters:
        operation["parameters"] = parameters
    if not open_call:
        operation["security"] = [{"token": []}]
    if body is not None:
        operation["requestBody"] = {"required": True, "content": {"application/json": {"schema": body}}}
    return operation


def _answer_schemas() -> dict[str, dict]:
    """The answer bodies' schemas, from their msgspec types. Each object is
    closed (``additionalProperties: false``): the encoder writes a struct's
    fields and nothing else, so an undeclared key in an answer is a bug."""
    _, components = msgspec.json.schema_components(bodies.RESPONSES, ref_template=_REF)
    for schema in components.values():
        if schema.get("type") == "object" and "properties" in schema:
            schema.setdefault("additionalProperties", False)
    return components


@functools.cache
def document() -> dict:
    paths: dict[str, dict] = {}
    for (path, method), (summary, body, answers) in _OPERATIONS.items():
        paths.setdefault(path, {})[method] = _operation(path, method, summary, body, answers)
    return {
        "openapi": "3.1.0",
        "info": {"title": "Billeting scheduler", "version": "1.0",
                 "description": "Placement-backed scheduling with claims, alternates and failure domains. "
                                "Errors use Placement's error document, always with a `code`."},
        "paths": paths,
        "components": {
            "schemas": {**_answer_schemas(), "Selections": schemas.SELECTIONS,
                        "NovaSelections": schemas.NOVA_SELECTIONS},
            "securitySchemes": {"token": {"type": "apiKey", "in": "header", "name": "X-Auth-Token"}},
        },
    }


@functools.cache
def document_bytes() -> bytes:
    return orjson.dumps(document())
