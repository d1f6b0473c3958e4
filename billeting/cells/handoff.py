"""What the API level calls to hand work to a cell (the super conductor and
the compute API hold every cell's database and bus; a cell holds neither
of theirs).

    start_build      record the instance in the chosen cell, cast the build
    bury_in_cell0    record an instance that never got a host, in ERROR
    request_delete   delete through the compute, or in the cell when it is down

Each is safe to repeat and safe to die in: a build recorded but never cast
is re-cast by the cell conductor's sweep; a delete marked but never
carried out is finished by it.
"""
from __future__ import annotations

import enum
from collections.abc import Sequence

from sqlalchemy import Engine

from billeting.cells import instances as inst
from billeting.cells import services
from billeting.cells.messages import BuildInstance, InstanceSpec, RequestSummary
from billeting.cells.rpc import CellConductorAPI, ComputeAPI
from billeting.messaging import Bus
from billeting.scheduler.selection import Selection


def build_message(record: inst.InstanceRecord) -> BuildInstance:
    """The cast for the record's current attempt (for re-casting it)."""
    if record.selection is None:
        raise ValueError(f"instance {record.uuid} has no current host")
    return BuildInstance(instance=record.spec, request=record.request, selection=record.selection,
                         alternates=record.alternates, attempt=record.num_attempts)


def start_build(engine: Engine, bus: Bus, *, instance: InstanceSpec, request: RequestSummary,
                selections: Sequence[Selection]) -> inst.InstanceRecord:
    """``selections`` is one instance's line from ``select_destinations``:
    the chosen host (claimed) first, then its alternates. The record is
    written before the cast, so a compute always finds it. Raises
    InstanceExists when the instance was already handed over."""
    if not selections:
        raise ValueError("start_build needs the chosen Selection")
    chosen, *alternates = selections
    if chosen.consumer_uuid != instance.uuid:
        raise ValueError(f"the Selection is for {chosen.consumer_uuid}, not for {instance.uuid}")
    build = BuildInstance(instance=instance, request=request, selection=chosen, alternates=tuple(alternates),
                          attempt=1)
    record = inst.create(engine, build)
    ComputeAPI(bus).build_and_run_instance(chosen.service_host, build)
    return record


def bury_in_cell0(engine: Engine, *, instance: InstanceSpec, request: RequestSummary, reason: str,
                  details: str = "") -> inst.InstanceRecord:
    """The instance could not be scheduled (e.g. "No valid host was found. ...")."""
    return inst.bury(engine, instance, request,
                     inst.Fault(code=inst.FAULT_CODE, message=reason, details=details or reason))


class DeleteRoute(enum.StrEnum):
    COMPUTE = "compute"      # the compute runs it: destroys the guest, frees the allocation
    CONDUCTOR = "conductor"  # the compute is down or there is none: the cell conductor frees it
    NOTHING = "nothing"      # no such instance, or already deleted


def request_delete(engine: Engine, bus: Bus | None, instance_uuid: str, *,
                   down_time_s: float = services.DEFAULT_DOWN_TIME_S) -> DeleteRoute:
    """Mark the instance deleting, then cast the delete to whoever can carry
    it out. A cell without a bus (cell0) holds no allocations and no guests:
    the delete finishes here."""
    before = inst.begin_delete(engine, instance_uuid)
    if before is None:
        return DeleteRoute.NOTHING
    if bus is None:
        inst.finish_delete(engine, instance_uuid)
        return DeleteRoute.NOTHING
    if before.host is not None and services.is_up(engine, before.host, down_time_s=down_time_s):
        ComputeAPI(bus).terminate_instance(before.host, instance_uuid)
        return DeleteRoute.COMPUTE
    CellConductorAPI(bus).delete_instance(instance_uuid)
    return DeleteRoute.CONDUCTOR
