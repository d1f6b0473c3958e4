"""Body of POST /reshaper (docs/design/placement-endpoints.md#reshaper)."""
from __future__ import annotations

from billeting.placement.api.schemas import inventories as inventory_schemas
from billeting.placement.api.schemas.allocations import UUID_KEY, consumer_entry

# One provider's new inventory: the PUT .../inventories body, except that a
# record under a key that cannot be a class name must still be a record
# (it is then refused as an unknown class rather than crashing the parser).
_PROVIDER_INVENTORY = {
    "type": "object",
    "properties": {
        "resource_provider_generation": {"type": "integer"},
        "inventories": {"type": "object", "additionalProperties": inventory_schemas.RECORD},
    },
    "required": ["resource_provider_generation", "inventories"],
    "additionalProperties": False,
}


def body(mv: tuple[int, int]) -> dict:
    return {
        "type": "object",
        "properties": {
            "inventories": {
                "type": "object", "minProperties": 1,
                "patternProperties": {UUID_KEY: _PROVIDER_INVENTORY},
                "additionalProperties": False,
            },
            "allocations": {
                "type": "object",
                "patternProperties": {UUID_KEY: consumer_entry(mv, min_allocations=0)},
                "additionalProperties": False,
            },
        },
        "required": ["inventories", "allocations"],
        "additionalProperties": False,
    }
