"""The scheduler's errors: one hierarchy for the core, its service state and
its front doors.

Every error is a ``SchedulerError`` that carries the HTTP status and the
error code a client sees (``billeting.*``), so each front door reports it
the same way: the HTTP API renders it in one handler, the RPC server sends
its kind, status and code. Nothing here renders anything; ``translate``
names the scheduler error a failure of a lower layer (Placement, the API
database) amounts to.
"""
from __future__ import annotations

import msgspec
from sqlalchemy.exc import DataError, DBAPIError

from billeting.common.db.outage import unavailable_reason
from billeting.common.db.tx import RetriesExhausted
from billeting.placement_client.client import PlacementError
from billeting.scheduler.explain import Explanation

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
CLAIMS_RELEASED = "billeting.claims_released"


class SchedulerError(Exception):
    """A request the scheduler refuses, or cannot answer now: ``detail`` is a
    sentence a person can act on; ``status`` and ``code`` default per class."""

    status = 400
    code = UNDEFINED

    def __init__(self, detail: str, *, status: int | None = None, code: str | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        if status is not None:
            self.status = status
        if code is not None:
            self.code = code

    @property
    def message(self) -> str:
        """``detail``, under the name the conductors and the simulator read."""
        return self.detail

    def extra(self) -> dict | None:
        """Members the error document carries beside ``detail``."""
        return None


class InvalidRequest(SchedulerError):
    """The request itself is wrong (a body that validates, but means nothing here)."""

    code = INVALID


class NotFound(SchedulerError):
    status = 404
    code = NOT_FOUND


class Conflict(SchedulerError):
    """The request conflicts with the scheduler's state (a name taken, a domain in use)."""

    status = 409
    code = IN_USE


class ConsumerConflict(SchedulerError):
    """An instance already holds allocations: it is not a new build."""

    status = 409
    code = CONSUMER_CONFLICT


class PlacementTrouble(SchedulerError):
    """Placement was unreachable or refused the query; the request may be re-run."""

    status = 503
    code = PLACEMENT_UNAVAILABLE


class ConcurrentUpdate(SchedulerError):
    status = 409
    code = CONCURRENT_UPDATE


class DatabaseUnavailable(SchedulerError):
    status = 503
    code = DATABASE_UNAVAILABLE


class NoValidHost(SchedulerError):
    """No host could take the request; ``explanation`` says why, in numbers."""

    status = 409
    code = NO_VALID_HOST

    def __init__(self, explanation: Explanation) -> None:
        super().__init__(explanation.message)
        self.explanation = explanation

    def __reduce__(self):
        # Rebuilt from the explanation, not from the message: a process pool
        # that cannot unpickle a worker's exception hangs instead of raising.
        return (type(self), (self.explanation,))

    def extra(self) -> dict | None:
        return {"explanation": msgspec.to_builtins(self.explanation)}


def translate(exc: BaseException) -> SchedulerError | None:
    """The scheduler error a lower layer's failure amounts to; None for an
    exception that is a bug (a 500)."""
    if isinstance(exc, SchedulerError):
        return exc
    if isinstance(exc, PlacementError):
        return PlacementTrouble(f"Placement could not answer: {exc.detail or exc}")
    if isinstance(exc, RetriesExhausted):
        return ConcurrentUpdate(f"the change met concurrent changes too often; try again ({exc.reason})")
    if isinstance(exc, DBAPIError):
        if isinstance(exc, DataError) and unavailable_reason(exc) is None:
            # A value the database cannot keep (too long, out of range) is the
            # request's fault, not an outage to retry.
            return InvalidRequest("A value of the request does not fit the scheduler's API database (too long "
                                  "or out of range).")
        return DatabaseUnavailable("The scheduler's API database is not available; try again.")
    return None
