"""The compute API as an OpenAPI 3.1 document: every call it serves (servers
and their actions, instance actions and migrations, flavors with their
extra specs and access lists, server groups, aggregates, os-services,
os-hypervisors, availability zones, limits, the version documents), at every
microversion the API serves (a field that only some microversions show is
described but not required). Request bodies are the very JSON schemas the
handlers validate with (``schemas``); answer bodies are written here after
``views`` and the handlers, closed (``additionalProperties: false``) so
that an undocumented key fails the schema-driven fuzz test
(``tests/api/compute/test_fuzz.py``). Every error is Nova's fault
document, ``{"<kind>": {"code": <status>, "message": "…"}}``.

The ``/v2`` prefix serves the same calls as ``/v2.1`` and is not repeated.
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
# A rebuild's answer: the server as shown, with the password it was given.
_COMPONENTS["ServerRebuilt"] = {**_COMPONENTS["Server"], "properties": {
    **_COMPONENTS["Server"]["properties"], "adminPass": _STR}}
_COMPONENTS.update({
    "InstanceActionEvent": _object({"event": _STR, "start_time": _STR, "finish_time": _NULL_STR,
                                    "result": _NULL_STR}, {
        "traceback": {"type": "null"},  # admins, and everyone before 2.51
        "host": _STR, "hostId": _STR,  # 2.62 (host: admins only)
        "details": _NULL_STR,  # 2.84
    }),
    "InstanceAction": _object({
        "action": _STR, "instance_uuid": _STR, "message": _NULL_STR, "project_id": _STR, "request_id": _STR,
        "start_time": _STR, "user_id": _STR,
    }, {"updated_at": _STR,  # 2.58
        "events": {"type": "array", "items": _ref("InstanceActionEvent")}}),  # shown one; admins or 2.51
    "Migration": _object({
        "id": _INT, "instance_uuid": _STR, "status": _STR, "source_compute": _NULL_STR, "source_node": _NULL_STR,
        "dest_compute": _NULL_STR, "dest_node": _NULL_STR, "dest_host": _NULL_STR,
        "old_instance_type_id": {"type": ["integer", "null"]}, "new_instance_type_id": {"type": ["integer", "null"]},
        "created_at": _STR, "updated_at": _NULL_STR,
    }, {
        "migration_type": _STR, "links": _ref("Links"),  # 2.23 (links: live migrations in progress)
        "uuid": _STR,  # 2.59
        "project_id": _NULL_STR, "user_id": _NULL_STR,  # 2.80
    }),
    "ServerMigration": _object({
        "id": _INT, "server_uuid": _STR, "status": _STR, "source_compute": _NULL_STR, "source_node": _NULL_STR,
        "dest_compute": _NULL_STR, "dest_node": _NULL_STR, "dest_host": _NULL_STR, "created_at": _STR,
        "updated_at": _NULL_STR,
        **{f"{what}_{count}_bytes": {"type": ["integer", "null"]} for what in ("memory", "disk")
           for count in ("total", "processed", "remaining")},
    }, {"uuid": _STR, "project_id": _NULL_STR, "user_id": _NULL_STR}),  # 2.59, 2.80
    "ExtraSpecs": _object({"extra_specs": {"type": "object", "additionalProperties": _STR}}),
    # ``{"<key>": "<value>"}``: the one spec shown, created or updated
    "ExtraSpec": {"type": "object", "minProperties": 1, "maxProperties": 1, "additionalProperties": _STR},
    "FlavorAccess": _object({"flavor_access": {"type": "array", "items": _object({"flavor_id": _STR,
                                                                                 "tenant_id": _STR})}}),
    "ServerGroup": _object({"id": _STR, "name": _STR, "members": {"type": "array", "items": _STR}}, {
        # from 2.64; before, policies and metadata
        "policy": _STR, "rules": _object({}, {"max_server_per_host": _INT, "scope": _STR}),
        "policies": {"type": "array", "items": _STR}, "metadata": _object({}),
        "project_id": _STR, "user_id": _STR,  # 2.13
    }),
    "Aggregate": _object({
        "availability_zone": _NULL_STR, "created_at": _STR, "deleted": _BOOL, "deleted_at": {"type": "null"},
        "id": _INT, "name": _STR, "updated_at": _NULL_STR,
    }, {
        # not in the answer to a create
        "hosts": {"type": "array", "items": _STR}, "metadata": {"type": "object", "additionalProperties": _STR},
        "uuid": _STR,  # 2.41
    }),
    "Limits": _object({"limits": _object({
        "absolute": _object({key: _INT for key in (
            "maxImageMeta", "maxServerMeta", "maxTotalCores", "maxTotalInstances", "maxTotalKeypairs",
            "maxTotalRAMSize", "maxServerGroups", "maxServerGroupMembers", "totalCoresUsed", "totalInstancesUsed",
            "totalRAMUsed", "totalServerGroupsUsed")}, {key: _INT for key in (
                # before 2.36, and before 2.57
                "maxSecurityGroups", "maxSecurityGroupRules", "maxTotalFloatingIps", "totalSecurityGroupsUsed",
                "totalFloatingIpsUsed", "maxPersonality", "maxPersonalitySize")}),
        "rate": {"type": "array", "maxItems": 0}})}),
    "Version": _object({
        "id": _STR, "status": _STR, "version": _STR, "min_version": _STR, "updated": _STR, "links": _ref("Links"),
        "media-types": {"type": "array", "items": _object({"base": _STR, "type": _STR})}}),
})

_PATH = {"type": "string", "minLength": 1}
_SERVER_QUERY = ("name", "status", "limit", "marker", "changes-since", "changes-before", "host", "flavor", "image",
                 "all_tenants", "project_id", "tenant_id", "deleted", "availability_zone", "sort_key", "sort_dir",
                 "ip", "ip6", "locked", "tags")
_FLAVOR_QUERY = ("minRam", "minDisk", "limit", "marker", "is_public", "sort_key", "sort_dir")
_HYPERVISOR_QUERY = ("limit", "marker", "hypervisor_hostname_pattern", "with_servers")
_MIGRATION_QUERY = ("host", "status", "source_compute", "instance_uuid", "migration_type", "project_id", "user_id",
                    "limit", "marker", "changes-since", "changes-before")
# ``POST /servers/{id}/action``: one action, its arguments (checked per
# action and microversion by the handler).
_ONE_ACTION = {"type": "object", "minProperties": 1, "maxProperties": 1}
_AGGREGATE_ACTION = {"oneOf": [
    {"type": "object", "properties": {key: schema}, "required": [key], "additionalProperties": False}
    for key, schema in schemas.AGGREGATE_ACTIONS.items()]}

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
        **_other_paths(),
    }


def _other_paths() -> dict[str, dict]:
    server_id, flavor_id, aggregate_id = ("server_id",), ("flavor_id",), ("aggregate_id",)
    aggregate = _object({"aggregate": _ref("Aggregate")})
    return {
        "/": {"get": _op("The API's versions", {200: _object({"versions": {"type": "array",
                                                                            "items": _ref("Version")}})})},
        "/v2.1": {"get": _op("This version: its microversions", {200: _object({"version": _ref("Version")})})},
        "/v2.1/servers/{server_id}/action": {"post": _op(
            "Migrate, resize, live-migrate or evacuate a server (202, the move runs on), confirm (204) or "
            "revert (202) a resize; os-stop, os-start, shelve, shelveOffload, unshelve, lock, unlock (202, no "
            "body) and rebuild (202 with the server and its adminPass). Evacuate answers 200: before 2.14 "
            "with {\"adminPass\": null}, from 2.14 with no body (one status cannot describe both, so its body "
            "is left undescribed)",
            {200: None, 202: {"anyOf": [{"type": "null", "description": "no body: every action but rebuild"},
                                        _object({"server": _ref("ServerRebuilt")})]}, 204: None},
            body=_ONE_ACTION, path=server_id, unavailable=True)},
        "/v2.1/servers/{server_id}/os-instance-actions": {"get": _op(
            "What was done to a server (paged from 2.58)",
            {200: _object({"instanceActions": {"type": "array", "items": _ref("InstanceAction")}},
                          {"links": _ref("Links")})},
            path=server_id, query=("limit", "marker", "changes-since", "changes-before"))},
        "/v2.1/servers/{server_id}/os-instance-actions/{request_id}": {"get": _op(
            "One action, with its events", {200: _object({"instanceAction": _ref("InstanceAction")})},
            path=("server_id", "request_id"))},
        "/v2.1/servers/{server_id}/migrations": {"get": _op(
            "A server's live migrations in progress (2.23)",
            {200: _object({"migrations": {"type": "array", "items": _ref("ServerMigration")}})}, path=server_id)},
        "/v2.1/servers/{server_id}/migrations/{migration_id}": {"get": _op(
            "One live migration in progress (2.23)", {200: _object({"migration": _ref("ServerMigration")})},
            path=("server_id", "migration_id"))},
        "/v2.1/os-migrations": {"get": _op("Every cell's migrations (paged from 2.59)",
                                           {200: _list_of("migrations", "Migration", paged=True)},
                                           query=_MIGRATION_QUERY)},
        "/v2.1/flavors/{flavor_id}/action": {"post": _op(
            "Open a private flavor to a project, or close it again", {200: "FlavorAccess"},
            body=schemas.FLAVOR_ACTION, path=flavor_id)},
        "/v2.1/flavors/{flavor_id}/os-flavor-access": {"get": _op(
            "The projects a private flavor is open to", {200: "FlavorAccess"}, path=flavor_id)},
        "/v2.1/flavors/{flavor_id}/os-extra_specs": {
            "get": _op("A flavor's extra specs", {200: "ExtraSpecs"}, path=flavor_id),
            "post": _op("Set extra specs (others kept)", {200: "ExtraSpecs"}, body=schemas.EXTRA_SPECS,
                        path=flavor_id),
        },
        "/v2.1/flavors/{flavor_id}/os-extra_specs/{key}": {
            "get": _op("One extra spec", {200: "ExtraSpec"}, path=("flavor_id", "key")),
            "put": _op("Set one extra spec", {200: "ExtraSpec"}, body=schemas.EXTRA_SPEC_ONE,
                       path=("flavor_id", "key")),
            "delete": _op("Delete one extra spec", {200: None}, path=("flavor_id", "key")),
        },
        "/v2.1/os-server-groups": {
            "get": _op("Server groups", {200: _object({"server_groups": {"type": "array",
                                                                          "items": _ref("ServerGroup")}})},
                       query=("limit", "offset", "all_projects")),
            "post": _op("Create a server group", {200: _object({"server_group": _ref("ServerGroup")})},
                        body=schemas.SERVER_GROUP_CREATE),
        },
        "/v2.1/os-server-groups/{group_id}": {
            "get": _op("One server group", {200: _object({"server_group": _ref("ServerGroup")})},
                       path=("group_id",)),
            "delete": _op("Delete a server group", {204: None}, path=("group_id",)),
        },
        "/v2.1/os-aggregates": {
            "get": _op("Host aggregates", {200: _object({"aggregates": {"type": "array",
                                                                         "items": _ref("Aggregate")}})}),
            "post": _op("Create a host aggregate", {200: aggregate}, body=schemas.AGGREGATE_CREATE),
        },
        "/v2.1/os-aggregates/{aggregate_id}": {
            "get": _op("One host aggregate", {200: aggregate}, path=aggregate_id),
            "put": _op("Rename it or move it to another zone", {200: aggregate}, body=schemas.AGGREGATE_UPDATE,
                       path=aggregate_id),
            "delete": _op("Delete a host aggregate", {200: None}, path=aggregate_id),
        },
        "/v2.1/os-aggregates/{aggregate_id}/action": {"post": _op(
            "Add or remove a host, or set metadata", {200: aggregate}, body=_AGGREGATE_ACTION, path=aggregate_id)},
        "/v2.1/limits": {"get": _op("A project's usage; no quota (every maximum is -1)", {200: "Limits"},
                                    query=("tenant_id", "reserved"))},
    }


@functools.cache
def document() -> dict:
    """A fresh reading is ``copy.deepcopy(document())``: the result is shared."""
    return {
        "openapi": "3.1.0",
        "info": {"title": "Billeting compute API (Nova-compatible)", "version": "2.91"},
        "paths": _paths(),
        "components": {"schemas": _COMPONENTS,
                       "securitySchemes": {"token": {"type": "apiKey", "in": "header", "name": "X-Auth-Token"}}},
    }
