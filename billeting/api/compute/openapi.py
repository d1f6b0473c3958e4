"""The compute API's most used calls as an OpenAPI 3.1 document: servers,
flavors, os-services, os-hypervisors and availability zones, at every
microversion the API serves (a field that only some microversions show is
described but not required). Request bodies are the very JSON schemas the
handlers validate with (``schemas``); answer bodies are written here after
``views`` and the handlers, closed (``additionalProperties: false``) so
that an undocumented key fails the schema-driven fuzz test
(``tests/controlplane/test_fuzz.py``). Every error is Nova's fault
document, ``{"<kind>": {"code": <status>, "message": "…"}}``.

Not yet described: server actions and instance actions, migrations, flavor
extra specs, os-server-groups, os-aggregates, limits and the version
documents.
"""
from __future__ import annotations

import functools

from billeting.api.compute import schemas

_REF = "#/components/schemas/"


def _ref(name: str) -> dict:
    return {"$ref": _REF + name}


def _object(required: dict, optional: dict | None = None) -> dict:
    return {"type": "object", "properties": {**required, **(optional or {})}, "required": list(required),
            "additionalProperties": False}


def _list_of(key: str, item: str, *, paged: bool = False) -> dict:
    return _object({key: {"type": "array", "items": _ref(item)}},
                   {f"{key}_links": _ref("Links")} if paged else None)


_STR = {"type": "string"}
_INT = {"type": "integer"}
_BOOL = {"type": "boolean"}
_NULL_STR = {"type": ["string", "null"]}
_ANY_OBJECT = {"type": "object"}

_COMPONENTS: dict[str, dict] = {
    "Fault": {
        "description": "Nova's error document: one key naming the kind of fault (badRequest, itemNotFound, ...).",
        "type": "object", "minProperties": 1, "maxProperties": 1,
        "additionalProperties": _object({"code": {"type": "integer", "minimum": 400, "maximum": 599},
                                         "message": _STR}, {"details": _STR}),
    },
    "Links": {"type": "array", "items": _object({"rel": _STR, "href": _STR})},
    "ServerSummary": _object({"id": _STR, "name": _STR, "links": _ref("Links")}),
    "Server": _object({
        "id": _STR, "name": _STR, "status": _STR, "tenant_id": _STR, "user_id": _STR,
        "metadata": {"type": "object", "additionalProperties": _STR}, "hostId": _STR,
        "image": {"anyOf": [{"const": ""}, _object({"id": _STR, "links": _ref("Links")})]},
        # Before 2.47 the flavor's id and link; from 2.47 the flavor itself.
        "flavor": {"anyOf": [
            _object({"id": _STR, "links": _ref("Links")}),
            _object({"vcpus": _INT, "ram": _INT, "disk": _INT, "ephemeral": _INT, "swap": _INT,
                     "original_name": _STR, "extra_specs": {"type": "object", "additionalProperties": _STR}})]},
        "created": _STR, "updated": _STR, "addresses": _ANY_OBJECT, "accessIPv4": _STR, "accessIPv6": _STR,
        "links": _ref("Links"), "OS-DCF:diskConfig": _STR, "progress": _INT,
        "OS-EXT-AZ:availability_zone": _STR, "config_drive": _STR, "key_name": _NULL_STR,
        "OS-SRV-USG:launched_at": _NULL_STR, "OS-SRV-USG:terminated_at": _NULL_STR,
        "OS-EXT-STS:task_state": _NULL_STR, "OS-EXT-STS:vm_state": _STR, "OS-EXT-STS:power_state": _INT,
        "os-extended-volumes:volumes_attached": {"type": "array"}, "security_groups": {"type": "array"},
    }, {
        # admins only
        "OS-EXT-SRV-ATTR:host": _NULL_STR, "OS-EXT-SRV-ATTR:hypervisor_hostname": _NULL_STR,
        "OS-EXT-SRV-ATTR:instance_name": _STR,
        # by microversion: 2.9, 2.19, 2.26, 2.73, 2.16
        "locked": _BOOL, "description": _NULL_STR, "tags": {"type": "array", "items": _STR},
        "locked_reason": _NULL_STR, "host_status": _STR,
        # an errored or deleted server's fault (details for admins, or when not a 500)
        "fault": _object({"code": _INT, "message": _STR, "created": _NULL_STR}, {"details": _NULL_STR}),
    }),
    "ServerCreated": {"anyOf": [
        _object({"server": _object({"id": _STR, "links": _ref("Links"), "OS-DCF:diskConfig": _STR,
                                    "security_groups": {"type": "array", "items": _object({"name": _STR})},
                                    "adminPass": _STR})}),
        _object({"reservation_id": _STR}),  # with return_reservation_id
    ]},
    "Flavor": _object({"id": _STR, "name": _STR, "links": _ref("Links")}, {
        "description": _NULL_STR,  # 2.55
        # the detail view
        "ram": _INT, "vcpus": _INT, "disk": _INT, "OS-FLV-EXT-DATA:ephemeral": _INT,
        "OS-FLV-DISABLED:disabled": _BOOL, "swap": {"anyOf": [_INT, {"const": ""}]}, "rxtx_factor": {"type": "number"},
        "os-flavor-access:is_public": _BOOL,
        "extra_specs": {"type": "object", "additionalProperties": _STR},  # 2.61
    }),
    "Service": _object({
        "id": {"type": ["string", "integer"]},  # a uuid from 2.53, the cell's row id before
        "binary": _STR, "host": _STR, "zone": _STR, "status": {"enum": ["enabled", "disabled"]},
        "state": {"enum": ["up", "down"]}, "updated_at": _NULL_STR, "disabled_reason": _NULL_STR,
    }, {"forced_down": _BOOL}),  # 2.11
    # The answer of the legacy ``PUT /os-services/{enable,disable,disable-log-reason,force-down}``.
    "ServiceChange": _object({"host": _STR, "binary": _STR}, {
        "status": {"enum": ["enabled", "disabled"]}, "disabled_reason": _NULL_STR, "forced_down": _BOOL}),
    "Hypervisor": _object({
        "id": {"type": ["string", "integer"]}, "hypervisor_hostname": _STR, "state": {"enum": ["up", "down"]},
        "status": {"enum": ["enabled", "disabled"]},
    }, {
        "servers": {"type": "array", "items": _object({"name": _STR, "uuid": _STR})},  # with_servers
        # the detail view
        "host_ip": _STR, "hypervisor_type": _NULL_STR, "hypervisor_version": _INT,
        "service": _object({"host": _STR, "id": {"type": ["string", "integer", "null"]},
                            "disabled_reason": _NULL_STR}),
        # before 2.88
        **{key: _INT for key in ("vcpus", "memory_mb", "local_gb", "vcpus_used", "memory_mb_used",
                                 "local_gb_used", "free_ram_mb", "free_disk_gb", "current_workload",
                                 "running_vms", "disk_available_least")},
        "cpu_info": _STR,
        "uptime": _NULL_STR,  # from 2.88
    }),
    "HypervisorStatistics": _object({key: _INT for key in (
        "count", "vcpus", "memory_mb", "local_gb", "vcpus_used", "memory_mb_used", "local_gb_used",
        "free_ram_mb", "free_disk_gb", "current_workload", "running_vms", "disk_available_least")}),
    "AvailabilityZone": _object({
        "zoneName": _STR, "zoneState": _object({"available": _BOOL}),
        # detail: host -> service binary -> its state; null in the plain listing and for zones not available
        "hosts": {"type": ["object", "null"], "additionalProperties": {
            "type": "object", "additionalProperties": _object(
                {"available": _BOOL, "active": _BOOL, "updated_at": _NULL_STR})}},
    }),
}

_PATH = {"type": "string", "minLength": 1}
_SERVER_QUERY = ("name", "status", "limit", "marker", "changes-since", "changes-before", "host", "flavor", "image",
                 "all_tenants", "project_id", "tenant_id", "deleted", "availability_zone", "sort_key", "sort_dir",
                 "ip", "ip6", "locked", "tags")
_FLAVOR_QUERY = ("minRam", "minDisk", "limit", "marker", "is_public", "sort_key", "sort_dir")
_HYPERVISOR_QUERY = ("limit", "marker", "hypervisor_hostname_pattern", "with_servers")

_ERRORS = {
    "400": "the body or the query is not valid",
    "401": "no token",
    "403": "the policy does not allow the call to this caller",
    "404": "no such object (or not at this microversion)",
    "409": "a conflict with the object's state or another object",
    "4XX": "refused at the HTTP level (method, media type, microversion)",
}


def _op(summary: str, answers: dict[int, str | dict | None], *, body: dict | None = None,
        path: tuple[str, ...] = (), query: tuple[str, ...] = (), unavailable: bool = False) -> dict:
    responses: dict = {}
    for status, kind in answers.items():
        if kind is None:
            responses[str(status)] = {"description": "done, no body"}
        else:
            schema = _ref(kind) if isinstance(kind, str) else kind
            responses[str(status)] = {"description": "done", "content": {"application/json": {"schema": schema}}}
    errors = dict(_ERRORS)
    if unavailable:
        errors["503"] = "the message bus or a cell is not available; nothing was done, retry"
    for status, text in errors.items():
        responses[status] = {"description": text, "content": {"application/json": {"schema": _ref("Fault")}}}
    op: dict = {"summary": summary, "responses": responses, "security": [{"token": []}]}
    parameters = [{"name": n, "in": "path", "required": True, "schema": _PATH} for n in path]
    parameters += [{"name": n, "in": "query", "required": False, "schema": {"type": "string"}} for n in query]
    if parameters:
        op["parameters"] = parameters
    if body is not None:
        op["requestBody"] = {"required": True, "content": {"application/json": {"schema": body}}}
    return op


def _paths() -> dict[str, dict]:
    server_id, flavor_id = ("server_id",), ("flavor_id",)
    return {
        "/v2.1/servers": {
            "get": _op("Servers (id, name, links)", {200: _list_of("servers", "ServerSummary", paged=True)},
                       query=_SERVER_QUERY),
            "post": _op("Create servers (202: accepted, built asynchronously)", {202: "ServerCreated"},
                        body=schemas.SERVER_CREATE, unavailable=True),
        },
        "/v2.1/servers/detail": {"get": _op("Servers in full", {200: _list_of("servers", "Server", paged=True)},
                                            query=_SERVER_QUERY)},
        "/v2.1/servers/{server_id}": {
            "get": _op("One server", {200: _object({"server": _ref("Server")})}, path=server_id),
            "delete": _op("Delete a server", {204: None}, path=server_id, unavailable=True),
        },
        "/v2.1/flavors": {
            "get": _op("Flavors (id, name, links)", {200: _list_of("flavors", "Flavor", paged=True)},
                       query=_FLAVOR_QUERY),
            "post": _op("Create a flavor", {200: _object({"flavor": _ref("Flavor")})}, body=schemas.FLAVOR_CREATE),
        },
        "/v2.1/flavors/detail": {"get": _op("Flavors in full", {200: _list_of("flavors", "Flavor", paged=True)},
                                            query=_FLAVOR_QUERY)},
        "/v2.1/flavors/{flavor_id}": {
            "get": _op("One flavor", {200: _object({"flavor": _ref("Flavor")})}, path=flavor_id),
            "delete": _op("Delete a flavor", {202: None}, path=flavor_id),
        },
        "/v2.1/os-services": {"get": _op("Services", {200: _list_of("services", "Service")},
                                         query=("host", "binary"))},
        "/v2.1/os-services/{service_id}": {
            "put": _op("Enable, disable or force down a service (from 2.53 by uuid; before, the legacy "
                       "enable/disable/disable-log-reason/force-down calls)",
                       {200: _object({"service": {"anyOf": [_ref("Service"), _ref("ServiceChange")]}})},
                       body={"anyOf": [schemas.SERVICE_UPDATE, schemas.SERVICE_LEGACY]}, path=("service_id",),
                       unavailable=True),
            "delete": _op("Delete a service", {204: None}, path=("service_id",), unavailable=True),
        },
        "/v2.1/os-hypervisors": {"get": _op("Hypervisors", {200: _list_of("hypervisors", "Hypervisor", paged=True)},
                                            query=_HYPERVISOR_QUERY)},
        "/v2.1/os-hypervisors/detail": {"get": _op("Hypervisors in full", {
            200: _list_of("hypervisors", "Hypervisor", paged=True)}, query=_HYPERVISOR_QUERY)},
        "/v2.1/os-hypervisors/statistics": {"get": _op("Sums over every hypervisor (before 2.88)", {
            200: _object({"hypervisor_statistics": _ref("HypervisorStatistics")})})},
        "/v2.1/os-hypervisors/{hypervisor_id}": {"get": _op("One hypervisor", {
            200: _object({"hypervisor": _ref("Hypervisor")})}, path=("hypervisor_id",), query=("with_servers",))},
        "/v2.1/os-availability-zone": {"get": _op("Availability zones", {
            200: _list_of("availabilityZoneInfo", "AvailabilityZone")})},
        "/v2.1/os-availability-zone/detail": {"get": _op("Availability zones with their hosts and services", {
            200: _list_of("availabilityZoneInfo", "AvailabilityZone")})},
    }


@functools.cache
def document() -> dict:
    """A fresh reading is ``copy.deepcopy(document())``: the result is shared."""
    return {
        "openapi": "3.1.0",
        "info": {"title": "Billeting compute API (Nova-compatible), the most used calls", "version": "2.90"},
        "paths": _paths(),
        "components": {"schemas": _COMPONENTS,
                       "securitySchemes": {"token": {"type": "apiKey", "in": "header", "name": "X-Auth-Token"}}},
    }
