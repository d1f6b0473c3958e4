"""Body of PUT /resource_providers/{uuid}/traits. Names are not
pattern-checked here: standard and custom traits are both allowed."""
from __future__ import annotations

PROVIDER_TRAITS = {
    "type": "object",
    "properties": {
        "traits": {
            "type": "array",
            "items": {"type": "string", "minLength": 1, "maxLength": 255},
        },
        "resource_provider_generation": {"type": "integer"},
    },
    "required": ["traits", "resource_provider_generation"],
    "additionalProperties": False,
}
