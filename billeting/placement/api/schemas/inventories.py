"""Bodies of the inventory writes (docs/design/placement-model.md#inventory,
docs/design/placement-endpoints.md#inventories)."""
from __future__ import annotations

from billeting.placement.inventories import MAX_INT

RC_PATTERN = "^[A-Z0-9_]+$"
# The single-precision float maximum, as upstream's schema has it.
MAX_RATIO = 3.40282e38

# Keys in upstream's order: validation errors print the schema.
_POSITIVE = {"type": "integer", "maximum": MAX_INT, "minimum": 1}

# Fields of one inventory record; resource_provider_generation is allowed
# inside a record and ignored unless the endpoint says otherwise.
_RECORD_PROPERTIES = {
    "resource_provider_generation": {"type": "integer"},
    "total": _POSITIVE,
    "reserved": {"type": "integer", "maximum": MAX_INT, "minimum": 0},
    "min_unit": _POSITIVE,
    "max_unit": _POSITIVE,
    "step_size": _POSITIVE,
    "allocation_ratio": {"type": "number", "maximum": MAX_RATIO},
}

RECORD = {
    "type": "object",
    "properties": _RECORD_PROPERTIES,
    "required": ["total"],
    "additionalProperties": False,
}

# POST .../inventories: one record plus its class.
POST = {
    "type": "object",
    "properties": {**_RECORD_PROPERTIES,
                   "resource_class": {"type": "string", "pattern": RC_PATTERN}},
    "required": ["total", "resource_class"],
    "additionalProperties": False,
}

# PUT .../inventories/{rc}: one record, generation required.
PUT_ONE = {
    "type": "object",
    "properties": _RECORD_PROPERTIES,
    "required": ["total", "resource_provider_generation"],
    "additionalProperties": False,
}

# PUT .../inventories: keys that look like class names are checked as
# records; anything else is left for the "unknown class" error.
PUT_ALL = {
    "type": "object",
    "properties": {
        "resource_provider_generation": {"type": "integer"},
        "inventories": {"type": "object", "patternProperties": {RC_PATTERN: RECORD}},
    },
    "required": ["resource_provider_generation", "inventories"],
    "additionalProperties": False,
}

# Record fields that become InventoryRecord attributes.
FIELDS = ("total", "reserved", "min_unit", "max_unit", "step_size", "allocation_ratio")
