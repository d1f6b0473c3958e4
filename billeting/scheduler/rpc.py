"""The scheduler's RPC front door, for the conductors: kombu, topic ``scheduler``.

    server: serve(bus, service)                    (any number of processes
                                                    on one bus: competing consumers)
    client: SchedulerClient(bus).select_destinations(request, alternates, timeout=...)

A call carries a ``SelectDestinations`` (the typed request, how many
alternates, optionally a stored server group's uuid) and answers
``list[list[Selection]]``. Failures come back typed: ``NoValidHost`` with
its ``Explanation``, the scheduler's other errors with their kind and HTTP
status, so a client raises the same exceptions the Python front door does.
Messages are acknowledged when taken (at most once): a scheduler that dies
mid-call never has the request decided twice; the caller times out.
"""
from __future__ import annotations

import logging
import time

import msgspec

from billeting import typeinfo
from billeting.messaging.bus import Bus, HandlerError, RemoteError, Server, sent_at
from billeting.placement_client.client import PlacementError
from billeting.scheduler import metrics
from billeting.scheduler.core import RankedHost
from billeting.scheduler.errors import (
    Conflict,
    ConsumerConflict,
    InvalidRequest,
    NotFound,
    NoValidHost,
    PlacementTrouble,
    SchedulerError,
    translate,
)
from billeting.scheduler.explain import Explanation
from billeting.scheduler.request import ScheduleRequest
from billeting.scheduler.selection import Selection

LOG = logging.getLogger(__name__)

TOPIC = "scheduler"
NO_VALID_HOST = "NoValidHost"
SCHEDULER_ERROR = "SchedulerError"


class SelectDestinations(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    request: ScheduleRequest
    alternates: int = 0
    group: str | None = None  # a stored server group: loaded, new members recorded


class DryRun(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    request: ScheduleRequest
    group: str | None = None


class ErrorInfo(msgspec.Struct, frozen=True):
    kind: str     # the SchedulerError's class: InvalidRequest, PlacementTrouble, NotFound, ...
    status: int   # the HTTP status the same failure gets from the HTTP API
    message: str
    code: str | None = None


_encode = msgspec.json.Encoder().encode
_decode_select = typeinfo.decoder(SelectDestinations).decode
_decode_dry_run = typeinfo.decoder(DryRun).decode
_decode_selections = typeinfo.decoder(list[list[Selection]]).decode
_decode_ranked = typeinfo.decoder(list[RankedHost]).decode
_decode_explanation = typeinfo.decoder(Explanation).decode
_decode_error = typeinfo.decoder(ErrorInfo).decode


def _typed_failure(work):
    """Run ``work``, turning the scheduler's exceptions into typed replies."""
    try:
        return work()
    except msgspec.DecodeError as exc:
        raise HandlerError(SCHEDULER_ERROR, f"malformed request: {exc}",
                           _encode(ErrorInfo("InvalidRequest", 400, f"malformed request: {exc}"))) from None
    except NoValidHost as exc:
        raise HandlerError(NO_VALID_HOST, exc.explanation.message, _encode(exc.explanation)) from None
    except (SchedulerError, PlacementError) as exc:  # Placement's: outside a decision (the catalog, a group's members)
        failure = translate(exc)
        raise HandlerError(SCHEDULER_ERROR, failure.detail, _encode(
            ErrorInfo(type(failure).__name__, failure.status, failure.detail, failure.code))) from None


def serve(bus: Bus, service, *, threads: int = 4) -> Server:
    """Serve the scheduler topic on ``bus`` with ``service`` (a SchedulerService)."""

    def select_destinations(payload: bytes) -> bytes:
        sent = sent_at()
        if sent is not None:
            metrics.observe_rpc_queue_wait(time.time() - sent)

        def work():
            msg = _decode_select(payload)
            # One line per call: operators (and the end-to-end test) count them.
            LOG.info("select_destinations: %d instance(s), %d alternate(s)",
                     len(msg.request.instance_uuids), msg.alternates)
            # The record of the claims in flight goes as the reply is handed to the bus (see ``inflight``).
            with metrics.front_door("rpc"):
                return service.inflight.run(msg.request.instance_uuids, lambda: _encode(
                    service.select(msg.request, msg.alternates, group=msg.group)))
        return _typed_failure(work)

    def dry_run(payload: bytes) -> bytes:
        def work():
            msg = _decode_dry_run(payload)
            return _encode(service.dry_run(msg.request, group=msg.group))
        return _typed_failure(work)

    server = bus.serve(TOPIC, {"select_destinations": select_destinations, "dry_run": dry_run},
                       threads=threads, ack_early=True)
    LOG.info("serving the %s topic on %s (%d thread(s))", TOPIC, bus.url_shown, threads)
    return server


# The kinds a client raises as their own class (any other: a SchedulerError
# with the status and code sent). BadRequest and PlacementFailed: the names
# schedulers before the one error hierarchy sent.
_ERRORS = {cls.__name__: cls for cls in (InvalidRequest, ConsumerConflict, PlacementTrouble, NotFound, Conflict)}
_ERRORS |= {"BadRequest": InvalidRequest, "PlacementFailed": PlacementTrouble}


def _raise_typed(exc: RemoteError):
    if exc.kind == NO_VALID_HOST:
        raise NoValidHost(_decode_explanation(exc.payload)) from None
    if exc.kind == SCHEDULER_ERROR:
        info = _decode_error(exc.payload)
        raise _ERRORS.get(info.kind, SchedulerError)(info.message, status=info.status, code=info.code) from None
    raise exc


class SchedulerClient:
    """Calls the scheduler over ``bus``; raises what ``Scheduler`` raises
    (NoValidHost with its explanation, InvalidRequest, ...), plus the bus's
    CallTimeout and BusUnavailable."""

    def __init__(self, bus: Bus, *, topic: str = TOPIC) -> None:
        self.bus = bus
        self.topic = topic

    def select_destinations(self, request: ScheduleRequest, alternates: int = 0, *, group: str | None = None,
                            timeout: float = 60.0) -> list[list[Selection]]:
        payload = _encode(SelectDestinations(request=request, alternates=alternates, group=group))
        try:
            reply = self.bus.call(self.topic, "select_destinations", payload, timeout=timeout)
        except RemoteError as exc:
            _raise_typed(exc)
        return _decode_selections(reply)

    def dry_run(self, request: ScheduleRequest, *, group: str | None = None,
                timeout: float = 60.0) -> list[RankedHost]:
        try:
            reply = self.bus.call(self.topic, "dry_run", _encode(DryRun(request=request, group=group)),
                                  timeout=timeout)
        except RemoteError as exc:
            _raise_typed(exc)
        return _decode_ranked(reply)
