"""Instance state transitions of the lifecycle actions (stop, start, shelve,
offload, unshelve, rebuild, lock), compare-and-set like ``move_states``.

    active|error ── stop ──▶ stopped ── start ──▶ active
    active|stopped ── shelve ──▶ shelved (on its host, allocation held)
    shelved ── offload ──▶ shelved/shelving_offloading ── allocation freed ──▶ shelved_offloaded (no host)
    shelved ── unshelve ──▶ active (same host)
    shelved_offloaded ── unshelve ──▶ shelved_offloaded/unshelving ── claimed ──▶ building/scheduling
                                       (then the build state machine of ``instances``: alternates,
                                        the cell conductor's retry, active; when every host failed,
                                        ``fail_unshelve``: back to shelved_offloaded with a fault)
    active|stopped|error ── rebuild ──▶ */rebuild_spawning ── compute respawned it ──▶ active|stopped

Who holds an allocation: ``stopped`` and ``shelved`` instances keep theirs
(they still occupy their host); ``shelved_offloaded`` ones hold nothing,
except while ``unshelving`` (the claim of the new host, written before the
record names it). A delete moves any of these to ``deleting`` first, so a
step that comes after it finds the row elsewhere and undoes its own work.
"""
from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import Connection, Engine

from billeting.cells import instances as inst
from billeting.cells import move_states
from billeting.cells.instances import InstanceRecord, TaskState, VmState
from billeting.cells.messages import BuildInstance, HostNode, RequestSummary
from billeting.common.db.tx import run_write
from billeting.scheduler.nova import Image
from billeting.scheduler.selection import Selection

STOPPABLE = (VmState.ACTIVE, VmState.ERROR)
SHELVABLE = (VmState.ACTIVE, VmState.STOPPED)
UNSHELVABLE = (VmState.SHELVED, VmState.SHELVED_OFFLOADED)
REBUILDABLE = (VmState.ACTIVE, VmState.STOPPED, VmState.ERROR)
# States whose instance still sits on its host: its guest is kept, its usage counted.
ON_HOST = (VmState.BUILDING, VmState.ACTIVE, VmState.RESIZED, VmState.STOPPED, VmState.SHELVED)

LOCKED_BY_OWNER, LOCKED_BY_ADMIN = "owner", "admin"


def _idle(vm_states, uuid: str, engine: Engine, values: dict) -> bool:
    return inst._write_cas(engine, uuid, {"vm_state": tuple(vm_states), "task_state": None}, values)


def stop(engine: Engine, uuid: str) -> bool:
    return _idle(STOPPABLE, uuid, engine, {"vm_state": VmState.STOPPED})


def start(engine: Engine, uuid: str) -> bool:
    return _idle((VmState.STOPPED,), uuid, engine, {"vm_state": VmState.ACTIVE})


def shelve(engine: Engine, uuid: str) -> bool:
    return _idle(SHELVABLE, uuid, engine, {"vm_state": VmState.SHELVED})


def unshelve_in_place(engine: Engine, uuid: str) -> bool:
    """A shelved instance never left its host: it runs there again."""
    return _idle((VmState.SHELVED,), uuid, engine, {"vm_state": VmState.ACTIVE})


def begin_offload(engine: Engine, uuid: str) -> bool:
    return _idle((VmState.SHELVED,), uuid, engine, {"task_state": TaskState.SHELVING_OFFLOADING})


def finish_offload(engine: Engine, uuid: str) -> bool:
    """The allocation is gone: the instance leaves its host."""
    return inst._write_cas(engine, uuid, {"vm_state": VmState.SHELVED, "task_state": TaskState.SHELVING_OFFLOADING},
                           {"vm_state": VmState.SHELVED_OFFLOADED, "task_state": None, "host": None, "node": None,
                            "compute_node_uuid": None, "selection": None, "alternates": "[]"})


def abandon(engine: Engine, uuid: str, *, expect: TaskState) -> bool:
    """A step that could not go on: the task is dropped, the vm state kept."""
    return inst._write_cas(engine, uuid, {"task_state": expect}, {"task_state": None})


def begin_unshelve(engine: Engine, uuid: str) -> bool:
    return _idle((VmState.SHELVED_OFFLOADED,), uuid, engine, {"task_state": TaskState.UNSHELVING})


def unshelve_build(record: InstanceRecord, selections: list[Selection], request: RequestSummary) -> BuildInstance:
    """The build cast of an unshelve: attempt 1 on the chosen host, the rest alternates."""
    chosen, *alternates = selections
    return BuildInstance(instance=record.spec, request=request, selection=chosen, alternates=tuple(alternates),
                         attempt=1)


def hand_to_build(engine: Engine, build: BuildInstance) -> bool:
    """unshelving → building/scheduling on the claimed host (attempt 1): from
    here the build state machine (and its reschedules) takes over."""
    sel = build.selection
    return inst._write_cas(engine, build.instance.uuid,
                           {"vm_state": VmState.SHELVED_OFFLOADED, "task_state": TaskState.UNSHELVING}, {
                               "vm_state": VmState.BUILDING, "task_state": TaskState.SCHEDULING,
                               "host": sel.service_host, "node": sel.nodename,
                               "compute_node_uuid": sel.compute_node_uuid,
                               "availability_zone": sel.availability_zone, "selection": inst._text(sel),
                               "alternates": inst._text(build.alternates), "num_attempts": build.attempt,
                               "request": inst._text(build.request),
                               "hosts_tried": inst._text([HostNode(sel.service_host, sel.nodename)]),
                               "last_failure": None})


def fail_unshelve(engine: Engine, uuid: str, *, attempt: int, from_states: tuple[TaskState, ...],
                  fault: inst.Fault, unclaim: Callable[[], object], host: str | None = None) -> bool:
    """The build of an unshelve failed for good: the server goes back to
    shelved_offloaded with ``fault`` (Nova's: it can be unshelved again), not
    ERROR. Like an offload it passes through shelving_offloading while
    ``unclaim`` frees what it may still hold, so an unshelve that comes next
    cannot have its own claim deleted by ours. False when the build had moved
    on (deleted, or taken over by another handler)."""
    now = inst.utcnow()

    def work(conn: Connection) -> bool:
        if not inst._cas(conn, uuid, inst._attempt(host, attempt, from_states), {
                "vm_state": VmState.SHELVED_OFFLOADED, "task_state": TaskState.SHELVING_OFFLOADING,
                "host": None, "node": None, "compute_node_uuid": None, "selection": None, "alternates": "[]",
                "last_failure": fault.message, "updated_at": now}):
            return False
        inst._add_fault(conn, uuid, fault, now)
        return True

    if not run_write(engine, work):
        return False
    unclaim()
    # (A delete meanwhile finishes on its own: this then changes nothing.)
    inst._write_cas(engine, uuid, {"vm_state": VmState.SHELVED_OFFLOADED,
                                   "task_state": TaskState.SHELVING_OFFLOADING}, {"task_state": None})
    return True


def begin_rebuild(engine: Engine, uuid: str, *, image: Image | None, name: str | None = None) -> bool:
    """The instance takes ``image`` (and ``name``; each kept when None) and its compute respawns it."""
    values: dict = {"task_state": TaskState.REBUILD_SPAWNING}
    if image is not None:
        values["image"] = inst._text(image)
    if name is not None:
        values["name"] = name
    return _idle(REBUILDABLE, uuid, engine, values)


def finish_rebuild(engine: Engine, uuid: str, *, host: str, vm_state: VmState) -> bool:
    return inst._write_cas(engine, uuid, {"task_state": TaskState.REBUILD_SPAWNING, "host": host},
                           {"vm_state": vm_state, "task_state": None})


def fail_rebuild(engine: Engine, uuid: str, *, fault: inst.Fault) -> bool:
    """The respawn failed: ERROR with the fault; the instance keeps its host and allocation."""
    return move_states.fail(engine, uuid, expect=TaskState.REBUILD_SPAWNING, fault=fault)


def lock(engine: Engine, uuid: str, *, by: str, reason: str | None) -> bool:
    """Lock a live instance (again: the newest locker and reason win, as in Nova)."""
    return inst._write_cas(engine, uuid, {"deleted_at": None},
                           {"locked_by": by, "locked_reason": reason})


def unlock(engine: Engine, uuid: str) -> bool:
    return inst._write_cas(engine, uuid, {"deleted_at": None}, {"locked_by": None, "locked_reason": None})
