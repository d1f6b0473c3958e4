"""Bodies of POST and PUT /resource_providers[/{uuid}]."""
from __future__ import annotations

_NAME = {"type": "string", "maxLength": 200}
_UUID = {"type": "string", "format": "uuid"}
_PARENT = {"anyOf": [{"type": "string", "format": "uuid"}, {"type": "null"}]}


def create(mv: tuple[int, int]) -> dict:
    props = {"name": _NAME, "uuid": _UUID}
    if mv >= (1, 14):
        props["parent_provider_uuid"] = _PARENT
    return {"type": "object", "properties": props, "required": ["name"],
            "additionalProperties": False}


def update(mv: tuple[int, int]) -> dict:
    props = {"name": _NAME}
    if mv >= (1, 14):
        props["parent_provider_uuid"] = _PARENT
    return {"type": "object", "properties": props, "required": ["name"],
            "additionalProperties": False}
