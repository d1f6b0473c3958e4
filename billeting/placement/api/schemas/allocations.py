"""Bodies of PUT /allocations/{c} and POST /allocations, one schema per
microversion range (docs/design/placement-endpoints.md#allocations, #post-allocations). Strict at every level.

Keys are in upstream's order (and ``consumer_generation`` and ``mappings``
are written as upstream writes them): validation errors print the schema.
NUL characters are refused for every body before validation (util.read_json).
"""
from __future__ import annotations

# Keys of objects keyed by a provider or consumer uuid (docs/design/placement-http.md#value-formats).
UUID_KEY = "^[0-9a-fA-F-]{36}$"
RC_KEY = "^[A-Z0-9_]+$"

_OWNER_ID = {"type": "string", "minLength": 1, "maxLength": 255}
CONSUMER_GENERATION = {"type": ["integer", "null"], "additionalProperties": False}
CONSUMER_TYPE = {"type": "string", "pattern": RC_KEY, "minLength": 1, "maxLength": 255}
# Request-group suffix → provider uuids; accepted and ignored. (The key
# pattern is unanchored, as upstream's: keys are hardly constrained.)
MAPPINGS = {
    "type": "object",
    "minProperties": 1,
    "patternProperties": {
        "[a-zA-Z0-9_-]{1,64}": {"type": "array", "minItems": 1, "items": {"type": "string", "format": "uuid"}},
    },
}

# What upstream asks of every mapping (upstream's pattern above lets a key
# such as "" -- the unnamed group -- through unchecked); checked after the
# body schema, so that the body's own errors read as upstream's.
MAPPING_VALUES = {
    "type": "object",
    "additionalProperties": {"type": "array", "minItems": 1, "items": {"type": "string", "format": "uuid"}},
}

# Amounts only have a lower bound here: anything above an inventory's
# max_unit (itself at most 2**31-1) is refused by the admission rules.
RESOURCES = {
    "type": "object",
    "minProperties": 1,
    "patternProperties": {RC_KEY: {"type": "integer", "minimum": 1}},
    "additionalProperties": False,
}


def _list_form(mv: tuple[int, int]) -> dict:
    """1.0–1.11: a non-empty list of {resource_provider: {uuid}, resources}."""
    item = {
        "type": "object",
        "properties": {
            "resource_provider": {
                "type": "object",
                "properties": {"uuid": {"type": "string", "format": "uuid"}},
                "additionalProperties": False,
                "required": ["uuid"],
            },
            "resources": RESOURCES,
        },
        "required": ["resource_provider", "resources"],
        "additionalProperties": False,
    }
    props: dict = {"allocations": {"type": "array", "minItems": 1, "items": item}}
    required = ["allocations"]
    if mv >= (1, 8):
        props |= {"project_id": _OWNER_ID, "user_id": _OWNER_ID}
        required += ["project_id", "user_id"]
    return {"type": "object", "properties": props, "required": required,
            "additionalProperties": False}


def allocations_dict(*, min_entries: int) -> dict:
    """{<rp uuid>: {"resources": {...}, "generation": <ignored>}}."""
    entry = {
        "type": "object",
        "properties": {"generation": {"type": "integer"}, "resources": RESOURCES},
        "required": ["resources"],
        "additionalProperties": False,
    }
    return {"type": "object", "minProperties": min_entries,
            "patternProperties": {UUID_KEY: entry}, "additionalProperties": False}


def consumer_entry(mv: tuple[int, int], *, min_allocations: int) -> dict:
    """A consumer's allocation set with its owner, dict form (mv ≥ 1.12)."""
    props: dict = {"allocations": allocations_dict(min_entries=min_allocations),
                   "project_id": _OWNER_ID, "user_id": _OWNER_ID}
    required = ["allocations", "project_id", "user_id"]
    if mv >= (1, 28):
        props["consumer_generation"] = CONSUMER_GENERATION
        required.append("consumer_generation")
    if mv >= (1, 34):
        props["mappings"] = MAPPINGS
    if mv >= (1, 38):
        props["consumer_type"] = CONSUMER_TYPE
        required.append("consumer_type")
    return {"type": "object", "properties": props, "additionalProperties": False,
            "required": required}


def put(mv: tuple[int, int]) -> dict:
    """PUT /allocations/{consumer_uuid}."""
    if mv < (1, 12):
        return _list_form(mv)
    # Empty allocations (= delete) are allowed from 1.28.
    return consumer_entry(mv, min_allocations=0 if mv >= (1, 28) else 1)


def post(mv: tuple[int, int]) -> dict:
    """POST /allocations (mv ≥ 1.13): consumer uuid → entry; {} clears a consumer."""
    return {
        "type": "object",
        "minProperties": 1,
        "additionalProperties": False,
        "patternProperties": {UUID_KEY: consumer_entry(mv, min_allocations=0)},
    }
