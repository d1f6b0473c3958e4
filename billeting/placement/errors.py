"""Typed domain exceptions. The API layer maps each kind to an HTTP status.

``code`` is the Placement error code clients match on (docs/design/placement-http.md#errors); the
message texts are upstream's, word for word, because clients search
them for substrings.
"""
from __future__ import annotations

UNDEFINED = "placement.undefined_code"
CONCURRENT_UPDATE = "placement.concurrent_update"
INVENTORY_INUSE = "placement.inventory.inuse"
DUPLICATE_NAME = "placement.duplicate_name"
PROVIDER_INUSE = "placement.resource_provider.inuse"
PROVIDER_CANNOT_DELETE_PARENT = "placement.resource_provider.cannot_delete_parent"
PROVIDER_NOT_FOUND = "placement.resource_provider.not_found"
QUERY_DUPLICATE_KEY = "placement.query.duplicate_key"
QUERY_BAD_VALUE = "placement.query.bad_value"
QUERY_MISSING_VALUE = "placement.query.missing_value"


class PlacementError(Exception):
    """Base of every error that reaches a client as a Placement error body."""

    code: str = UNDEFINED

    def __init__(self, detail: str, *, code: str | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        if code is not None:
            self.code = code


class NotFound(PlacementError):
    """The named object does not exist (404)."""


class InvalidInput(PlacementError):
    """The request is well-formed HTTP but its content is not acceptable (400)."""


class Conflict(PlacementError):
    """The request conflicts with the current state (409)."""


class ConcurrentUpdate(Conflict):
    code = CONCURRENT_UPDATE


class InventoryInUse(Conflict):
    code = INVENTORY_INUSE
