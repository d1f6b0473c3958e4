"""What a decision raises besides its Selections: the scheduler core's errors.

Front doors map them to their own answers at the edge (HTTP status and
code, an RPC failure); nothing below them knows about HTTP.
"""
from __future__ import annotations

from billeting.scheduler.explain import Explanation


class SchedulerError(Exception):
    """The request could not be decided for a reason other than capacity."""

    def __init__(self, message: str, *, status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


class InvalidRequest(SchedulerError):
    pass


class PlacementTrouble(SchedulerError):
    """Placement was unreachable or refused the query."""

    def __init__(self, message: str) -> None:
        super().__init__(message, status=503)


class ConsumerConflict(SchedulerError):
    """An instance already holds allocations: it is not a new build."""

    def __init__(self, message: str) -> None:
        super().__init__(message, status=409)


class NoValidHost(Exception):
    """No host could take the request; ``explanation`` says why, in numbers."""

    def __init__(self, explanation: Explanation) -> None:
        super().__init__(explanation.message)
        self.explanation = explanation
