"""Build the OpenAPI 3.1 document of the Placement API.

Request bodies come from the JSON schemas the handlers validate with
(``billeting.placement.api.schemas``), evaluated at every microversion;
response bodies from ``shapes``; the query parameters' first microversions
from the handlers' own tables. The operation list below says, for each
route and method, what upstream Placement offers (docs/design/placement-endpoints.md):
first microversion, policy rule, parameters, body and answers.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import orjson

from billeting.placement.api import allocation_candidates as candidates_api
from billeting.placement.api.microversion import MAX_VERSION, MIN_VERSION, to_str
from billeting.placement.api.schemas import aggregates as aggregate_schemas
from billeting.placement.api.schemas import allocations as allocation_schemas
from billeting.placement.api.schemas import inventories as inventory_schemas
from billeting.placement.api.schemas import queries as query_schemas
from billeting.placement.api.schemas import reshaper as reshaper_schemas
from billeting.placement.api.schemas import resource_classes as rc_schemas
from billeting.placement.api.schemas import resource_providers as rp_schemas
from billeting.placement.api.schemas import traits as trait_schemas
from billeting.placement.openapi import shapes
from billeting.placement.openapi.versions import ALL_VERSIONS, RANGE, by_version, since, span

Version = tuple[int, int]
JSON = "application/json"


def _ref(kind: str, name: str) -> dict:
    return {"$ref": f"#/components/{kind}/{name}"}


@dataclass(frozen=True)
class Answer:
    status: int
    description: str
    schema: dict | None = None  # JSON body; None: no body
    headers: tuple[str, ...] = ()  # names in HEADERS
    versions: tuple[Version, Version] | None = None  # only in this range
    media_type: str = JSON


@dataclass(frozen=True)
class Operation:
    method: str
    summary: str
    answers: tuple[Answer, ...]
    policy: str | None = None
    first: Version = MIN_VERSION
    parameters: tuple[dict, ...] = ()
    body: dict | None = None
    body_versions: tuple[Version, Version] | None = None
    conflicts: bool = False  # may answer 409
    description: str = ""
    placement: bool = True  # a Placement API operation (not an operator endpoint)
    security: list | None = None
    extra_errors: tuple[Answer, ...] = field(default_factory=tuple)


# --- parameters ------------------------------------------------------------------------

def _path(name: str, description: str) -> dict:
    return {"name": name, "in": "path", "required": True, "description": description,
            "schema": {"type": "string"}}


def _query(name: str, description: str, *, first: Version = MIN_VERSION, schema: dict | None = None,
           required: bool = False, example: str | None = None, repeatable: bool = False) -> dict:
    param = {"name": name, "in": "query", "required": required, "description": description}
    if repeatable:
        param |= {"style": "form", "explode": True,
                  "schema": {"type": "array", "items": schema or {"type": "string"}}}
    else:
        param["schema"] = schema or {"type": "string"}
    if example is not None:
        param["example"] = [example] if repeatable else example
    if first > MIN_VERSION:
        param |= since(first)
    return param


def _first_version(present) -> Version:
    """The first microversion at which ``present(mv)`` holds."""
    return next(mv for mv in ALL_VERSIONS if present(mv))


UUID_PATH = _path("uuid", "A resource provider's uuid.")
RC_PATH = _path("resource_class", "A resource class name.")

_RP_LIST_SINCE = {name: _first_version(lambda mv, n=name: n in query_schemas.providers_list(mv)["properties"])
                  for name in ("name", "uuid", "member_of", "resources", "in_tree", "required")}
_USAGES_SINCE = {name: _first_version(lambda mv, n=name: n in query_schemas.usages(mv)["properties"])
                 for name in ("project_id", "user_id", "consumer_type")}
_CANDIDATES_SINCE = {**candidates_api._BASE_SINCE, **{
    name: _first_version(lambda mv, n=name: mv >= (1, 10) and n in query_schemas.candidates(mv)["properties"])
    for name in ("limit", "group_policy", "root_required", "same_subtree")}}

_RESOURCES_EXAMPLE = "VCPU:1,MEMORY_MB:512"
_AGGREGATE_TEXT = ("`<uuid>`, `in:<uuid>,<uuid>` (any of); `!<uuid>` and `!in:...` (none of) from 1.32; "
                   "repeated occurrences are AND-ed from 1.24.")
_TRAITS_TEXT = ("Comma-separated trait names, all required; `!NAME` forbidden from 1.22; `in:A,B` (any of) "
                "and repetition (AND-ed) from 1.39.")

PROVIDER_LIST_PARAMETERS = (
    _query("name", "Exact provider name.", first=_RP_LIST_SINCE["name"]),
    _query("uuid", "Exact provider uuid.", first=_RP_LIST_SINCE["uuid"]),
    _query("member_of", "Aggregate filter on the provider's own associations: " + _AGGREGATE_TEXT,
           first=_RP_LIST_SINCE["member_of"], repeatable=True),
    _query("resources", "`RC:AMOUNT,...`: providers that can each serve every amount on their own.",
           first=_RP_LIST_SINCE["resources"], example=_RESOURCES_EXAMPLE),
    _query("in_tree", "Providers in the same tree as this provider uuid.", first=_RP_LIST_SINCE["in_tree"]),
    _query("required", "Trait filter on the provider's own traits. " + _TRAITS_TEXT,
           first=_RP_LIST_SINCE["required"], repeatable=True),
)

CANDIDATE_PARAMETERS = (
    _query("resources", "`RC:AMOUNT,...` of the unsuffixed request group. Suffixed groups (from 1.25) use "
           "`resources<S>`, `required<S>`, `member_of<S>`, `in_tree<S>` (from 1.31), where S is "
           "`[1-9][0-9]*` before 1.33 and `[a-zA-Z0-9_-]{1,64}` from 1.33; each is satisfied by one provider.",
           first=_CANDIDATES_SINCE["resources"], example=_RESOURCES_EXAMPLE),
    _query("required", "Traits of the unsuffixed group, satisfied collectively by the providers that serve "
           "it. " + _TRAITS_TEXT, first=_CANDIDATES_SINCE["required"], repeatable=True),
    _query("member_of", "Aggregates of the unsuffixed group (an aggregate on a tree's root covers the "
           "tree): " + _AGGREGATE_TEXT, first=_CANDIDATES_SINCE["member_of"], repeatable=True),
    _query("in_tree", "Restrict the unsuffixed group to the tree of this provider uuid.",
           first=_CANDIDATES_SINCE["in_tree"]),
    _query("limit", "At most this many allocation requests.", first=_CANDIDATES_SINCE["limit"],
           schema={"type": "string", "pattern": "^[1-9][0-9]*$"}, example="10"),
    _query("group_policy", "`none` or `isolate` (suffixed groups on different providers); required with "
           "more than one suffixed group.", first=_CANDIDATES_SINCE["group_policy"],
           schema={"enum": ["none", "isolate"]}),
    _query("root_required", "Traits (`!` for forbidden) the root of each candidate's tree must have; "
           "at most once.", first=_CANDIDATES_SINCE["root_required"]),
    _query("same_subtree", "Comma-separated group suffixes whose providers must share a subtree; "
           "may be repeated.", first=_CANDIDATES_SINCE["same_subtree"], repeatable=True),
)

TRAIT_LIST_PARAMETERS = (
    _query("name", "`in:NAME1,NAME2` or `startswith:PREFIX`."),
    _query("associated", "`true`: only traits some provider has; `false`: only traits no provider has.",
           schema={"type": "string", "pattern": "^([Tt][Rr][Uu][Ee]|[Ff][Aa][Ll][Ss][Ee])$"}),
)

USAGE_PARAMETERS = (
    _query("project_id", "The project whose usage is summed.", first=_USAGES_SINCE["project_id"], required=True),
    _query("user_id", "Only this user's consumers.", first=_USAGES_SINCE["user_id"]),
    _query("consumer_type", "Only this consumer type; `all` or `unknown` (untyped consumers).",
           first=_USAGES_SINCE["consumer_type"]),
)


# --- answers -------------------------------------------------------------------------------

def ok(schema: dict, description: str = "OK", *, versions=None, headers=("cache",)) -> Answer:
    return Answer(200, description, schema, headers, versions)


def empty(status: int, description: str, *, versions=None, headers: tuple[str, ...] = ()) -> Answer:
    return Answer(status, description, None, headers, versions)


NO_CONTENT = empty(204, "Done; no body.")
NEWER = ((1, 20), MAX_VERSION)
ENSURE = ((1, 7), MAX_VERSION)
RENAME = ((1, 2), (1, 6))

_ERROR_TEXT = {
    400: "Bad request: malformed or invalid microversion header, query string, JSON body or values.",
    401: "No (valid) credentials.",
    403: "Policy does not allow this request.",
    404: "Not found, or the operation does not exist at the negotiated microversion.",
    405: "Method not allowed (DELETE of all inventories before 1.5).",
    406: "Unacceptable microversion, or an Accept header that excludes application/json.",
    409: "Conflict: generation mismatch (placement.concurrent_update), duplicate, in use or over capacity.",
    415: "The body is not application/json.",
}


def _error_answers(op: Operation) -> list[Answer]:
    if not op.placement:
        return list(op.extra_errors)
    statuses = [400, 406] if op.policy is None else [400, 401, 403, 404, 406]
    if op.conflicts:
        statuses.append(409)
    if op.body is not None:
        statuses.append(415)
    answers = [Answer(s, _ERROR_TEXT[s], _ref("schemas", "Unauthorized" if s == 401 else "Error"))
               for s in sorted(statuses)]
    return answers + list(op.extra_errors)


# --- the operations -------------------------------------------------------------------------

def _body(make, start: Version = MIN_VERSION) -> dict:
    return by_version(make, start)


PROVIDER = _ref("schemas", "ResourceProvider")
RP = "placement:resource_providers"

PATHS: dict[str, tuple[tuple[dict, ...], tuple[Operation, ...]]] = {
    "/": ((), (
        Operation("GET", "Version discovery: the supported microversion range.", (
            ok(shapes.VERSIONS),), policy=None, security=[{}, {"token": []}],
            description="No token needed."),
    )),
    "/resource_classes": ((), (
        Operation("GET", "List resource classes, standard and custom.", (
            ok(_ref("schemas", "ResourceClasses")),), policy="placement:resource_classes:list", first=(1, 2)),
        Operation("POST", "Create a custom resource class.", (
            empty(201, "Created.", headers=("location",)),), policy="placement:resource_classes:create",
            first=(1, 2), body=rc_schemas.BODY, conflicts=True),
    )),
    "/resource_classes/{name}": ((_path("name", "A resource class name."),), (
        Operation("GET", "Show a resource class.", (
            ok(_ref("schemas", "ResourceClass")),), policy="placement:resource_classes:show", first=(1, 2)),
        Operation("PUT", "1.2-1.6: rename a custom class (body); from 1.7: create it if missing (no body).", (
            Answer(200, "Renamed.", _ref("schemas", "ResourceClass"), versions=RENAME),
            empty(201, "Created.", versions=ENSURE, headers=("location",)),
            empty(204, "Already existed.", versions=ENSURE, headers=("location",)),
        ), policy="placement:resource_classes:update", first=(1, 2), body=rc_schemas.BODY,
            body_versions=RENAME, conflicts=True),
        Operation("DELETE", "Delete a custom resource class no inventory uses.", (NO_CONTENT,),
                  policy="placement:resource_classes:delete", first=(1, 2), conflicts=True),
    )),
    "/resource_providers": ((), (
        Operation("GET", "List resource providers, optionally filtered.", (
            ok(_ref("schemas", "ResourceProviders")),), policy=f"{RP}:list",
            parameters=PROVIDER_LIST_PARAMETERS),
        Operation("POST", "Create a resource provider (uuid generated when not given).", (
            empty(201, "Created (before 1.20).", versions=(MIN_VERSION, (1, 19)), headers=("location",)),
            ok(PROVIDER, "Created (from 1.20): the new provider.", versions=NEWER, headers=("location", "cache")),
        ), policy=f"{RP}:create", body=_body(rp_schemas.create), conflicts=True),
    )),
    "/resource_providers/{uuid}": ((UUID_PATH,), (
        Operation("GET", "Show a resource provider.", (ok(PROVIDER),), policy=f"{RP}:show"),
        Operation("PUT", "Rename a provider; set (from 1.14) or change (from 1.37) its parent.", (
            ok(PROVIDER),), policy=f"{RP}:update", body=_body(rp_schemas.update), conflicts=True),
        Operation("DELETE", "Delete a provider without children or allocations.", (NO_CONTENT,),
                  policy=f"{RP}:delete", conflicts=True),
    )),
    "/resource_providers/{uuid}/inventories": ((UUID_PATH,), (
        Operation("GET", "All inventories of a provider.", (ok(shapes.INVENTORIES),),
                  policy=f"{RP}:inventories:list"),
        Operation("POST", "Add the inventory of one more resource class.", (
            Answer(201, "Created.", shapes.INVENTORY, ("location", "cache")),),
            policy=f"{RP}:inventories:create", body=inventory_schemas.POST, conflicts=True),
        Operation("PUT", "Replace all inventories (checks the provider generation).", (
            ok(shapes.INVENTORIES),), policy=f"{RP}:inventories:update", body=inventory_schemas.PUT_ALL,
            conflicts=True),
        Operation("DELETE", "Delete all inventories (from 1.5; 405 before).", (NO_CONTENT,),
                  policy=f"{RP}:inventories:delete", first=(1, 5), conflicts=True,
                  extra_errors=(Answer(405, _ERROR_TEXT[405], _ref("schemas", "Error")),)),
    )),
    "/resource_providers/{uuid}/inventories/{resource_class}": ((UUID_PATH, RC_PATH), (
        Operation("GET", "One inventory of a provider.", (ok(shapes.INVENTORY),),
                  policy=f"{RP}:inventories:show"),
        Operation("PUT", "Update one existing inventory (checks the provider generation).", (
            ok(shapes.INVENTORY),), policy=f"{RP}:inventories:update", body=inventory_schemas.PUT_ONE,
            conflicts=True),
        Operation("DELETE", "Delete one inventory without allocations.", (NO_CONTENT,),
                  policy=f"{RP}:inventories:delete", conflicts=True),
    )),
    "/resource_providers/{uuid}/usages": ((UUID_PATH,), (
        Operation("GET", "Usage per resource class of a provider's inventories.", (
            Answer(200, "OK", shapes.PROVIDER_USAGES, ("cache",)),), policy=f"{RP}:usages"),
    )),
    "/resource_providers/{uuid}/aggregates": ((UUID_PATH,), (
        Operation("GET", "The provider's aggregates.", (ok(by_version(shapes.aggregates, (1, 1))),),
                  policy=f"{RP}:aggregates:list", first=(1, 1)),
        Operation("PUT", "Replace the provider's aggregates (generation checked from 1.19).", (
            ok(by_version(shapes.aggregates, (1, 1))),), policy=f"{RP}:aggregates:update", first=(1, 1),
            body=_body(aggregate_schemas.put, (1, 1)), conflicts=True),
    )),
    "/resource_providers/{uuid}/allocations": ((UUID_PATH,), (
        Operation("GET", "Allocations against the provider, by consumer.", (
            ok(by_version(shapes.provider_allocations)),), policy=f"{RP}:allocations:list"),
    )),
    "/resource_providers/{uuid}/traits": ((UUID_PATH,), (
        Operation("GET", "The provider's traits.", (ok(shapes.PROVIDER_TRAITS),),
                  policy=f"{RP}:traits:list", first=(1, 6)),
        Operation("PUT", "Replace the provider's traits (checks the provider generation).", (
            ok(shapes.PROVIDER_TRAITS),), policy=f"{RP}:traits:update", first=(1, 6),
            body=trait_schemas.PROVIDER_TRAITS, conflicts=True),
        Operation("DELETE", "Remove all of the provider's traits.", (NO_CONTENT,),
                  policy=f"{RP}:traits:delete", first=(1, 6), conflicts=True),
    )),
    "/allocations": ((), (
        Operation("POST", "Replace the allocations of several consumers in one transaction.", (
            NO_CONTENT,), policy="placement:allocations:manage", first=(1, 13),
            body=_body(allocation_schemas.post, (1, 13)), conflicts=True),
    )),
    "/allocations/{consumer_uuid}": ((_path("consumer_uuid", "A consumer's uuid."),), (
        Operation("GET", "A consumer's allocations (`{\"allocations\": {}}` when it has none).", (
            ok(by_version(shapes.consumer_allocations)),), policy="placement:allocations:list"),
        Operation("PUT", "Replace a consumer's allocations.", (NO_CONTENT,),
                  policy="placement:allocations:update", body=_body(allocation_schemas.put), conflicts=True),
        Operation("DELETE", "Delete all of a consumer's allocations (404 when it has none).", (NO_CONTENT,),
                  policy="placement:allocations:delete", conflicts=True),
    )),
    "/allocation_candidates": ((), (
        Operation("GET", "Every way the current providers could satisfy the requested resources.", (
            ok(by_version(shapes.allocation_candidates, (1, 10))),),
            policy="placement:allocation_candidates:list", first=(1, 10), parameters=CANDIDATE_PARAMETERS),
    )),
    "/traits": ((), (
        Operation("GET", "List traits, standard and custom.", (ok(shapes.TRAITS),), policy="placement:traits:list",
                  first=(1, 6), parameters=TRAIT_LIST_PARAMETERS),
    )),
    "/traits/{name}": ((_path("name", "A trait name."),), (
        Operation("GET", "Whether a trait exists (204) or not (404).", (
            empty(204, "The trait exists.", headers=("cache",)),), policy="placement:traits:show", first=(1, 6)),
        Operation("PUT", "Create a custom trait if missing.", (
            empty(201, "Created.", headers=("location", "cache")),
            empty(204, "Already existed.", headers=("location", "cache"))),
            policy="placement:traits:update", first=(1, 6)),
        Operation("DELETE", "Delete a custom trait no provider has.", (NO_CONTENT,),
                  policy="placement:traits:delete", first=(1, 6), conflicts=True),
    )),
    "/usages": ((), (
        Operation("GET", "Usage of a project (and user), grouped by consumer type from 1.38.", (
            ok(by_version(shapes.project_usages, (1, 9))),), policy="placement:usages", first=(1, 9),
            parameters=USAGE_PARAMETERS),
    )),
    "/reshaper": ((), (
        Operation("POST", "Atomically move inventories and the allocations that use them.", (NO_CONTENT,),
                  policy="placement:reshaper:reshape", first=(1, 30),
                  body=_body(reshaper_schemas.body, (1, 30)), conflicts=True),
    )),
    # --- operator endpoints (not Placement API: no microversion, no Placement policy) ---
    "/openapi.json": ((), (
        Operation("GET", "This document.", (Answer(200, "The OpenAPI document.", shapes.OPENAPI_DOCUMENT),),
                  placement=False, security=[{}], description="No token needed."),
    )),
    "/healthcheck": ((), (
        Operation("GET", "Whether the service can reach its database (`SELECT 1`).", (
            Answer(200, "The database answered.", shapes.HEALTHY),), placement=False, security=[{}],
            description="No token needed.",
            extra_errors=(Answer(503, "The database did not answer.", shapes.error(None)),)),
    )),
    "/metrics": ((), (
        Operation("GET", "Prometheus metrics (text exposition format).", (
            Answer(200, "The metrics.", {"type": "string"}, media_type="text/plain"),),
            placement=False, security=[{}, {"token": []}], policy="billeting:metrics",
            description="Open by default; with `metrics_access = policy` a token the `billeting:metrics` "
                        "rule admits is needed.",
            extra_errors=(Answer(401, _ERROR_TEXT[401], _ref("schemas", "Unauthorized")),
                          Answer(403, _ERROR_TEXT[403], shapes.error(None)))),
    )),
}


# --- assembly --------------------------------------------------------------------------------

HEADERS = {
    "request-id": ("x-openstack-request-id", {"description": "The request's id (also in error bodies).",
                                              "required": True, "schema": shapes.REQUEST_ID}),
    "version": ("OpenStack-API-Version", {"description": "The negotiated microversion.", "required": True,
                                          "schema": {"type": "string", "pattern": "^placement 1\\.[0-9]+$"}}),
    "location": ("Location", {"description": "URL of the created or ensured object.", "required": True,
                              "schema": {"type": "string"}}),
    "cache": ("Last-Modified", {"description": "From 1.15.", "schema": {"type": "string"}}),
    "cache-control": ("Cache-Control", {"description": "`no-cache`, from 1.15.", "schema": {"type": "string"}}),
}


def _answer(op: Operation, answer: Answer) -> dict:
    out: dict = {"description": answer.description}
    names = ["request-id"]
    if op.placement and answer.status < 400:
        names.append("version")
    for name in answer.headers:
        names += ["cache", "cache-control"] if name == "cache" else [name]
    out["headers"] = {HEADERS[n][0]: _ref("headers", n) for n in names}
    if answer.schema is not None:
        out["content"] = {answer.media_type: {"schema": answer.schema}}
    if answer.versions is not None:
        out[RANGE] = span(*answer.versions)
    return out


def _operation(path: str, op: Operation) -> dict:
    out: dict = {"operationId": f"{op.method.lower()} {path}", "summary": op.summary}
    if op.description:
        out["description"] = op.description
    if op.policy is not None:
        out["x-openstack-policy"] = op.policy
    if op.placement:
        if op.first > MIN_VERSION:
            out |= since(op.first)
    if op.security is not None:
        out["security"] = op.security
    parameters = list(op.parameters)
    if op.placement:
        parameters.insert(0, _ref("parameters", "microversion"))
    if parameters:
        out["parameters"] = parameters
    if op.body is not None:
        body: dict = {"required": True, "content": {JSON: {"schema": op.body}}}
        if op.body_versions is not None:
            body[RANGE] = span(*op.body_versions)
        out["requestBody"] = body
    answers = list(op.answers) + _error_answers(op)
    out["responses"] = {str(a.status): _answer(op, a) for a in sorted(answers, key=lambda a: a.status)}
    return out


def build() -> dict:
    paths = {}
    for path, (path_parameters, operations) in PATHS.items():
        item: dict = {}
        if path_parameters:
            item["parameters"] = list(path_parameters)
        for op in operations:
            item[op.method.lower()] = _operation(path, op)
        paths[path] = item
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Billeting Placement API",
            "version": to_str(MAX_VERSION),
            "description": (
                "The OpenStack Placement API as Billeting serves it, microversions "
                f"{to_str(MIN_VERSION)} to {to_str(MAX_VERSION)}, plus the operator endpoints "
                "/openapi.json, /healthcheck and /metrics. Send `OpenStack-API-Version: placement X.Y`; "
                f"without it the API answers as {to_str(MIN_VERSION)}. Whatever exists only in some "
                f"microversions carries `{RANGE}: {{min, max}}`: a shape that changed is an `anyOf` of "
                "alternatives with non-overlapping ranges (anyOf, since an empty list or object can fit "
                "several of them); a parameter, request body or response outside its range does not exist "
                "at that version, and an operation outside its range answers 404. Errors use the Placement "
                "error format (an `errors` list of one object; `code` from 1.23)."),
        },
        RANGE: span(MIN_VERSION, MAX_VERSION),
        "security": [{"token": []}],
        "paths": paths,
        "components": {
            "securitySchemes": {"token": {
                "type": "apiKey", "in": "header", "name": "X-Auth-Token",
                "description": "A Keystone token, or with noauth2 `USER[:PROJECT]` (`admin` is an admin)."}},
            "parameters": {"microversion": {
                "name": "OpenStack-API-Version", "in": "header", "required": False,
                "description": "`placement X.Y` or `placement latest`; absent means 1.0.",
                "schema": {"type": "string"}, "example": f"placement {to_str(MAX_VERSION)}"}},
            "headers": {name: spec for name, (_header, spec) in HEADERS.items()},
            "schemas": {
                "Error": by_version(shapes.error),
                "Unauthorized": {"anyOf": [shapes.NOAUTH_UNAUTHORIZED, shapes.KEYSTONE_UNAUTHORIZED,
                                           _ref("schemas", "Error")]},
                "ResourceProvider": by_version(shapes.provider),
                "ResourceProviders": by_version(shapes.providers),
                "ResourceClass": shapes.RESOURCE_CLASS,
                "ResourceClasses": shapes.RESOURCE_CLASSES,
            },
        },
    }


def render(document: dict) -> bytes:
    """The shipped file's bytes: indented, keys in a stable order."""
    return orjson.dumps(document, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"
