"""JSON schemas for query strings, by endpoint and microversion.

A failed check is reported with the validator's full text, which prints the
schema and the instance (docs/design/placement-http.md#query-strings, issue 11): upstream's clients and
operators see e.g. "Failed validating 'pattern' in schema['properties']
['limit']: {...}". So each schema below lists its keys in the order
upstream's does -- the order is part of the message. Each is built once per
distinct microversion range.

Values are always strings (the last occurrence of each key, docs/design/placement-http.md#query-strings).
"""
from __future__ import annotations

from functools import lru_cache

_STRING = {"type": "string"}
_UUID = {"type": "string", "format": "uuid"}
_ID = {"type": "string", "minLength": 1, "maxLength": 255}
# Quirk docs/design/placement-quirks.md#q8: the "all" branch is unanchored at the end, so "allfoo" passes
# validation and then simply matches no consumer type.
_CONSUMER_TYPE_PATTERN = "^[A-Z0-9_]+$|^all|^unknown$"
_NUMBERED_SUFFIX = "[1-9][0-9]*"
_NAMED_SUFFIX = "[a-zA-Z0-9_-]{1,64}"


def _strict(properties: dict, **extra) -> dict:
    return {"type": "object", "properties": properties, **extra, "additionalProperties": False}


# --- GET /resource_providers ------------------------------------------------

_PROVIDER_PARAMS_SINCE = [  # in the order upstream's schema lists them
    ((1, 0), "name", _STRING),
    ((1, 0), "uuid", _UUID),
    ((1, 3), "member_of", _STRING),
    ((1, 4), "resources", _STRING),
    ((1, 14), "in_tree", _UUID),
    ((1, 18), "required", _STRING),
]


def providers_list(mv: tuple[int, int]) -> dict:
    return _providers_list(max(since for since, _, _ in _PROVIDER_PARAMS_SINCE if since <= mv))


@lru_cache(maxsize=None)
def _providers_list(level: tuple[int, int]) -> dict:
    return _strict({name: dict(schema) for since, name, schema in _PROVIDER_PARAMS_SINCE
                    if since <= level})


# --- GET /allocation_candidates ---------------------------------------------

_CANDIDATE_LEVELS = ((1, 10), (1, 16), (1, 17), (1, 21), (1, 25), (1, 31), (1, 33), (1, 35), (1, 36))
_LIMIT = {"type": ["integer", "string"], "pattern": "^[1-9][0-9]*$", "minimum": 1, "minLength": 1}


def candidates(mv: tuple[int, int]) -> dict:
    return _candidates(max(level for level in _CANDIDATE_LEVELS if level <= mv))


@lru_cache(maxsize=None)
def _candidates(level: tuple[int, int]) -> dict:
    if level < (1, 25):
        # One unnamed group: plain properties, ``resources`` required.
        properties: dict = {"resources": dict(_STRING)}
        if level >= (1, 16):
            properties["limit"] = dict(_LIMIT)
        if level >= (1, 17):
            properties["required"] = {"type": ["string"]}
        if level >= (1, 21):
            properties["member_of"] = {"type": ["string"]}
        return {"type": "object", "properties": properties, "required": ["resources"],
                "additionalProperties": False}
    # Request groups: the group keys become patterns (numbered suffixes,
    # from 1.33 named ones); upstream appends them after additionalProperties.
    suffix = _NAMED_SUFFIX if level >= (1, 33) else _NUMBERED_SUFFIX
    bases = ["resources", "required", "member_of"] + (["in_tree"] if level >= (1, 31) else [])
    properties = {"limit": dict(_LIMIT), "group_policy": {"type": "string", "enum": ["none", "isolate"]}}
    if level >= (1, 35):
        properties["root_required"] = {"type": ["string"]}
    if level >= (1, 36):
        properties["same_subtree"] = {"type": ["string"]}
    return {"type": "object", "properties": properties, "additionalProperties": False,
            "patternProperties": {f"^{base}({suffix})?$": dict(_STRING) for base in bases}}


# --- GET /traits, GET /usages ----------------------------------------------

TRAITS_LIST = _strict({"name": dict(_STRING), "associated": dict(_STRING)})


def usages(mv: tuple[int, int]) -> dict:
    return _usages(mv >= (1, 38))


@lru_cache(maxsize=None)
def _usages(with_consumer_type: bool) -> dict:
    properties = {"project_id": dict(_ID), "user_id": dict(_ID)}
    if with_consumer_type:
        properties["consumer_type"] = {"type": "string", "pattern": _CONSUMER_TYPE_PATTERN,
                                       "minLength": 1, "maxLength": 255}
    return _strict(properties, required=["project_id"])
