"""Errors of scheduler-service operations: status + code + a sentence a person can act on."""
from __future__ import annotations

UNDEFINED = "billeting.undefined_code"
NOT_FOUND = "billeting.not_found"
INVALID = "billeting.invalid"
UNKNOWN_LEVEL = "billeting.topology.unknown_level"
UNKNOWN_HOST = "billeting.unknown_host"
WRONG_LEVEL = "billeting.topology.wrong_level"
NAME_CLASH = "billeting.name_clash"
IN_USE = "billeting.in_use"
HOST_TAKEN = "billeting.host_taken"
GROUP_CONFLICT = "billeting.server_group.conflict"
NO_VALID_HOST = "billeting.no_valid_host"
CONSUMER_CONFLICT = "billeting.consumer_conflict"
PLACEMENT_UNAVAILABLE = "billeting.placement_unavailable"
CONCURRENT_UPDATE = "billeting.concurrent_update"
DATABASE_UNAVAILABLE = "billeting.database_unavailable"


class ServiceError(Exception):
    status = 400
    code = INVALID

    def __init__(self, detail: str, *, code: str | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        if code is not None:
            self.code = code


class BadRequest(ServiceError):
    status = 400
    code = INVALID


class NotFound(ServiceError):
    status = 404
    code = NOT_FOUND


class Conflict(ServiceError):
    status = 409
    code = IN_USE


class PlacementFailed(ServiceError):
    """Placement could not be read or updated; the operation may be re-run."""

    status = 503
    code = PLACEMENT_UNAVAILABLE
