"""Body of PUT /resource_providers/{uuid}/aggregates: a bare list before
1.19, an object carrying the provider generation from 1.19."""
from __future__ import annotations

AGGREGATE_LIST = {
    "type": "array",
    "items": {"type": "string", "format": "uuid"},
    "uniqueItems": True,
}

_WITH_GENERATION = {
    "type": "object",
    "properties": {
        "aggregates": AGGREGATE_LIST,
        "resource_provider_generation": {"type": "integer"},
    },
    "required": ["aggregates", "resource_provider_generation"],
    "additionalProperties": False,
}


def put(mv: tuple[int, int]) -> dict:
    return _WITH_GENERATION if mv >= (1, 19) else AGGREGATE_LIST
