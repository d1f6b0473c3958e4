"""The result and events of an instance action, derived from the cell's state.

Nova's computes write action events up to the API database as they go. Here
the cells never call up (no handle to the API database or bus), so the API
reads what the cell already keeps when the action is shown instead:

* ``create`` — the instance record: ACTIVE (or later moved, resized, ...)
  means the build succeeded at ``launched_at``; ERROR means it failed. The
  super conductor closes the action itself only when the instance never
  reached a cell (cell0).
* moves — the migration record. The API names the migration after the
  request that started the move (``migration_uuid``), so it can find it
  again; its status says whether the compute side finished or failed.
* ``confirmResize``/``revertResize`` — the conductor does the work while the
  request waits, so the API closes them before it answers.

When the derived result is final the API also writes it back to its own
action row (``instance_actions.close``), so listings stay cheap and the
result survives the cell record being archived.
"""
from __future__ import annotations

import dataclasses
import datetime as dt
import uuid as uuidlib

from billeting.apidb.instance_actions import InstanceAction
from billeting.cells.instances import Fault, InstanceRecord
from billeting.cells.moves import MigrationRecord

_NS = uuidlib.UUID("0b7f3c52-51d8-4c8e-9a0e-2f5d6c7b8a91")

SUCCESS, ERROR = "Success", "Error"

# action → (conductor event, compute event, migration statuses that mean
# success, statuses that mean failure)
_MOVES = {
    "migrate": ("conductor_migrate_server", "compute_finish_resize",
                {"finished", "confirmed", "reverted"}, {"error", "failed", "cancelled"}),
    "resize": ("conductor_migrate_server", "compute_finish_resize",
               {"finished", "confirmed", "reverted"}, {"error", "failed", "cancelled"}),
    "live-migration": ("conductor_live_migrate_instance", "compute_live_migration",
                       {"completed", "done"}, {"error", "failed", "cancelled"}),
    "evacuate": ("conductor_rebuild_server", "compute_rebuild_instance",
                 {"done", "completed"}, {"error", "failed", "cancelled"}),
}
# Actions the API finishes itself, and the one event each shows.
_API_DONE = {"confirmResize": "compute_confirm_resize", "revertResize": "compute_revert_resize",
             "delete": "api_delete", "stop": "compute_stop_instance", "start": "compute_start_instance",
             "shelve": "compute_shelve_instance", "shelveOffload": "compute_shelve_offload_instance"}
# Lifecycle actions that finish on the compute, read from the instance record
# (and its latest fault): action → (event, whether they show the action still
# running, whether they show it failed).
_ON_COMPUTE = {
    "rebuild": ("compute_rebuild_instance",
                lambda r, a, f: r.task_state is not None and r.task_state.value == "rebuild_spawning",
                lambda r, a, f: r.vm_state.value == "error"),
    # An offloaded server's unshelve is a build on the chosen host (the API
    # records the action once the build is handed over).
    "unshelve": ("compute_unshelve_instance",
                 lambda r, a, f: r.vm_state.value == "building"
                 or (r.vm_state.value == "shelved_offloaded" and r.task_state is not None),
                 lambda r, a, f: r.vm_state.value == "error" or _unshelve_failed(r, a, f)),
}


def _unshelve_failed(record: InstanceRecord, action: InstanceAction, fault: Fault | None) -> bool:
    """Offloaded again by a failed build: the failure recorded (``last_failure``,
    which the hand-over cleared) and a fault of this action's time that no
    launch came after (a server unshelved, then offloaded again, succeeded)."""
    if record.vm_state.value != "shelved_offloaded" or record.last_failure is None or fault is None:
        return False
    at = fault.created_at
    return at is not None and at >= action.start_time and (record.launched_at is None or at >= record.launched_at)


def migration_uuid(request_id: str, instance_uuid: str) -> str:
    """The uuid of the migration a move request starts (one per instance)."""
    return str(uuidlib.uuid5(_NS, f"{request_id}/{instance_uuid}"))


def is_move(action: str) -> bool:
    return action in _MOVES


def needs_fault(action: InstanceAction) -> bool:
    """Whether ``outcome`` needs the instance's latest fault for this action."""
    return action.action == "unshelve" and action.finish_time is None


@dataclasses.dataclass(frozen=True)
class Event:
    event: str
    start_time: dt.datetime
    finish_time: dt.datetime | None
    result: str | None
    host: str | None = None


@dataclasses.dataclass(frozen=True)
class Outcome:
    finish_time: dt.datetime | None
    message: str | None           # "Error" when it failed, as Nova shows it
    events: tuple[Event, ...]

    @property
    def final(self) -> bool:
        return self.finish_time is not None


def _create(action: InstanceAction, record: InstanceRecord | None, in_cell0: bool) -> Outcome:
    start = action.start_time
    if record is None or in_cell0:
        # Still a build request, or buried in cell0 by the super conductor
        # (which closed the action itself).
        result = ERROR if (in_cell0 or action.message) else None
        end = action.finish_time if result else None
        return Outcome(end, action.message or (ERROR if in_cell0 else None),
                       (Event("conductor_schedule_and_build_instances", start, end, result),))
    scheduled = Event("conductor_schedule_and_build_instances", start, record.created_at, SUCCESS)
    state = record.vm_state.value
    if record.launched_at is not None:
        build = Event("compute__do_build_and_run_instance", record.created_at, record.launched_at, SUCCESS,
                      record.host)
        return Outcome(record.launched_at, None, (scheduled, build))
    if state == "error":
        # A failed build has no host any more: the last one tried.
        last = record.host or (record.hosts_tried[-1].host if record.hosts_tried else None)
        build = Event("compute__do_build_and_run_instance", record.created_at, record.updated_at, ERROR, last)
        return Outcome(record.updated_at, ERROR, (scheduled, build))
    build = Event("compute__do_build_and_run_instance", record.created_at, None, None, record.host)
    return Outcome(None, None, (scheduled, build))


def _move(action: InstanceAction, migration: MigrationRecord | None) -> Outcome:
    conductor_event, compute_event, ok, failed = _MOVES[action.action]
    start = action.start_time
    if migration is None:
        # Refused before a migration was recorded (the API closed it with "Error").
        end = action.finish_time
        return Outcome(end, action.message, (Event(conductor_event, start, end, ERROR if end else None),))
    scheduled = migration.dest_compute is not None
    conductor = Event(conductor_event, start, migration.created_at if scheduled else action.finish_time,
                      SUCCESS if scheduled else (ERROR if action.finish_time or migration.status in failed
                                                 else None))
    if not scheduled:
        end = action.finish_time or (migration.updated_at if migration.status in failed else None)
        return Outcome(end, ERROR if end else None, (conductor,))
    if migration.status in ok:
        result, end = SUCCESS, migration.updated_at
    elif migration.status in failed:
        result, end = ERROR, migration.updated_at
    else:
        result, end = None, None
    compute = Event(compute_event, migration.created_at, end, result, migration.dest_compute)
    return Outcome(end, ERROR if result == ERROR else None, (conductor, compute))


def _on_compute(action: InstanceAction, record: InstanceRecord, fault: Fault | None) -> Outcome:
    name, running, failed_now = _ON_COMPUTE[action.action]
    if running(record, action, fault):
        return Outcome(None, None, (Event(name, action.start_time, None, None, record.host),))
    failed = failed_now(record, action, fault)
    end = max(record.launched_at or record.updated_at, record.updated_at) if not failed else record.updated_at
    return Outcome(end, ERROR if failed else None,
                   (Event(name, action.start_time, end, ERROR if failed else SUCCESS, record.host),))


def outcome(action: InstanceAction, record: InstanceRecord | None, migration: MigrationRecord | None, *,
            in_cell0: bool = False, fault: Fault | None = None) -> Outcome:
    """``fault``: the instance's latest (read only when ``needs_fault``)."""
    if action.action == "create":
        return _create(action, record, in_cell0)
    if action.action in _MOVES:
        return _move(action, migration)
    if action.action in _ON_COMPUTE and action.finish_time is None and record is not None:
        return _on_compute(action, record, fault)
    name = _ON_COMPUTE[action.action][0] if action.action in _ON_COMPUTE else \
        _API_DONE.get(action.action, f"api_{action.action}")
    end = action.finish_time
    result = None if end is None else (ERROR if action.message else SUCCESS)
    return Outcome(end, action.message, (Event(name, action.start_time, end, result,
                                               record.host if record is not None else None),))
