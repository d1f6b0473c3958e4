"""JSON schemas of every request body (Draft 4, checked with Placement's
validator so messages read the same). A body that passes is converted to
the typed objects at once (msgspec), so no handler works on dicts."""
from __future__ import annotations

from billeting.scheduler.bounds import MAX_AMOUNT, MAX_VCPUS

UUID = {"type": "string", "format": "uuid"}
# No whitespace at either end: MariaDB compares "p" and "p " as equal, so such
# names would be one object there and two elsewhere.
NAME = {"type": "string", "minLength": 1, "maxLength": 255, "pattern": r"^\S(.*\S)?$"}
TRAIT = {"type": "string", "pattern": "^[A-Z0-9_]{1,255}$"}
RESOURCE_CLASS = {"type": "string", "pattern": "^[A-Z0-9_]{1,255}$"}
SUFFIX = {"type": "string", "pattern": "^([a-zA-Z0-9_-]{1,64})?$"}
DOMAIN_NAME = {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9_.:-]{0,254}$"}
LEVEL = {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]{0,63}$"}
# Any name: one no host can boot finds no host, and the explanation says so.
DISK_FORMAT = {"type": "string", "minLength": 1, "maxLength": 255}
MAX_INSTANCES = 1000
# Counts the API database stores in INT columns: 32 bits on every server database.
INT32_MAX = 2**31 - 1
MAX_ALTERNATES = 100


def _array(items: dict, *, min_items: int = 0, unique: bool = True, max_items: int | None = None) -> dict:
    schema = {"type": "array", "items": items, "minItems": min_items, "uniqueItems": unique}
    if max_items is not None:
        schema["maxItems"] = max_items
    return schema


REQUEST_GROUP = {
    "type": "object",
    "properties": {
        "suffix": SUFFIX,
        "resources": {"type": "object", "patternProperties": {"^[A-Z0-9_]{1,255}$": {
            "type": "integer", "minimum": 1, "maximum": MAX_AMOUNT}},
                      "additionalProperties": False},
        # Each entry is one name, or an any-of list of names (["A", ["B", "C"]]: A and (B or C)).
        "required": _array({"oneOf": [TRAIT, _array(TRAIT, min_items=1)]}),
        "forbidden": _array(TRAIT),
        "member_of": _array({"oneOf": [UUID, _array(UUID, min_items=1)]}),
        "forbidden_aggregates": _array(UUID),
        "in_tree": UUID,
    },
    "additionalProperties": False,
}

SERVER_GROUP_OBJECT = {
    "type": "object",
    "properties": {
        "uuid": UUID,
        "policy": {"enum": ["affinity", "anti-affinity", "soft-affinity", "soft-anti-affinity"]},
        "max_server_per_host": {"type": "integer", "minimum": 1, "maximum": INT32_MAX},
        "scope": LEVEL,
        "members": _array(UUID),
    },
    "required": ["uuid", "policy"],
    "additionalProperties": False,
}

# Fields of a ScheduleRequest that both forms share.
_COMMON = {
    "instance_uuids": _array(UUID, min_items=1, max_items=MAX_INSTANCES),
    "project_id": NAME,
    "user_id": NAME,
    "availability_zone": NAME,
    "destination": {"type": "object", "properties": {"host": NAME, "node": NAME, "cell": NAME},
                    "additionalProperties": False},
    "ignore_hosts": _array(NAME),
    "alternates": {"type": "integer", "minimum": 0, "maximum": MAX_ALTERNATES},
    "dry_run": {"type": "boolean"},
    "is_bfv": {"type": "boolean"},
}

SELECTIONS = {
    "type": "object",
    "properties": {
        **_COMMON,
        "groups": _array(REQUEST_GROUP, min_items=1, unique=False),
        "group_policy": {"enum": ["none", "isolate"]},
        "root_required": _array(TRAIT),
        "root_forbidden": _array(TRAIT),
        "same_subtree": _array(_array(SUFFIX, min_items=1)),
        "consumer_type": {"type": "string", "pattern": "^[A-Z0-9_]{1,255}$"},
        # A stored group's uuid (loaded, and new members recorded), or a
        # whole group the caller keeps itself.
        "server_group": {"anyOf": [UUID, SERVER_GROUP_OBJECT]},
        "same_host": _array(UUID),
        "different_host": _array(UUID),
        "domain_constraints": _array({
            "type": "object",
            "properties": {"relation": {"enum": ["same", "different"]}, "level": LEVEL,
                           "instances": _array(UUID, min_items=1)},
            "required": ["relation", "level", "instances"],
            "additionalProperties": False,
        }, unique=False),
        "near": {
            "type": "object",
            "properties": {"level": LEVEL, "instances": _array(UUID), "domain": DOMAIN_NAME},
            "required": ["level"],
            "additionalProperties": False,
        },
        "hints": {"type": "object", "additionalProperties": _array({"type": "string", "maxLength": 255},
                                                                    unique=False)},
        # For the filters that read a flavor or an image (the Nova form sends them whole).
        "flavor_name": NAME,
        "extra_specs": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 255}},
        "image_properties": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 255}},
        "image_disk_format": DISK_FORMAT,
    },
    "required": ["instance_uuids", "groups"],
    "additionalProperties": False,
}

FLAVOR = {
    "type": "object",
    "properties": {
        "vcpus": {"type": "integer", "minimum": 1, "maximum": MAX_VCPUS},
        "memory_mb": {"type": "integer", "minimum": 1, "maximum": MAX_AMOUNT},
        "root_gb": {"type": "integer", "minimum": 0, "maximum": MAX_AMOUNT},
        "ephemeral_gb": {"type": "integer", "minimum": 0, "maximum": MAX_AMOUNT},
        "swap": {"type": "integer", "minimum": 0, "maximum": MAX_AMOUNT},
        "name": {"type": "string", "maxLength": 255},
        "extra_specs": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 255}},
    },
    "required": ["vcpus", "memory_mb"],
    "additionalProperties": False,
}

# The Nova form: a flavor and an image, translated by billeting.scheduler.nova.
NOVA_SELECTIONS = {
    "type": "object",
    "properties": {
        **_COMMON,
        "flavor": FLAVOR,
        "image": {"type": "object", "properties": {
            "id": {"type": "string", "maxLength": 255},
            "disk_format": DISK_FORMAT,
            "properties": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 255}}},
            "additionalProperties": False},
        "scheduler_hints": {
            "type": "object",
            "properties": {"group": UUID, "same_host": _array(UUID), "different_host": _array(UUID)},
            "additionalProperties": _array({"type": "string", "maxLength": 255}, unique=False),
        },
    },
    "required": ["instance_uuids", "flavor"],
    "additionalProperties": False,
}

SERVER_GROUP = {
    "type": "object",
    "properties": {
        "name": NAME,
        "policy": {"enum": ["affinity", "anti-affinity", "soft-affinity", "soft-anti-affinity"]},
        "rules": {"type": "object",
                  "properties": {"max_server_per_host": {"type": "integer", "minimum": 1, "maximum": INT32_MAX}},
                  "additionalProperties": False},
        "scope": LEVEL,
        "project_id": NAME,
        "user_id": NAME,
    },
    "required": ["name", "policy"],
    "additionalProperties": False,
}

DOMAIN = {
    "type": "object",
    "properties": {"hosts": _array(NAME, min_items=1), "members": _array(DOMAIN_NAME, min_items=1)},
    "oneOf": [{"required": ["hosts"]}, {"required": ["members"]}],
    "additionalProperties": False,
}

ZONE = {
    "type": "object",
    "properties": {"hosts": _array(NAME)},
    "required": ["hosts"],
    "additionalProperties": False,
}

AGGREGATE = {
    "type": "object",
    "properties": {
        "name": DOMAIN_NAME,
        "metadata": {"type": "object", "patternProperties": {"^[A-Za-z0-9_.:-]{1,255}$": {
            "type": "string", "maxLength": 255}}, "additionalProperties": False},
    },
    "required": ["metadata"],
    "additionalProperties": False,
}

HOST_REPORT = {
    "type": "object",
    "properties": {
        "service_host": NAME,
        "cell": NAME,
        "enabled": {"type": "boolean"},
        "up": {"type": "boolean"},
        "heartbeat": {"type": "boolean"},
        "failed_builds": {"type": "integer", "minimum": 0, "maximum": INT32_MAX},
        "num_instances": {"type": "integer", "minimum": 0, "maximum": INT32_MAX},
        "num_io_ops": {"type": "integer", "minimum": 0, "maximum": INT32_MAX},
        # What the hypervisor is and can run (ComputeCapabilitiesFilter, ImagePropertiesFilter).
        "hypervisor_type": NAME,
        "hypervisor_version": {"type": "integer", "minimum": 0, "maximum": INT32_MAX},
        "cpu_info": {"type": "object", "maxProperties": 64},
        "supported_instances": _array({"type": "array", "items": NAME, "minItems": 3, "maxItems": 3},
                                      max_items=64, unique=False),
        # Keys without ":" (a "capabilities:" path splits at them).
        "stats": {"type": "object", "maxProperties": 128, "additionalProperties": False,
                  "patternProperties": {"^[A-Za-z0-9_.-]{1,255}$": {"type": "string", "maxLength": 255}}},
    },
    "additionalProperties": False,
}
