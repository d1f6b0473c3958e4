"""The scheduler: a typed request in, claimed hosts plus alternates out.

    from billeting.scheduler import Scheduler, ScheduleRequest
    selections = scheduler.select_destinations(request, alternates=2)

See ``core`` for the algorithm, ``query`` for how a request becomes one
Placement query, ``pipeline`` (with ``filters`` and ``weighers``) for how
hosts are ranked, and ``nova`` for translating flavors and images.
"""
from billeting.scheduler.core import RankedHost, Scheduler
from billeting.scheduler.errors import ConsumerConflict, InvalidRequest, NoValidHost, PlacementTrouble, SchedulerError
from billeting.scheduler.request import (
    Destination,
    DomainConstraint,
    Nearness,
    RequestGroup,
    ScheduleRequest,
    ServerGroup,
)
from billeting.scheduler.selection import Selection
from billeting.scheduler.settings import SchedulerSettings

__all__ = ["ConsumerConflict", "Destination", "DomainConstraint", "InvalidRequest", "Nearness", "NoValidHost",
           "PlacementTrouble", "RankedHost", "RequestGroup", "ScheduleRequest", "Scheduler", "SchedulerError",
           "SchedulerSettings", "Selection", "ServerGroup"]
