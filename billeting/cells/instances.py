"""Instance records and faults in a cell database, and the build state machine.

Every change of state is a compare-and-set on the instance row: it names
the state it expects (vm_state, task_state, and for builds the host and the
attempt number) and changes nothing when the row is elsewhere. Two parties
that race for one transition (a redelivered message and a sweep, a delete
and a finishing build) therefore cannot both win, and the loser learns it
from the ``False`` it gets back.

Build state machine (vm_state/task_state; ``n`` = num_attempts)::

    created by the API level (handoff.start_build), allocation claimed for H1
      │
      ▼
    building/scheduling  host=H1, n=1 ── compute H1 takes it ──▶ building/spawning
      ▲       │                                                   │        │
      │       │ sweep: H1 down, or never took it                  │ spawn  │ spawn failed /
      │       ▼                                                   │ ok     │ compute restarted /
      │     building/rescheduling  ◀──────────────────────────────┼────────┘ sweep: H1 down
      │       │ (the failed host's allocation is deleted             ▼
      │       │  before the conductor is asked)                   active
      │       │
      │       ├── conductor claimed alternate H2 ──▶ building/scheduling host=H2, n+1
      └───────┘
              └── attempts or alternates exhausted ──▶ error + fault "Exhausted all hosts ..."

    building/spawning ── build aborted, or retry off ──▶ error + fault (allocation deleted)
    any state but deleted ── delete ──▶ */deleting ──▶ deleted (guest and allocation gone)

Who holds an allocation: an instance in ``scheduling``/``spawning``/
``active`` holds exactly its current Selection's allocation request; one in
``rescheduling`` holds nothing once its compute has un-claimed (a crash may
leave the old one, which the conductor recognises and deletes); ``error``
and ``deleted`` hold nothing (the audit removes anything they still hold).
"""
from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta, timezone

import msgspec
from sqlalchemy import Connection, Engine, case, func, insert, select, update
from sqlalchemy.exc import IntegrityError

from billeting import typeinfo
from billeting.cells import tables as t
from billeting.cells.messages import BuildInstance, HostNode, InstanceSpec, RequestSummary
from billeting.common.db.tx import run_read, run_write
from billeting.scheduler.nova import Flavor, Image
from billeting.scheduler.selection import Selection


class VmState(enum.StrEnum):
    BUILDING = "building"
    ACTIVE = "active"
    ERROR = "error"
    DELETED = "deleted"
    # A resize or cold migration finished on the destination and waits for
    # confirm or revert (the API shows VERIFY_RESIZE); see cells.move_states.
    RESIZED = "resized"
    # The lifecycle actions (cells.lifecycle_states): powered off on its host;
    # shelved on its host (still holding its allocation); shelved and
    # offloaded (no host, no allocation) until it is unshelved.
    STOPPED = "stopped"
    SHELVED = "shelved"
    SHELVED_OFFLOADED = "shelved_offloaded"


class TaskState(enum.StrEnum):
    SCHEDULING = "scheduling"      # cast to a compute, not yet taken
    SPAWNING = "spawning"          # the compute is building it
    RESCHEDULING = "rescheduling"  # the attempt failed; the cell conductor picks the next host
    DELETING = "deleting"
    # Moves (cells.move_states holds their transitions).
    RESIZE_PREP = "resize_prep"            # the conductor is scheduling the destination
    RESIZE_MIGRATING = "resize_migrating"  # cast to the destination, not yet taken
    RESIZE_FINISH = "resize_finish"        # the destination is building the guest
    RESIZE_REVERTING = "resize_reverting"
    RESIZE_CONFIRMING = "resize_confirming"
    MIGRATING = "migrating"                # live migration in flight
    REBUILDING = "rebuilding"              # evacuation: rebuilt on another host
    # Lifecycle actions (cells.lifecycle_states holds their transitions).
    REBUILD_SPAWNING = "rebuild_spawning"  # rebuilt in place on its host, with its image
    SHELVING_OFFLOADING = "shelving_offloading"
    UNSHELVING = "unshelving"              # offloaded, being scheduled again


# Nova's fault code for build failures; the API shows it with the message.
FAULT_CODE = 500


class Fault(msgspec.Struct, frozen=True, kw_only=True):
    code: int
    message: str
    details: str = ""
    host: str | None = None
    created_at: datetime | None = None


class InstanceRecord(msgspec.Struct, frozen=True, kw_only=True):
    uuid: str
    name: str
    project_id: str
    user_id: str
    vm_state: VmState
    task_state: TaskState | None
    host: str | None
    node: str | None
    compute_node_uuid: str | None
    availability_zone: str | None
    flavor: Flavor
    image: Image | None
    request: RequestSummary
    selection: Selection | None          # the claimed Selection of the current attempt
    alternates: tuple[Selection, ...]    # what is left to retry on, unclaimed
    num_attempts: int
    hosts_tried: tuple[HostNode, ...]
    last_failure: str | None
    created_at: datetime
    updated_at: datetime
    launched_at: datetime | None
    deleted_at: datetime | None
    # Who locked the server ("owner" or "admin", as Nova says), and why; None: unlocked.
    locked_by: str | None = None
    locked_reason: str | None = None

    @property
    def spec(self) -> InstanceSpec:
        return InstanceSpec(uuid=self.uuid, name=self.name, flavor=self.flavor, image=self.image,
                            created_at=self.created_at)


class InstanceExists(Exception):
    pass


_enc = msgspec.json.Encoder().encode
_dec_flavor = typeinfo.decoder(Flavor).decode
_dec_image = typeinfo.decoder(Image).decode
_dec_request = typeinfo.decoder(RequestSummary).decode
_dec_selection = typeinfo.decoder(Selection).decode
_dec_selections = typeinfo.decoder(tuple[Selection, ...]).decode
_dec_hosts = typeinfo.decoder(tuple[HostNode, ...]).decode


def utcnow() -> datetime:
    """Naive UTC, as every backend stores DateTime the same way then."""
    return datetime.now(timezone.utc).replace(tzinfo=None)


def _text(value) -> str:
    return _enc(value).decode()


def _record(row) -> InstanceRecord:
    return InstanceRecord(
        uuid=row.uuid, name=row.name, project_id=row.project_id, user_id=row.user_id,
        vm_state=VmState(row.vm_state), task_state=TaskState(row.task_state) if row.task_state else None,
        host=row.host, node=row.node, compute_node_uuid=row.compute_node_uuid,
        availability_zone=row.availability_zone, flavor=_dec_flavor(row.flavor),
        image=_dec_image(row.image) if row.image else None, request=_dec_request(row.request),
        selection=_dec_selection(row.selection) if row.selection else None,
        alternates=_dec_selections(row.alternates), num_attempts=row.num_attempts,
        hosts_tried=_dec_hosts(row.hosts_tried), last_failure=row.last_failure,
        created_at=row.created_at, updated_at=row.updated_at, launched_at=row.launched_at,
        deleted_at=row.deleted_at, locked_by=row.locked_by, locked_reason=row.locked_reason)


# --- creation ---------------------------------------------------------------------

def create(engine: Engine, build: BuildInstance) -> InstanceRecord:
    """The record of a build about to be cast to ``build.selection``'s host
    (attempt 1, or the attempt the message names). Raises InstanceExists."""
    sel = build.selection
    now = utcnow()
    spec = build.instance
    values = dict(
        uuid=spec.uuid, name=spec.name, project_id=build.request.project_id, user_id=build.request.user_id,
        vm_state=VmState.BUILDING.value, task_state=TaskState.SCHEDULING.value,
        host=sel.service_host, node=sel.nodename, compute_node_uuid=sel.compute_node_uuid,
        availability_zone=sel.availability_zone, flavor=_text(spec.flavor),
        image=_text(spec.image) if spec.image is not None else None, request=_text(build.request),
        selection=_text(sel), alternates=_text(build.alternates), num_attempts=build.attempt,
        hosts_tried=_text([HostNode(sel.service_host, sel.nodename)]), last_failure=None,
        created_at=spec.created_at or now, updated_at=now)
    try:
        run_write(engine, lambda conn: conn.execute(insert(t.instances).values(**values)))
    except IntegrityError:
        raise InstanceExists(f"instance {spec.uuid} already exists in this cell") from None
    return get(engine, spec.uuid)  # type: ignore[return-value]


def bury(engine: Engine, spec: InstanceSpec, request: RequestSummary, fault: Fault) -> InstanceRecord:
    """An instance that never got a host, in ERROR with its fault (cell0).
    Repeating it for the same instance changes nothing."""
    now = utcnow()

    def work(conn: Connection) -> None:
        if conn.execute(select(t.instances.c.uuid).where(t.instances.c.uuid == spec.uuid)).first():
            return
        conn.execute(insert(t.instances).values(
            uuid=spec.uuid, name=spec.name, project_id=request.project_id, user_id=request.user_id,
            vm_state=VmState.ERROR.value, task_state=None, availability_zone=request.availability_zone,
            flavor=_text(spec.flavor), image=_text(spec.image) if spec.image is not None else None,
            request=_text(request), selection=None, alternates="[]", num_attempts=0, hosts_tried="[]",
            last_failure=fault.message, created_at=spec.created_at or now, updated_at=now))
        _add_fault(conn, spec.uuid, fault, now)

    run_write(engine, work)
    return get(engine, spec.uuid)  # type: ignore[return-value]


# --- reads ------------------------------------------------------------------------

def get(engine: Engine, uuid: str) -> InstanceRecord | None:
    row = run_read(engine, lambda conn: conn.execute(
        select(t.instances).where(t.instances.c.uuid == uuid)).first())
    return _record(row) if row is not None else None


def get_many(engine: Engine, uuids: Iterable[str]) -> dict[str, InstanceRecord]:
    wanted = list(set(uuids))
    found: dict[str, InstanceRecord] = {}
    for start in range(0, len(wanted), 500):
        chunk = wanted[start:start + 500]
        rows = run_read(engine, lambda conn: conn.execute(
            select(t.instances).where(t.instances.c.uuid.in_(chunk))).all())
        found.update((row.uuid, _record(row)) for row in rows)
    return found


def on_host(engine: Engine, host: str, *, vm_states: Sequence[VmState] | None = None) -> list[InstanceRecord]:
    query = select(t.instances).where(t.instances.c.host == host)
    if vm_states is not None:
        query = query.where(t.instances.c.vm_state.in_([s.value for s in vm_states]))
    return [_record(r) for r in run_read(engine, lambda conn: conn.execute(query.order_by(t.instances.c.created_at)).all())]


def by_node(engine: Engine) -> dict[str, list[tuple[str, str]]]:
    """Node → (name, uuid) of each instance not deleted on it, oldest first."""
    c = t.instances.c
    query = (select(c.node, c.name, c.uuid).where(c.node.is_not(None), c.vm_state != VmState.DELETED.value)
             .order_by(c.created_at, c.uuid))
    found: dict[str, list[tuple[str, str]]] = {}
    for node, name, uuid in run_read(engine, lambda conn: conn.execute(query).all()):
        found.setdefault(node, []).append((name, uuid))
    return found


def in_task_state(engine: Engine, task_state: TaskState, *, older_than: datetime | None = None) -> list[InstanceRecord]:
    """Instances in ``task_state`` whose last change is before ``older_than``."""
    query = select(t.instances).where(t.instances.c.task_state == task_state.value,
                                      t.instances.c.vm_state != VmState.DELETED.value)
    if older_than is not None:
        query = query.where(t.instances.c.updated_at <= older_than)
    return [_record(r) for r in run_read(engine, lambda conn: conn.execute(query).all())]


def listing(engine: Engine, *, include_deleted: bool = False) -> list[InstanceRecord]:
    query = select(t.instances)
    if not include_deleted:
        query = query.where(t.instances.c.vm_state != VmState.DELETED.value)
    return [_record(r) for r in run_read(engine, lambda conn: conn.execute(
        query.order_by(t.instances.c.created_at, t.instances.c.uuid)).all())]


def faults(engine: Engine, uuid: str) -> list[Fault]:
    rows = run_read(engine, lambda conn: conn.execute(
        select(t.instance_faults).where(t.instance_faults.c.instance_uuid == uuid)
        .order_by(t.instance_faults.c.id)).all())
    return [_fault(r) for r in rows]


def _fault(row) -> Fault:
    return Fault(code=row.code, message=row.message, details=row.details, host=row.host, created_at=row.created_at)


def latest_fault(engine: Engine, uuid: str) -> Fault | None:
    found = faults(engine, uuid)
    return found[-1] if found else None


_FAULT_BATCH = 500  # ids per IN list: far below every backend's bound on bound parameters


def latest_faults(engine: Engine, uuids: Sequence[str]) -> dict[str, Fault]:
    """The newest fault of each of ``uuids`` that has one, in one read (a
    listing of a thousand servers in ERROR is not a thousand transactions)."""
    wanted = list(dict.fromkeys(uuids))

    def read(conn: Connection) -> dict[str, Fault]:
        newest: dict[str, Fault] = {}
        for start in range(0, len(wanted), _FAULT_BATCH):
            rows = conn.execute(select(t.instance_faults)
                                .where(t.instance_faults.c.instance_uuid.in_(wanted[start:start + _FAULT_BATCH]))
                                .order_by(t.instance_faults.c.id)).all()
            for r in rows:  # id order: the last one seen is the newest
                newest[r.instance_uuid] = _fault(r)
        return newest

    return run_read(engine, read) if wanted else {}


# --- transitions (compare-and-set) ---------------------------------------------------

def _cas(conn: Connection, uuid: str, expect: dict, values: dict) -> bool:
    c = t.instances.c
    conds = [c.uuid == uuid]
    for name, want in expect.items():
        col = getattr(c, name)
        if isinstance(want, (tuple, list, frozenset, set)):
            conds.append(col.in_([w.value if isinstance(w, enum.Enum) else w for w in want]))
        elif want is None:
            conds.append(col.is_(None))
        else:
            conds.append(col == (want.value if isinstance(want, enum.Enum) else want))
    values = {k: (v.value if isinstance(v, enum.Enum) else v) for k, v in values.items()}
    values.setdefault("updated_at", utcnow())
    return conn.execute(update(t.instances).where(*conds).values(**values)).rowcount == 1


def _write_cas(engine: Engine, uuid: str, expect: dict, values: dict) -> bool:
    return run_write(engine, lambda conn: _cas(conn, uuid, expect, values))


def _attempt(host: str | None, attempt: int, task: TaskState | tuple[TaskState, ...]) -> dict:
    expect = {"vm_state": VmState.BUILDING, "task_state": task, "num_attempts": attempt}
    if host is not None:
        expect["host"] = host
    return expect


def start_spawn(engine: Engine, uuid: str, *, host: str, attempt: int) -> bool:
    """scheduling → spawning: ``host`` takes attempt ``attempt``."""
    return _write_cas(engine, uuid, _attempt(host, attempt, TaskState.SCHEDULING),
                      {"task_state": TaskState.SPAWNING})


def finish_spawn(engine: Engine, uuid: str, *, host: str, attempt: int) -> bool:
    """spawning → active."""
    now = utcnow()
    return _write_cas(engine, uuid, _attempt(host, attempt, TaskState.SPAWNING),
                      {"vm_state": VmState.ACTIVE, "task_state": None, "launched_at": now, "updated_at": now})


def begin_reschedule(engine: Engine, uuid: str, *, host: str, attempt: int, reason: str,
                     from_states: tuple[TaskState, ...] = (TaskState.SPAWNING,)) -> bool:
    """spawning (or scheduling, for a sweep) → rescheduling, recording why."""
    return _write_cas(engine, uuid, _attempt(host, attempt, from_states),
                      {"task_state": TaskState.RESCHEDULING, "last_failure": reason[:4000]})


def advance(engine: Engine, uuid: str, *, attempt: int, selection: Selection,
            remaining: tuple[Selection, ...], hosts_tried: tuple[HostNode, ...]) -> bool:
    """rescheduling (attempt n) → scheduling on ``selection``'s host (attempt n+1)."""
    tried = (*hosts_tried, HostNode(selection.service_host, selection.nodename))
    return _write_cas(engine, uuid, _attempt(None, attempt, TaskState.RESCHEDULING), {
        "task_state": TaskState.SCHEDULING, "host": selection.service_host, "node": selection.nodename,
        "compute_node_uuid": selection.compute_node_uuid, "availability_zone": selection.availability_zone,
        "selection": _text(selection), "alternates": _text(remaining), "num_attempts": attempt + 1,
        "hosts_tried": _text(tried)})


def touch(engine: Engine, uuid: str, *, attempt: int, task_state: TaskState) -> bool:
    """Restart the clock of a state a sweep is watching (after re-casting)."""
    return _write_cas(engine, uuid, {"task_state": task_state, "num_attempts": attempt}, {})


def fail_build(engine: Engine, uuid: str, *, attempt: int, from_states: tuple[TaskState, ...],
               fault: Fault, host: str | None = None) -> bool:
    """building (attempt ``attempt``, in one of ``from_states``) → error, with
    ``fault``, in one transaction. The instance leaves its host."""
    now = utcnow()

    def work(conn: Connection) -> bool:
        if not _cas(conn, uuid, _attempt(host, attempt, from_states), {
                "vm_state": VmState.ERROR, "task_state": None, "host": None, "node": None,
                "compute_node_uuid": None, "alternates": "[]", "last_failure": fault.message,
                "updated_at": now}):
            return False
        _add_fault(conn, uuid, fault, now)
        return True

    return run_write(engine, work)


def begin_delete(engine: Engine, uuid: str) -> InstanceRecord | None:
    """Any state but deleted → deleting. Returns the record as it was before
    (so the caller knows host and allocation), or None when there is nothing
    to delete. Idempotent: a record already deleting is returned again."""

    def work(conn: Connection) -> InstanceRecord | None:
        row = conn.execute(select(t.instances).where(t.instances.c.uuid == uuid)).first()
        if row is None or row.vm_state == VmState.DELETED.value:
            return None
        before = _record(row)
        if not _cas(conn, uuid, {"vm_state": before.vm_state, "task_state": before.task_state,
                                 "num_attempts": before.num_attempts},
                    {"task_state": TaskState.DELETING}):
            return None  # changed under us: the caller reads again
        return before

    for _ in range(5):
        found = run_write(engine, work)
        if found is not None:
            return found
        current = get(engine, uuid)
        if current is None or current.vm_state is VmState.DELETED:
            return None
    return None


def finish_delete(engine: Engine, uuid: str) -> bool:
    """deleting → deleted."""
    now = utcnow()
    return _write_cas(engine, uuid, {"task_state": TaskState.DELETING},
                      {"vm_state": VmState.DELETED, "task_state": None, "deleted_at": now, "updated_at": now})


def add_fault(engine: Engine, uuid: str, fault: Fault) -> None:
    run_write(engine, lambda conn: _add_fault(conn, uuid, fault, utcnow()))


def _add_fault(conn: Connection, uuid: str, fault: Fault, now: datetime) -> None:
    conn.execute(insert(t.instance_faults).values(
        instance_uuid=uuid, code=fault.code, message=fault.message[:255], details=fault.details,
        host=fault.host, created_at=fault.created_at or now))


def age(record: InstanceRecord, now: datetime | None = None) -> timedelta:
    return (now or utcnow()) - record.updated_at


def counts_by_node(conn: Connection) -> dict[str, tuple[int, int]]:
    """node → (instances on it, of which busy building or deleting)."""
    c = t.instances.c
    busy = func.sum(case((c.task_state.in_(
        [TaskState.SCHEDULING.value, TaskState.SPAWNING.value, TaskState.DELETING.value]), 1), else_=0))
    rows = conn.execute(select(c.node, func.count(), busy).where(
        c.node.is_not(None), c.vm_state != VmState.DELETED.value).group_by(c.node)).all()
    return {row[0]: (int(row[1]), int(row[2] or 0)) for row in rows}
