"""UUIDs as the OpenStack APIs accept them, shared by every service's input checks."""
from __future__ import annotations

import uuid as uuidlib


def is_uuid_like(value: object) -> bool:
    """What ``uuid.UUID()`` parses to exactly the same hex digits once
    ``urn:``, ``uuid:``, braces and dashes are removed, in any case: so
    dash-less and upper-case forms pass, but not surrounding blanks or
    underscores (which ``UUID()`` alone would let through). Upstream's rule."""
    if not isinstance(value, str):
        return False
    try:
        parsed = uuidlib.UUID(value)
    except ValueError:
        return False
    bare = value.replace("urn:", "").replace("uuid:", "").strip("{}").replace("-", "").lower()
    return parsed.hex == bare


def normalize_uuid(value: str) -> str:
    """The canonical (lower-case, dashed) form of a UUID-like string."""
    return str(uuidlib.UUID(value))
