"""Body of POST /resource_classes and of the rename PUT (mv 1.2–1.6); the
same name rule checks the path of the create-or-verify PUT (mv ≥ 1.7)."""
from __future__ import annotations

from billeting.placement.resource_classes import CUSTOM_PATTERN, MAX_NAME_LENGTH

NAME = {"type": "string", "pattern": CUSTOM_PATTERN, "maxLength": MAX_NAME_LENGTH}

BODY = {
    "type": "object",
    "properties": {"name": NAME},
    "required": ["name"],
    "additionalProperties": False,
}
