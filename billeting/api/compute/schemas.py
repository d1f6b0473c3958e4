"""JSON schemas of request bodies (checked before any handler reads them)."""
from __future__ import annotations

import jsonschema
import orjson

from billeting.api.compute.errors import bad_request

_NAME = {"type": "string", "minLength": 1, "maxLength": 255}
_INT0 = {"type": ["integer", "string"], "pattern": r"^[0-9]+$", "minimum": 0}
_INT1 = {"type": ["integer", "string"], "pattern": r"^[0-9]+$", "minimum": 1}

FLAVOR_CREATE = {
    "type": "object",
    "properties": {"flavor": {
        "type": "object",
        "properties": {
            "name": _NAME, "ram": _INT1, "vcpus": _INT1, "disk": _INT0,
            "id": {"type": ["string", "integer", "null"], "minLength": 1, "maxLength": 255},
            "OS-FLV-EXT-DATA:ephemeral": _INT0,
            "swap": {"type": ["integer", "string"], "pattern": r"^[0-9]*$", "minimum": 0},
            "rxtx_factor": {"type": ["number", "string"], "minimum": 0},
            "os-flavor-access:is_public": {"type": ["boolean", "string"]},
            "description": {"type": ["string", "null"], "maxLength": 65535},
        },
        "required": ["name", "ram", "vcpus", "disk"],
        "additionalProperties": False,
    }},
    "required": ["flavor"],
    "additionalProperties": False,
}

EXTRA_SPECS = {
    "type": "object",
    "properties": {"extra_specs": {
        "type": "object",
        "patternProperties": {r"^[a-zA-Z0-9_\-:. ]{1,255}$": {"type": ["string", "integer", "number", "boolean"]}},
        "additionalProperties": False,
    }},
    "required": ["extra_specs"],
    "additionalProperties": False,
}

EXTRA_SPEC_ONE = {
    "type": "object",
    "patternProperties": {r"^[a-zA-Z0-9_\-:. ]{1,255}$": {"type": ["string", "integer", "number", "boolean"]}},
    "minProperties": 1, "maxProperties": 1,
    "additionalProperties": False,
}

_NETWORKS = {"oneOf": [
    {"type": "string", "enum": ["none", "auto"]},
    {"type": "array", "maxItems": 0},
]}

SERVER_CREATE = {
    "type": "object",
    "properties": {
        "server": {
            "type": "object",
            "properties": {
                "name": _NAME,
                "imageRef": {"type": ["string"], "maxLength": 255},
                "flavorRef": {"type": ["string", "integer"], "minLength": 1, "maxLength": 255},
                "networks": _NETWORKS,
                "min_count": _INT1, "max_count": _INT1,
                "availability_zone": {"type": "string", "minLength": 1, "maxLength": 255},
                "metadata": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 255}},
                "description": {"type": ["string", "null"], "maxLength": 255},
                "key_name": {"type": ["string", "null"]},
                "security_groups": {"type": "array"},
                "config_drive": {"type": ["boolean", "string"]},
                "user_data": {"type": "string"},
                "adminPass": {"type": "string"},
                "OS-DCF:diskConfig": {"type": "string", "enum": ["AUTO", "MANUAL"]},
                "block_device_mapping_v2": {"type": "array"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "return_reservation_id": {"type": ["boolean", "string"]},
            },
            "required": ["name", "flavorRef"],
            "additionalProperties": False,
        },
        "os:scheduler_hints": {
            "type": "object",
            "properties": {
                "group": {"type": "string", "format": "uuid", "maxLength": 36},
                "same_host": {"type": ["string", "array"], "items": {"type": "string"}},
                "different_host": {"type": ["string", "array"], "items": {"type": "string"}},
            },
            "additionalProperties": True,
        },
        "OS-SCH-HNT:scheduler_hints": {"type": "object"},
    },
    "required": ["server"],
    "additionalProperties": False,
}

SERVER_GROUP_CREATE = {
    "type": "object",
    "properties": {"server_group": {
        "type": "object",
        "properties": {
            "name": _NAME,
            "policy": {"type": "string", "enum": ["affinity", "anti-affinity", "soft-affinity",
                                                 "soft-anti-affinity"]},
            "policies": {"type": "array", "minItems": 1, "maxItems": 1, "items": {
                "type": "string", "enum": ["affinity", "anti-affinity", "soft-affinity", "soft-anti-affinity"]}},
            "rules": {"type": "object", "properties": {
                "max_server_per_host": {"type": ["integer", "string"], "pattern": r"^[0-9]+$", "minimum": 1}},
                "additionalProperties": False},
        },
        "required": ["name"],
        "additionalProperties": False,
    }},
    "required": ["server_group"],
    "additionalProperties": False,
}

SERVICE_UPDATE = {
    "type": "object",
    "properties": {
        "status": {"type": "string", "enum": ["enabled", "disabled"]},
        "disabled_reason": {"type": ["string", "null"], "minLength": 1, "maxLength": 255},
        "forced_down": {"type": "boolean"},
    },
    "additionalProperties": False,
}

SERVICE_LEGACY = {
    "type": "object",
    "properties": {
        "host": {"type": "string", "minLength": 1, "maxLength": 255},
        "binary": {"type": "string", "minLength": 1, "maxLength": 255},
        "disabled_reason": {"type": "string", "minLength": 1, "maxLength": 255},
        "forced_down": {"type": "boolean"},
    },
    "required": ["host", "binary"],
    "additionalProperties": False,
}

_CHECKER = jsonschema.Draft4Validator.FORMAT_CHECKER


def body(req) -> object:
    """The parsed JSON body, or a 400."""
    raw = req.bounded_stream.read()
    if not raw:
        raise bad_request("The request body is empty: a JSON object is required.")
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise bad_request("Malformed request body: the body is not valid JSON.") from None


def check(document: object, schema: dict) -> None:
    validator = jsonschema.Draft4Validator(schema, format_checker=_CHECKER)
    error = jsonschema.exceptions.best_match(validator.iter_errors(document))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path)
        raise bad_request(f"Invalid input for field/attribute {where or 'body'}. Value: "
                          f"{_short(error.instance)}. {error.message[:300]}")


def _short(value: object) -> str:
    text = orjson.dumps(value).decode() if not isinstance(value, str) else value
    return text if len(text) <= 100 else text[:97] + "..."
