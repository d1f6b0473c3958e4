"""The scheduler API described as an OpenAPI 3.1 document, built from the
same JSON schemas the handlers validate bodies with (so the two cannot
drift), served at ``GET /openapi.json`` and used by the schema-driven fuzz
test. Success bodies are described loosely (objects); every error is the
service's error document."""
from __future__ import annotations

import functools

import msgspec
import orjson

from billeting.scheduler.api import schemas
from billeting.scheduler.selection import Selection

_ERROR = {
    "type": "object",
    "required": ["errors"],
    "properties": {"errors": {"type": "array", "minItems": 1, "items": {
        "type": "object",
        "required": ["status", "title", "detail", "code"],
        "properties": {
            "status": {"type": "integer"}, "title": {"type": "string"}, "detail": {"type": "string"},
            "code": {"type": "string", "pattern": "^billeting\\."},
            "request_id": {"type": ["string", "null"]},
            "explanation": {"type": "object"},
        },
    }}},
}

_JSON_OBJECT = {"content": {"application/json": {"schema": {"type": "object"}}}}
_PATH_TEXT = {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[^/]+$"}

# (path, method) -> (summary, request body schema or None, success statuses)
_OPERATIONS: dict[tuple[str, str], tuple[str, dict | None, tuple[int, ...]]] = {
    ("/", "get"): ("The API's version document (no token needed)", None, (200,)),
    ("/openapi.json", "get"): ("This document (no token needed)", None, (200,)),
    ("/metrics", "get"): ("Prometheus metrics, text exposition format (no token needed)", None, (200,)),
    ("/selections", "post"): ("Place instances: per instance [chosen, alternate, …], the chosen host claimed. "
                              "A body with `flavor` is the Nova form (NovaSelections).",
                              {"oneOf": [schemas.SELECTIONS, schemas.NOVA_SELECTIONS]}, (201,)),
    ("/server_groups", "get"): ("Server groups (`project_id` narrows)", None, (200,)),
    ("/server_groups", "post"): ("Create a server group", schemas.SERVER_GROUP, (201,)),
    ("/server_groups/{uuid}", "get"): ("One server group", None, (200,)),
    ("/server_groups/{uuid}", "delete"): ("Delete a server group", None, (204,)),
    ("/topology", "get"): ("Every level and its domains", None, (200,)),
    ("/topology/{level}", "get"): ("The domains of one level", None, (200,)),
    ("/topology/{level}/{name}", "get"): ("One domain", None, (200,)),
    ("/topology/{level}/{name}", "put"): ("Define a domain from hosts (lowest level) or from the domains "
                                          "one level down", schemas.DOMAIN, (200, 201)),
    ("/topology/{level}/{name}", "delete"): ("Remove a domain", None, (204,)),
    ("/availability_zones", "get"): ("Availability zones", None, (200,)),
    ("/availability_zones/{name}", "get"): ("One availability zone", None, (200,)),
    ("/availability_zones/{name}", "put"): ("Define a zone from hosts", schemas.ZONE, (200, 201)),
    ("/availability_zones/{name}", "delete"): ("Remove a zone", None, (204,)),
    ("/aggregates", "get"): ("Aggregates with metadata", None, (200,)),
    ("/aggregates/{uuid}", "get"): ("One aggregate", None, (200,)),
    ("/aggregates/{uuid}", "put"): ("Set an aggregate's name and metadata", schemas.AGGREGATE, (200, 201)),
    ("/aggregates/{uuid}", "delete"): ("Forget an aggregate's metadata", None, (204,)),
    ("/hosts", "get"): ("Host records", None, (200,)),
    ("/hosts/{name}", "get"): ("One host record", None, (200,)),
    ("/hosts/{name}", "put"): ("Report a host (service host, cell, enabled/up, counters, heartbeat)",
                               schemas.HOST_REPORT, (200, 201)),
    ("/hosts/{name}", "delete"): ("Forget a host record", None, (204,)),
}

_PATH_PARAMETERS = {
    "uuid": {"type": "string", "format": "uuid"},
    "level": schemas.LEVEL,
    "name": _PATH_TEXT,
}


def _operation(path: str, method: str, summary: str, body: dict | None, statuses: tuple[int, ...]) -> dict:
    responses: dict = {}
    for status in statuses:
        responses[str(status)] = {"description": "done"} if status == 204 else {"description": "done",
                                                                               **_JSON_OBJECT}
    if path == "/metrics":
        responses["200"] = {"description": "done", "content": {"text/plain": {"schema": {"type": "string"}}}}
    if (path, method) == ("/selections", "post"):
        responses["201"] = {"description": "per instance [chosen, alternate, …]; the chosen's `claims_lost` "
                                           "counts the claims it lost to other schedulers first",
                            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Placed"}}}}
    open_call = path in ("/", "/openapi.json", "/metrics")
    errors = {"4XX": "refused: the detail says why"} if not open_call else {"405": "not allowed"}
    if not open_call:
        errors["503"] = "Placement or the API database could not be reached; retrying finishes the job"
    for status, text in errors.items():
        responses[status] = {"description": text,
                             "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
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


def _answer_schemas() -> dict:
    """The 201 answer of ``POST /selections``, from the very Structs it is encoded from."""
    (selection,), components = msgspec.json.schema_components([Selection],
                                                               ref_template="#/components/schemas/{name}")
    placed = {"type": "object", "required": ["selections"],
              "properties": {"selections": {"type": "array", "items": {"type": "array", "items": selection}}}}
    return {**components, "Placed": placed}


@functools.cache
def document() -> dict:
    paths: dict[str, dict] = {}
    for (path, method), (summary, body, statuses) in _OPERATIONS.items():
        paths.setdefault(path, {})[method] = _operation(path, method, summary, body, statuses)
    return {
        "openapi": "3.1.0",
        "info": {"title": "Billeting scheduler", "version": "1.0",
                 "description": "Placement-backed scheduling with claims, alternates and failure domains. "
                                "Errors use Placement's error document, always with a `code`."},
        "paths": paths,
        "components": {
            "schemas": {"Error": _ERROR, "Selections": schemas.SELECTIONS,
                        "NovaSelections": schemas.NOVA_SELECTIONS, **_answer_schemas()},
            "securitySchemes": {"token": {"type": "apiKey", "in": "header", "name": "X-Auth-Token"}},
        },
    }


@functools.cache
def document_bytes() -> bytes:
    return orjson.dumps(document())
