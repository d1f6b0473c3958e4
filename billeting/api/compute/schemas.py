"""JSON schemas of request bodies (checked before any handler reads them)."""
from __future__ import annotations

import base64
import binascii
import math
import unicodedata

import jsonschema
import orjson

from billeting.api.compute.errors import bad_request
from billeting.common.http.inputs import nul_at
from billeting.common.http.json_depth import TOO_DEEP, too_deep
from billeting.common.uuids import is_uuid_like

# The API database's INT columns (flavor sizes, counts) hold 32 bits on every
# server database; Nova caps these values at the same number.
INT_MAX = 2**31 - 1

_CHECKER = jsonschema.FormatChecker(jsonschema.Draft4Validator.FORMAT_CHECKER.checkers)

# Characters a name may not hold anywhere: controls, format characters,
# surrogates, private-use and unassigned code points, line/paragraph separators.
_UNPRINTABLE = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


@_CHECKER.checks("name")
def _is_name(value: object) -> bool:
    """Nova's rule for names: printable, no leading or trailing whitespace."""
    if not isinstance(value, str) or not value:
        return True  # type and length are the schema's other keywords' job
    if value[0].isspace() or value[-1].isspace():
        return False
    return all(unicodedata.category(ch) not in _UNPRINTABLE for ch in value)


@_CHECKER.checks("base64")
def _is_base64(value: object) -> bool:
    """``user_data`` is base64 text (line breaks allowed, as Nova decodes it)."""
    if not isinstance(value, str):
        return True
    try:
        base64.decodebytes(value.encode("utf-8"))
    except (binascii.Error, ValueError):
        return False
    return True


@_CHECKER.checks("uuid")
def _is_uuid(value: object) -> bool:
    """What Nova takes for a uuid (upper case, no dashes, braces: oslo's
    rule, as Placement's); jsonschema's Draft 4 checker knows no such format."""
    return not isinstance(value, str) or is_uuid_like(value)


@_CHECKER.checks("int32")
def _is_int32(value: object) -> bool:
    """Integers given as JSON numbers or as digit strings, at most ``INT_MAX``."""
    if isinstance(value, bool):
        return True
    if isinstance(value, str):
        digits = value.lstrip("0")
        return not value.isdigit() or len(digits) <= 10 and int(digits or "0") <= INT_MAX
    return not isinstance(value, int) or value <= INT_MAX


# The largest value a FLOAT column keeps on MariaDB (single precision there).
FLOAT32_MAX = 3.4028234e38


@_CHECKER.checks("float32")
def _is_float32(value: object) -> bool:
    """A number (or decimal string) a FLOAT column keeps and JSON can carry back:
    "inf" would be answered as ``Infinity``, which no strict JSON parser reads."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return True
    try:
        number = float(value)
    except (ValueError, OverflowError):
        return True  # not a number at all: the pattern's job
    return math.isfinite(number) and abs(number) <= FLOAT32_MAX


# A TEXT column holds 65535 bytes on MySQL/MariaDB, not characters: Nova's
# 65535 characters of "é" were kept on SQLite and PostgreSQL, a 400 there.
TEXT_BYTES = 65535


@_CHECKER.checks("text64k")
def _fits_text(value: object) -> bool:
    return not isinstance(value, str) or len(value) <= TEXT_BYTES // 4 or len(value.encode("utf-8")) <= TEXT_BYTES


_NAME = {"type": "string", "minLength": 1, "maxLength": 255, "format": "name"}
_INT0 = {"type": ["integer", "string"], "pattern": r"^[0-9]+$", "minimum": 0, "format": "int32"}
# "minimum" applies to numbers only: a string must show a non-zero digit itself.
_INT1 = {"type": ["integer", "string"], "pattern": r"^0*[1-9][0-9]*$", "minimum": 1, "format": "int32"}

# Nova's characters, none of which a path segment changes: an id holding "/",
# "?", "#" or "%" was kept, but its own links (and GET, DELETE, flavorRef)
# named another path. No space at either end (MariaDB would match "1 " to "1").
_FLAVOR_ID = {"type": ["string", "integer", "null"], "minLength": 1, "maxLength": 255,
              "pattern": r"^[A-Za-z0-9._-]([A-Za-z0-9._ -]*[A-Za-z0-9._-])?$"}

FLAVOR_CREATE = {
    "type": "object",
    "properties": {"flavor": {
        "type": "object",
        "properties": {
            "name": _NAME, "ram": _INT1, "vcpus": _INT1, "disk": _INT0,
            "id": _FLAVOR_ID,
            "OS-FLV-EXT-DATA:ephemeral": _INT0,
            "swap": {"type": ["integer", "string"], "pattern": r"^[0-9]*$", "minimum": 0, "format": "int32"},
            "rxtx_factor": {"type": ["number", "string"], "pattern": r"^[0-9]+(\.[0-9]+)?$", "minimum": 0,
                            "format": "float32"},
            "os-flavor-access:is_public": {"type": ["boolean", "string"]},
            "description": {"type": ["string", "null"], "maxLength": 65535, "format": "text64k"},
        },
        "required": ["name", "ram", "vcpus", "disk"],
        "additionalProperties": False,
    }},
    "required": ["flavor"],
    "additionalProperties": False,
}

# Nova's characters, but no space at either end: MariaDB compares strings
# ignoring trailing spaces, so "k" and "k " would be one key there and two elsewhere.
_SPEC_KEY = r"^[a-zA-Z0-9_\-:.]([a-zA-Z0-9_\-:. ]{0,253}[a-zA-Z0-9_\-:.])?$"

# The value column holds 255 characters (as Nova's); numbers and booleans
# are kept as their text, which never comes near that.
_SPEC_VALUE = {"type": ["string", "integer", "number", "boolean"], "maxLength": 255}

EXTRA_SPECS = {
    "type": "object",
    "properties": {"extra_specs": {
        "type": "object",
        "patternProperties": {_SPEC_KEY: _SPEC_VALUE},
        "additionalProperties": False,
    }},
    "required": ["extra_specs"],
    "additionalProperties": False,
}

EXTRA_SPEC_ONE = {
    "type": "object",
    "patternProperties": {_SPEC_KEY: _SPEC_VALUE},
    "minProperties": 1, "maxProperties": 1,
    "additionalProperties": False,
}

# POST /flavors/{id}/action: addTenantAccess or removeTenantAccess.
_TENANT = {"type": "object", "properties": {"tenant": {"type": "string", "minLength": 1, "maxLength": 255,
                                                       "pattern": r"^\S(.*\S)?$"}},
           "required": ["tenant"], "additionalProperties": False}
FLAVOR_ACTION = {
    "type": "object",
    "properties": {"addTenantAccess": _TENANT, "removeTenantAccess": _TENANT},
    "minProperties": 1, "maxProperties": 1,
    "additionalProperties": False,
}

_NETWORKS = {"oneOf": [
    {"type": "string", "enum": ["none", "auto"]},
    {"type": "array", "maxItems": 0},
]}

# Nova's hints: the known ones checked, any other kept as given.
_HINTS = {
    "type": "object",
    "properties": {
        "group": {"type": "string", "format": "uuid", "maxLength": 36},
        # A server's uuid, or a list of them ("format" checks strings, "items" lists).
        "same_host": {"type": ["string", "array"], "format": "uuid", "items": {"type": "string", "format": "uuid"}},
        "different_host": {"type": ["string", "array"], "format": "uuid",
                           "items": {"type": "string", "format": "uuid"}},
    },
    "additionalProperties": True,
}

# One block device mapping (v2): the fields' types, as Nova checks them; the
# volumes themselves are outside Billeting (only "boots from a volume" counts).
_BOOL_TEXT = {"type": ["boolean", "string"],
              "enum": [True, False, "True", "False", "true", "false", "1", "0", "yes", "no", "on", "off"]}
_BLOCK_DEVICE = {
    "type": "object",
    "properties": {
        "boot_index": {"type": ["integer", "string", "null"], "pattern": r"^-?[0-9]+$"},
        "source_type": {"type": "string", "enum": ["volume", "image", "snapshot", "blank"]},
        "destination_type": {"type": "string", "enum": ["volume", "local"]},
        "uuid": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": r"^[a-zA-Z0-9._-]*$"},
        "volume_size": _INT0,
        "delete_on_termination": _BOOL_TEXT,
        "no_device": {},
        "device_name": {"type": ["string", "null"], "maxLength": 255},
        "device_type": {"type": ["string", "null"], "maxLength": 255},
        "disk_bus": {"type": ["string", "null"], "maxLength": 255},
        "guest_format": {"type": ["string", "null"], "maxLength": 255},
        "volume_type": {"type": ["string", "null"], "maxLength": 255},
        "tag": {"type": "string", "minLength": 1, "maxLength": 60, "pattern": "^[^,/]*$"},
    },
}

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
                "metadata": {"type": "object",  # Nova's key rule
                             "patternProperties": {r"^[a-zA-Z0-9\-_:. ]{1,255}$": {"type": "string", "maxLength": 255}},
                             "additionalProperties": False},
                "description": {"type": ["string", "null"], "maxLength": 255},
                "key_name": {"type": ["string", "null"]},
                "security_groups": {"type": "array"},
                "config_drive": {"type": ["boolean", "string"]},
                "user_data": {"type": "string", "format": "base64", "maxLength": 65535},
                "adminPass": {"type": "string"},
                "OS-DCF:diskConfig": {"type": "string", "enum": ["AUTO", "MANUAL"]},
                "block_device_mapping_v2": {"type": "array", "items": _BLOCK_DEVICE},
                "tags": {"type": "array", "maxItems": 50,
                         "items": {"type": "string", "minLength": 1, "maxLength": 60, "pattern": "^[^,/]*$"}},
                "return_reservation_id": {"type": ["boolean", "string"]},
                # From 2.74 (the handler refuses them before).
                "host": {"type": "string", "minLength": 1, "maxLength": 255, "format": "name"},
                "hypervisor_hostname": {"type": "string", "minLength": 1, "maxLength": 255, "format": "name"},
            },
            "required": ["name", "flavorRef"],
            "additionalProperties": False,
        },
        "os:scheduler_hints": _HINTS,
        "OS-SCH-HNT:scheduler_hints": _HINTS,
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
                "max_server_per_host": _INT1,
                # Billeting's: the failure domain the policy applies to ("host" or a topology level).
                "scope": {"type": "string", "minLength": 1, "maxLength": 64}},
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

def body(req) -> object:
    """The parsed JSON body, or a 400 (also for a NUL character in any key or
    string: PostgreSQL cannot store one, so no backend accepts one)."""
    raw = req.bounded_stream.read()
    if not raw:
        raise bad_request("The request body is empty: a JSON object is required.")
    try:
        document = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise bad_request("Malformed request body: the body is not valid JSON.") from None
    if too_deep(raw, document):  # before anything that recurses (the NUL search, the validator)
        raise bad_request(f"Malformed request body: {TOO_DEEP}")
    if b"\\u0000" in raw or b"\x00" in raw:  # cheap test first; the walk says where
        found = nul_at(document)
        if found is not None:
            where = "/".join(str(part) for part in found[0])
            raise bad_request(f"Invalid input for field/attribute {where or 'body'}. "
                              "NUL characters (\\u0000) are not allowed.")
    return document


def check(document: object, schema: dict) -> None:
    validator = jsonschema.Draft4Validator(schema, format_checker=_CHECKER)
    error = jsonschema.exceptions.best_match(validator.iter_errors(document))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path)
        raise bad_request(f"Invalid input for field/attribute {where or 'body'}. Value: "
                          f"{_short(error.instance)}. {_what_failed(error)}")


# What a limit's keyword says when it fails: the limit itself, not the
# validator's message, which quotes the (maybe huge) value first.
_LIMIT_WORDS = {"maxLength": "is longer than {} characters", "maximum": "is more than {}",
                "maxItems": "has more than {} items", "maxProperties": "has more than {} entries"}
_FORMAT_WORDS = {"text64k": f"is longer than {TEXT_BYTES} bytes as UTF-8",
                 "int32": f"is more than {INT_MAX}", "float32": f"is not a finite number of at most {FLOAT32_MAX}"}


def _what_failed(error: jsonschema.ValidationError) -> str:
    if error.validator in _LIMIT_WORDS:
        return "The value " + _LIMIT_WORDS[error.validator].format(error.validator_value) + "."
    if error.validator == "format" and error.validator_value in _FORMAT_WORDS:
        return "The value " + _FORMAT_WORDS[error.validator_value] + "."
    return error.message[:300]


def _short(value: object) -> str:
    text = orjson.dumps(value).decode() if not isinstance(value, str) else value
    return text if len(text) <= 100 else text[:97] + "..."


# --- os-aggregates ------------------------------------------------------------
# A zone name may not hold ':' (a server's "zone:host:node" form splits on it).
_AZ_NAME = {"type": "string", "minLength": 1, "maxLength": 255, "format": "name", "pattern": "^[^:]*$"}
_AGGREGATE_FIELDS = {"name": _NAME, "availability_zone": {"oneOf": [_AZ_NAME, {"type": "null"}]}}

AGGREGATE_CREATE = {
    "type": "object",
    "properties": {"aggregate": {
        "type": "object", "properties": _AGGREGATE_FIELDS, "required": ["name"], "additionalProperties": False}},
    "required": ["aggregate"],
    "additionalProperties": False,
}

AGGREGATE_UPDATE = {
    "type": "object",
    "properties": {"aggregate": {
        "type": "object", "properties": _AGGREGATE_FIELDS, "minProperties": 1, "additionalProperties": False}},
    "required": ["aggregate"],
    "additionalProperties": False,
}

_AGGREGATE_HOST = {"type": "object", "properties": {"host": {"type": "string", "minLength": 1, "maxLength": 255,
                                                            "format": "name"}},
                   "required": ["host"], "additionalProperties": False}

AGGREGATE_ACTIONS = {
    "add_host": _AGGREGATE_HOST,
    "remove_host": _AGGREGATE_HOST,
    "set_metadata": {
        "type": "object",
        "properties": {"metadata": {
            "type": "object",
            "patternProperties": {r"^[a-zA-Z0-9\-_:. ]{1,255}$": {
                "oneOf": [{"type": "string", "maxLength": 255}, {"type": "null"}]}},
            "additionalProperties": False}},
        "required": ["metadata"],
        "additionalProperties": False,
    },
}
