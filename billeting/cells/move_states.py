"""Instance state transitions of moves (resize, cold and live migration,
evacuation), compare-and-set like the build transitions in ``instances``.

    active ── conductor takes it ──▶ active/resize_prep ── swapped, cast ──▶ active/resize_migrating
       ▲                                  │ no host / swap refused                │ destination takes it
       │◀─────────────────────────────────┘                                      ▼
       │◀──── destination failed: swapped back ──────────────────────── active/resize_finish
       │                                                                          │ guest built
       │                                                                          ▼
       │◀── confirm: active/resize_confirming ◀────────────────────────── resized (VERIFY_RESIZE),
       └─── revert: resized/resize_reverting ◀──────────────────────────   host = destination

    active ── live migrate ──▶ active/migrating ──▶ active on the destination (or back on the source)
    active|error ── evacuate ──▶ */rebuilding ──▶ active on the destination (or error)

Every transition names the task state it expects, so a delete (which moves
any state to ``deleting``) always wins over a move step that comes later:
the step finds the row elsewhere, gets ``False`` and undoes its own work.
"""
from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection, Engine

from billeting.cells import instances as inst
from billeting.cells.instances import Fault, TaskState, VmState
from billeting.common.db.tx import run_write
from billeting.scheduler.nova import Flavor
from billeting.scheduler.selection import Selection

# vm states a move may start from (evacuate also rebuilds an instance in ERROR that still has a host).
MOVABLE = (VmState.ACTIVE,)
EVACUABLE = (VmState.ACTIVE, VmState.ERROR)
# Instances in these states hold allocations (their own, and for resized ones the migration's).
HOLDING = (VmState.BUILDING, VmState.ACTIVE, VmState.RESIZED)


def begin(engine: Engine, uuid: str, task: TaskState, *, vm_states: Sequence[VmState] = MOVABLE,
          host: str | None = None) -> bool:
    """An idle instance (no task) in one of ``vm_states`` starts ``task``."""
    expect: dict = {"vm_state": tuple(vm_states), "task_state": None}
    if host is not None:
        expect["host"] = host
    return inst._write_cas(engine, uuid, expect, {"task_state": task})


def step(engine: Engine, uuid: str, *, expect: TaskState, to: TaskState | None,
         vm_state: VmState | None = None) -> bool:
    """One task state to the next (``to`` None: the move is over), optionally
    changing the vm state too; nothing else moves."""
    values: dict = {"task_state": to}
    if vm_state is not None:
        values["vm_state"] = vm_state
    return inst._write_cas(engine, uuid, {"task_state": expect}, values)


def settle(engine: Engine, uuid: str, *, expect: TaskState, vm_state: VmState, selection: Selection,
           flavor: Flavor | None = None, fault: Fault | None = None) -> bool:
    """The move step ``expect`` ends with the instance on ``selection``'s host
    (the destination after a move, the source after a revert or roll-back),
    holding that Selection's allocation, in ``vm_state`` with no task."""
    values: dict = {
        "vm_state": vm_state, "task_state": None, "host": selection.service_host, "node": selection.nodename,
        "compute_node_uuid": selection.compute_node_uuid, "availability_zone": selection.availability_zone,
        "selection": inst._text(selection)}
    if flavor is not None:
        values["flavor"] = inst._text(flavor)
    if fault is None:
        return inst._write_cas(engine, uuid, {"task_state": expect}, values)

    def work(conn: Connection) -> bool:
        if not inst._cas(conn, uuid, {"task_state": expect}, values):
            return False
        inst._add_fault(conn, uuid, fault, inst.utcnow())
        return True

    return run_write(engine, work)


def fail(engine: Engine, uuid: str, *, expect: TaskState, fault: Fault,
         vm_state: VmState = VmState.ERROR) -> bool:
    """The move step ``expect`` failed where nothing can be undone: ``vm_state``
    (ERROR by default) with ``fault``; the host stays what the record says."""
    def work(conn: Connection) -> bool:
        if not inst._cas(conn, uuid, {"task_state": expect}, {"vm_state": vm_state, "task_state": None,
                                                               "last_failure": fault.message}):
            return False
        inst._add_fault(conn, uuid, fault, inst.utcnow())
        return True

    return run_write(engine, work)
